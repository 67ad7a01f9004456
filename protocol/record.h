// Records: what a decoder turns wire bytes into, and what everything downstream consumes.
#pragma once

#include <cstdint>

namespace rackprof::protocol {

enum class RecordKind : std::uint8_t {
    kArc = 1,       // a call arc: caller return address -> callee address
    kPcSample = 2,  // one periodic program-counter sample
};

// One observation from the target. Addresses are as sent (the Thumb bit may be set).
// 16 bytes, so batches stay cache friendly on the hot decode path.
struct Record {
    RecordKind kind = RecordKind::kPcSample;
    std::uint32_t count = 1;    // how many times it was observed (1 for the legacy format)
    std::uint32_t from_pc = 0;  // arcs: the caller's return address; unused for samples
    std::uint32_t self_pc = 0;  // arcs: the callee; samples: the sampled PC

    static constexpr Record arc(std::uint32_t from, std::uint32_t self, std::uint32_t n = 1) {
        return Record{RecordKind::kArc, n, from, self};
    }
    static constexpr Record pc_sample(std::uint32_t pc, std::uint32_t n = 1) {
        return Record{RecordKind::kPcSample, n, 0, pc};
    }
    friend bool operator==(const Record&, const Record&) = default;
};

}  // namespace rackprof::protocol
