// Counters every decoder keeps: nothing is dropped without being counted here. Fields a wire
// format cannot know stay 0 (the legacy format has no frames; only ITM has overflow packets).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace rackprof::protocol {

struct DecoderStats {
    std::uint64_t bytes_in = 0;         // wire bytes (or text characters) received
    std::uint64_t bytes_discarded = 0;  // wire bytes that became no record (garbage, truncation)
    std::uint64_t resyncs = 0;          // times the decoder lost alignment and searched again
    std::uint64_t arcs = 0;             // arc records produced
    std::uint64_t pc_samples = 0;       // PC-sample records produced
    std::uint64_t frames = 0;           // good frames (framed protocol, TPIU)
    std::uint64_t frames_bad = 0;       // frames that failed their check (CRC, length, parse)
    std::uint64_t frames_lost = 0;      // frames missing by sequence number
    std::uint64_t target_dropped = 0;   // records the target reported it dropped (queue full)
    std::uint64_t overflows = 0;        // ITM overflow packets: the target's trace dropped data
    std::uint64_t sleep_samples = 0;    // DWT PC samples taken while the core slept
    // Probe links (framed v4): time the link held the target halted to sample it, and stacks
    // whose unwinding stopped before the outermost frame.
    std::uint64_t samples_halted_ns = 0;
    std::uint64_t stack_unwind_failures = 0;

    std::uint64_t records() const { return arcs + pc_samples; }
    friend bool operator==(const DecoderStats&, const DecoderStats&) = default;
};

// Every DecoderStats counter by name, in declaration order: the one list the session counters
// (storage/counters.h), the JSON views and the tools derive theirs from. A counter added above
// must be added here too; the static_assert below fails until it is.
struct DecoderCounter {
    std::string_view name;
    std::uint64_t DecoderStats::*member;
};

inline constexpr std::array<DecoderCounter, 13> kDecoderCounters = {{
    {"bytes_in", &DecoderStats::bytes_in},
    {"bytes_discarded", &DecoderStats::bytes_discarded},
    {"resyncs", &DecoderStats::resyncs},
    {"arcs", &DecoderStats::arcs},
    {"pc_samples", &DecoderStats::pc_samples},
    {"frames", &DecoderStats::frames},
    {"frames_bad", &DecoderStats::frames_bad},
    {"frames_lost", &DecoderStats::frames_lost},
    {"target_dropped", &DecoderStats::target_dropped},
    {"overflows", &DecoderStats::overflows},
    {"sleep_samples", &DecoderStats::sleep_samples},
    {"samples_halted_ns", &DecoderStats::samples_halted_ns},
    {"stack_unwind_failures", &DecoderStats::stack_unwind_failures},
}};
static_assert(sizeof(DecoderStats) == kDecoderCounters.size() * sizeof(std::uint64_t),
              "a DecoderStats counter is missing from kDecoderCounters");

// Calls f(counter, value) for every counter, in kDecoderCounters' order.
template <typename F>
constexpr void for_each_counter(const DecoderStats& stats, F&& f) {
    for (const DecoderCounter& counter : kDecoderCounters) f(counter, stats.*counter.member);
}

}  // namespace rackprof::protocol
