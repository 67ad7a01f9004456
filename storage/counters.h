// A session's counters, and the one table that lists them. Everything that stores, reads,
// copies or shows the counters (the SQL columns, the decoder mapping, the JSON views) walks
// kSessionCounters instead of spelling the fields out, so a new counter is one field, one
// table row and, for storage, one migration adding its column.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "protocol/decoder_stats.h"

namespace rackprof::storage {

// What the decoder counted (protocol::DecoderStats' fields of the same names) and what the
// session itself counted: gaps, the losses to a full storage queue (the capture side's count)
// and the losses to failed commits (the storage writer's count: disk full, I/O errors).
struct SessionCounters {
    std::uint64_t bytes_in = 0;         // wire bytes received
    std::uint64_t bytes_discarded = 0;  // wire bytes that became no record
    std::uint64_t resyncs = 0;          // times the decoder lost alignment
    std::uint64_t arcs = 0;             // arc records decoded
    std::uint64_t pc_samples = 0;       // PC-sample records decoded
    std::uint64_t gaps = 0;          // times the stream broke: the link went away, storage failed
    std::uint64_t records_lost = 0;  // dropped because the storage queue was full
    std::uint64_t bytes_lost = 0;    // raw bytes dropped with them
    // Framed protocol and TPIU (0 for legacy).
    std::uint64_t frames = 0;          // good frames
    std::uint64_t frames_bad = 0;      // frames that failed their check
    std::uint64_t frames_lost = 0;     // frames missing by sequence number
    std::uint64_t target_dropped = 0;  // records the target dropped (its queue was full)
    // ITM (0 otherwise).
    std::uint64_t overflows = 0;      // overflow packets: the target's trace dropped data (loss)
    std::uint64_t sleep_samples = 0;  // DWT PC samples taken while the core slept (no function)
    // Storage failures (disk full, I/O error): records and raw bytes whose commit failed.
    std::uint64_t records_lost_storage = 0;
    std::uint64_t bytes_lost_storage = 0;
    // Probe links (0 otherwise): how long the link held the target halted to sample it (the
    // intrusion, part of the result), and sampled stacks whose unwinding stopped short.
    std::uint64_t samples_halted_ns = 0;
    std::uint64_t stack_unwind_failures = 0;
    friend bool operator==(const SessionCounters&, const SessionCounters&) = default;
};

// Where the live feed shows a counter. The feed predates this table and the dashboard reads
// its sections as they are: it never showed frames or bytes_lost (records_lost says it), and
// it shows sleep_samples among the losses.
enum class LiveSection : std::uint8_t { kNone, kTotals, kLosses };

struct SessionCounter {
    std::string_view name;  // also the SQL column and the JSON key
    std::uint64_t SessionCounters::*member;
    bool is_loss;  // data received or sent that never became a record
    LiveSection live;
};

// In SessionCounters' declaration order, which is the order of the JSON views' keys.
inline constexpr std::array<SessionCounter, 18> kSessionCounters = {{
    {"bytes_in", &SessionCounters::bytes_in, false, LiveSection::kTotals},
    {"bytes_discarded", &SessionCounters::bytes_discarded, true, LiveSection::kLosses},
    {"resyncs", &SessionCounters::resyncs, true, LiveSection::kLosses},
    {"arcs", &SessionCounters::arcs, false, LiveSection::kTotals},
    {"pc_samples", &SessionCounters::pc_samples, false, LiveSection::kTotals},
    {"gaps", &SessionCounters::gaps, true, LiveSection::kLosses},
    {"records_lost", &SessionCounters::records_lost, true, LiveSection::kLosses},
    {"bytes_lost", &SessionCounters::bytes_lost, true, LiveSection::kNone},
    {"frames", &SessionCounters::frames, false, LiveSection::kNone},
    {"frames_bad", &SessionCounters::frames_bad, true, LiveSection::kLosses},
    {"frames_lost", &SessionCounters::frames_lost, true, LiveSection::kLosses},
    {"target_dropped", &SessionCounters::target_dropped, true, LiveSection::kLosses},
    {"overflows", &SessionCounters::overflows, true, LiveSection::kLosses},
    {"sleep_samples", &SessionCounters::sleep_samples, false, LiveSection::kLosses},
    {"records_lost_storage", &SessionCounters::records_lost_storage, true, LiveSection::kLosses},
    {"bytes_lost_storage", &SessionCounters::bytes_lost_storage, true, LiveSection::kNone},
    {"samples_halted_ns", &SessionCounters::samples_halted_ns, false, LiveSection::kTotals},
    {"stack_unwind_failures", &SessionCounters::stack_unwind_failures, false, LiveSection::kLosses},
}};
static_assert(sizeof(SessionCounters) == kSessionCounters.size() * sizeof(std::uint64_t),
              "a SessionCounters counter is missing from kSessionCounters");

// Calls f(counter, value) for every counter, in kSessionCounters' order.
template <typename F>
constexpr void for_each_counter(const SessionCounters& counters, F&& f) {
    for (const SessionCounter& counter : kSessionCounters) f(counter, counters.*counter.member);
}

namespace counters_detail {

// The index of the session counter of this name, or kSessionCounters.size().
constexpr std::size_t session_counter_index(std::string_view name) {
    for (std::size_t i = 0; i < kSessionCounters.size(); ++i) {
        if (kSessionCounters[i].name == name) return i;
    }
    return kSessionCounters.size();
}

template <typename Table>
constexpr bool names_unique(const Table& table) {
    for (std::size_t i = 0; i < table.size(); ++i) {
        for (std::size_t j = i + 1; j < table.size(); ++j) {
            if (table[i].name == table[j].name) return false;
        }
    }
    return true;
}

}  // namespace counters_detail

static_assert(counters_detail::names_unique(kSessionCounters));
static_assert(counters_detail::names_unique(protocol::kDecoderCounters));

// A decoder counter and the session counter of the same name.
struct DecoderToSession {
    std::uint64_t protocol::DecoderStats::*decoder;
    std::uint64_t SessionCounters::*session;
};

// Derived from the names: every decoder counter has a session counter; the session's own
// (gaps and the storage losses) have no decoder counter.
inline constexpr auto kDecoderToSession = [] {
    std::array<DecoderToSession, protocol::kDecoderCounters.size()> pairs{};
    for (std::size_t i = 0; i < pairs.size(); ++i) {
        const auto& decoder = protocol::kDecoderCounters[i];
        // Indexing past the end here stops the build: a decoder counter without a session one.
        pairs[i] = {
            decoder.member,
            kSessionCounters.at(counters_detail::session_counter_index(decoder.name)).member};
    }
    return pairs;
}();

// What a decoder counted, as a session keeps it (the session's own counters, gaps and storage
// losses, stay as they are), and back.
void set_decoder_counters(SessionCounters& counters, const protocol::DecoderStats& stats);
protocol::DecoderStats decoder_counters(const SessionCounters& counters);

}  // namespace rackprof::storage
