// Counters every decoder keeps: nothing is dropped without being counted here.
#pragma once

#include <cstdint>

namespace rackprof::protocol {

struct DecoderStats {
    std::uint64_t bytes_in = 0;         // wire bytes (or text characters) received
    std::uint64_t bytes_discarded = 0;  // wire bytes that became no record (garbage, truncation)
    std::uint64_t resyncs = 0;          // times the decoder lost alignment and searched again
    std::uint64_t arcs = 0;             // arc records produced
    std::uint64_t pc_samples = 0;       // PC-sample records produced

    std::uint64_t records() const { return arcs + pc_samples; }
    friend bool operator==(const DecoderStats&, const DecoderStats&) = default;
};

}  // namespace rackprof::protocol
