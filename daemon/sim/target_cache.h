// A model of the target runtime's record cache, as the arc cache of the thesis (sect. 8.2.2):
// direct-mapped; a hit counts, a miss evicts the entry it lands on, which leaves as one record
// with its count (ARC_N, or PC_N for a PC-sample cache). The simulator and the benchmarks use
// it to know exactly what a caching target sends.
#pragma once

#include <cstdint>
#include <vector>

#include "protocol/record.h"

namespace rackprof::daemon::sim {

class RecordCache {
  public:
    explicit RecordCache(std::size_t entries) : entries_(entries, protocol::Record::arc(0, 0, 0)) {}

    // `send(record)` receives what leaves the cache.
    template <typename Send>
    void add(const protocol::Record& r, Send&& send) {
        std::uint32_t h = (r.from_pc * 0x9E3779B1u) ^ (r.self_pc * 0x85EBCA6Bu);
        h ^= h >> 15;  // addresses share their low bits (alignment, Thumb bit)
        protocol::Record& e = entries_[h % entries_.size()];
        if (e.count > 0 && e.kind == r.kind && e.from_pc == r.from_pc && e.self_pc == r.self_pc &&
            e.count < 0xFFFFFFFFu - r.count) {
            e.count += r.count;
            return;
        }
        if (e.count > 0) send(e);
        e = r;
    }

    template <typename Send>
    void flush(Send&& send) {
        for (protocol::Record& e : entries_) {
            if (e.count > 0) send(e);
            e.count = 0;
        }
    }

  private:
    std::vector<protocol::Record> entries_;  // count 0: empty
};

}  // namespace rackprof::daemon::sim
