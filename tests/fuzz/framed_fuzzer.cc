// libFuzzer target: the framed protocol v1 through the registry. Settings bit 0: the address
// width until a HELLO is 3 (else 4).
#include <cstring>

#include "protocol/framed_format.h"
#include "tests/fuzz/decoder_runs.h"

namespace rackprof::fuzz {
namespace {

// The wire cut after every delimiter, so each feed ends exactly one frame: a good frame's
// bytes (its delimiter included) are the only ones not discarded. Checks that and returns
// the run, to compare with the other chunkings.
DecoderRun run_frame_by_frame(const protocol::WireSpec& spec, Bytes wire) {
    DecoderRun run{protocol::make_decoder(spec), {}, {}, {}};
    KeepAll sink;
    std::uint64_t good_bytes = 0;
    std::uint64_t segments = 0;  // frames, good or bad: runs of bytes up to a delimiter
    std::size_t pos = 0;
    while (pos < wire.size()) {
        const auto* p = static_cast<const std::uint8_t*>(
            std::memchr(wire.data() + pos, protocol::kFrameDelimiter, wire.size() - pos));
        const std::size_t end = p ? static_cast<std::size_t>(p - wire.data()) + 1 : wire.size();
        const std::uint64_t frames_before = run.decoder->stats().frames;
        run.decoder->feed(wire.subspan(pos, end - pos), sink);
        const std::uint64_t good = run.decoder->stats().frames - frames_before;
        FUZZ_CHECK(good <= 1);
        FUZZ_CHECK(good == 0 || p != nullptr);  // only a delimiter ends a good frame
        if (good) good_bytes += end - pos;
        if (end - pos > (p ? 1u : 0u)) ++segments;
        pos = end;
    }
    run.decoder->finish(sink);
    run.records = std::move(sink.records);
    run.events = std::move(sink.events);
    run.stats = run.decoder->stats();
    FUZZ_CHECK(run.stats.bytes_discarded == run.stats.bytes_in - good_bytes);
    FUZZ_CHECK(run.stats.frames + run.stats.frames_bad == segments);
    return run;
}

}  // namespace
}  // namespace rackprof::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace rackprof::fuzz;
    const SettingsInput in = split_input(data, size);
    const rackprof::protocol::WireSpec spec{"framed", "bin", in.settings & 1 ? 3 : 4, std::nullopt};
    auto runs = run_chunkings(spec, in);
    runs.push_back(run_frame_by_frame(spec, in.payload));
    for (const DecoderRun& run : runs) {
        FUZZ_CHECK(run.stats == runs.front().stats);
        FUZZ_CHECK(run.records == runs.front().records);
        FUZZ_CHECK(run.events == runs.front().events);
    }
    const auto& stats = runs.front().stats;
    FUZZ_CHECK(stats.frames > 0 || stats.records() == 0);
    FUZZ_CHECK(stats.frames > 0 || stats.bytes_discarded == stats.bytes_in);
    return 0;
}
