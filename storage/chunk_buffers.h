// Buffers of chunks the writer has stored, for senders to fill again: a fresh buffer's pages
// fault on their first write, a cost the capture thread pays per page on a file read flat
// out. Only as many are kept as senders asked for, so a sender
// that never asks (an import) leaves none behind. Any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "protocol/record.h"

namespace rackprof::storage {

class ChunkBuffers {
  public:
    // At most this many buffers of each kind are kept, each of at most kMaxBytes.
    static constexpr std::size_t kKept = 4;
    static constexpr std::size_t kMaxBytes = 2u << 20;

    // An empty buffer with the room of a kept one, if any (else none).
    std::vector<protocol::Record> records();
    std::vector<std::uint8_t> raw();
    // Takes a stored chunk's buffers when a sender will want them; else leaves them.
    void keep(std::vector<protocol::Record>& records, std::vector<std::uint8_t>& raw);

  private:
    // Kept buffers of one kind, and how many more senders asked for than were given back.
    template <class T>
    struct Spares {
        std::vector<std::vector<T>> kept;
        std::size_t asked = 0;
    };
    template <class T>
    std::vector<T> take(Spares<T>& spares);
    template <class T>
    static void keep_one(std::vector<T>& buffer, Spares<T>& spares);

    std::mutex mutex_;
    Spares<protocol::Record> records_;
    Spares<std::uint8_t> raw_;
};

}  // namespace rackprof::storage
