#include "storage/reader_pool.h"

namespace rackprof::storage {

ReaderPool::ReaderPool(std::filesystem::path path, std::size_t size)
    : path_(std::move(path)), size_(size == 0 ? 1 : size) {}

ReaderPool::Lease::~Lease() {
    if (store_) pool_.give_back(std::move(store_));
}

ReaderPool::Lease ReaderPool::lease() {
    std::unique_lock lock(mutex_);
    returned_.wait(lock, [&] { return !idle_.empty() || opened_ < size_; });
    if (!idle_.empty()) {
        auto store = std::move(idle_.back());
        idle_.pop_back();
        return Lease(*this, std::move(store));
    }
    ++opened_;
    lock.unlock();  // opening may take a while; others may lease meanwhile
    try {
        return Lease(*this, std::make_unique<SessionStore>(path_, Database::Mode::kReadOnly));
    } catch (...) {
        lock.lock();
        --opened_;
        returned_.notify_one();
        throw;
    }
}

void ReaderPool::give_back(std::unique_ptr<SessionStore> store) {
    {
        std::lock_guard lock(mutex_);
        idle_.push_back(std::move(store));
    }
    returned_.notify_one();
}

}  // namespace rackprof::storage
