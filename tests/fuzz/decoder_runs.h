// Runs a registry decoder over the same wire bytes in several chunkings and checks what
// protocol/README.md promises of every decoder: the same records, events and counters
// whatever the chunking, every wire byte counted in bytes_in, the record counters matching
// the records delivered.
#pragma once

#include <algorithm>
#include <memory>
#include <tuple>
#include <vector>

#include "protocol/wire_format.h"
#include "tests/fuzz/fuzz_input.h"

namespace rackprof::fuzz {

struct DecoderRun {
    std::unique_ptr<protocol::StreamDecoder> decoder;  // after finish(), for layer counters
    std::vector<protocol::Record> records;
    std::vector<protocol::StreamEvent> events;
    protocol::DecoderStats stats;
};

struct KeepAll : protocol::RecordSink {
    std::vector<protocol::Record> records;
    std::vector<protocol::StreamEvent> events;
    void on_records(std::span<const protocol::Record> batch) override {
        records.insert(records.end(), batch.begin(), batch.end());
    }
    void on_event(const protocol::StreamEvent& event) override { events.push_back(event); }
};

inline DecoderRun run_decoder(const protocol::WireSpec& spec, const std::vector<Bytes>& chunks) {
    DecoderRun run{protocol::make_decoder(spec), {}, {}, {}};
    KeepAll sink;
    for (const Bytes chunk : chunks) run.decoder->feed(chunk, sink);
    run.decoder->finish(sink);
    run.records = std::move(sink.records);
    run.events = std::move(sink.events);
    run.stats = run.decoder->stats();
    return run;
}

// Checks one run on its own: bytes_in and the record counters.
inline void check_counts(const DecoderRun& run, Bytes wire) {
    FUZZ_CHECK(run.stats.bytes_in == wire.size());
    FUZZ_CHECK(run.stats.bytes_discarded <= run.stats.bytes_in);
    const auto arcs = std::count_if(run.records.begin(), run.records.end(), [](const auto& r) {
        return r.kind == protocol::RecordKind::kArc;
    });
    FUZZ_CHECK(run.stats.arcs == static_cast<std::uint64_t>(arcs));
    FUZZ_CHECK(run.stats.records() == run.records.size());
}

// Order among records carries no meaning where a decoder has inner layers (SWO).
inline void sort_records(std::vector<protocol::Record>& records) {
    std::sort(records.begin(), records.end(), [](const auto& a, const auto& b) {
        return std::tie(a.kind, a.from_pc, a.self_pc, a.count) <
               std::tie(b.kind, b.from_pc, b.self_pc, b.count);
    });
}

// The payload whole, in the fuzzer's chunks, and a byte at a time; each run checked on its
// own, the second and third against the first. Returns the runs (whole first).
inline std::vector<DecoderRun> run_chunkings(const protocol::WireSpec& spec,
                                             const SettingsInput& in) {
    std::vector<DecoderRun> runs;
    runs.push_back(run_decoder(spec, {in.payload}));
    runs.push_back(run_decoder(spec, chunks_of(in.payload, in.chunk_lengths)));
    runs.push_back(run_decoder(spec, single_bytes(in.payload)));
    for (const DecoderRun& run : runs) {
        check_counts(run, in.payload);
        FUZZ_CHECK(run.stats == runs.front().stats);
    }
    return runs;
}

}  // namespace rackprof::fuzz
