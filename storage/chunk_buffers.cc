#include "storage/chunk_buffers.h"

#include <algorithm>

namespace rackprof::storage {

template <class T>
std::vector<T> ChunkBuffers::take(Spares<T>& spares) {
    std::lock_guard lock(mutex_);
    spares.asked = std::min(spares.asked + 1, kKept);
    if (spares.kept.empty()) return {};
    std::vector<T> buffer = std::move(spares.kept.back());
    spares.kept.pop_back();
    return buffer;
}

template <class T>
void ChunkBuffers::keep_one(std::vector<T>& buffer, Spares<T>& spares) {
    if (spares.asked == 0 || buffer.capacity() == 0 || buffer.capacity() * sizeof(T) > kMaxBytes ||
        spares.kept.size() >= kKept)
        return;
    --spares.asked;
    buffer.clear();
    spares.kept.push_back(std::move(buffer));
}

std::vector<protocol::Record> ChunkBuffers::records() {
    return take(records_);
}

std::vector<std::uint8_t> ChunkBuffers::raw() {
    return take(raw_);
}

void ChunkBuffers::keep(std::vector<protocol::Record>& records, std::vector<std::uint8_t>& raw) {
    std::lock_guard lock(mutex_);
    keep_one(records, records_);
    keep_one(raw, raw_);
}

}  // namespace rackprof::storage
