// A few read-only connections shared by the readers (HTTP handlers, live feeds), so a request
// does not open SQLite anew. Connections open lazily, up to the pool's size; a lease waits
// while all are out. Thread-safe.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <filesystem>
#include <memory>
#include <mutex>
#include <vector>

#include "storage/session_store.h"

namespace rackprof::storage {

class ReaderPool {
  public:
    ReaderPool(std::filesystem::path path, std::size_t size = 4);
    ReaderPool(const ReaderPool&) = delete;
    ReaderPool& operator=(const ReaderPool&) = delete;

    // One connection, for this thread only, until the lease ends.
    class Lease {
      public:
        Lease(Lease&& other) noexcept : pool_(other.pool_), store_(std::move(other.store_)) {}
        Lease& operator=(Lease&&) = delete;
        Lease(const Lease&) = delete;
        ~Lease();
        SessionStore& operator*() const { return *store_; }
        SessionStore* operator->() const { return store_.get(); }

      private:
        friend class ReaderPool;
        Lease(ReaderPool& pool, std::unique_ptr<SessionStore> store)
            : pool_(pool), store_(std::move(store)) {}
        ReaderPool& pool_;
        std::unique_ptr<SessionStore> store_;
    };

    // Throws StorageError when a new connection cannot be opened.
    Lease lease();
    const std::filesystem::path& path() const { return path_; }

  private:
    void give_back(std::unique_ptr<SessionStore> store);

    std::filesystem::path path_;
    std::size_t size_;
    std::mutex mutex_;
    std::condition_variable returned_;
    std::vector<std::unique_ptr<SessionStore>> idle_;
    std::size_t opened_ = 0;  // idle and leased
};

}  // namespace rackprof::storage
