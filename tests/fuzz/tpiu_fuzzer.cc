// libFuzzer target: the TPIU deframer on its own (it has no registry entry; swo_fuzzer drives
// it through the registry). Settings: the trace source ID to keep, 1 + settings % 111.
#include "protocol/tpiu_deframer.h"
#include "tests/fuzz/fuzz_input.h"

namespace rackprof::fuzz {
namespace {

struct Deframed {
    std::vector<std::uint8_t> out;
    protocol::TpiuStats stats;
};

Deframed deframe(std::uint8_t id, const std::vector<Bytes>& chunks) {
    protocol::TpiuDeframer deframer(id);
    Deframed d;
    for (const Bytes chunk : chunks) deframer.feed(chunk, d.out);
    deframer.finish();
    d.stats = deframer.stats();
    return d;
}

}  // namespace
}  // namespace rackprof::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace rackprof::fuzz;
    const SettingsInput in = split_input(data, size);
    const auto id = static_cast<std::uint8_t>(1 + in.settings % 111);
    const Deframed whole = deframe(id, {in.payload});
    const auto& s = whole.stats;
    FUZZ_CHECK(s.bytes_in == in.payload.size());
    FUZZ_CHECK(s.bytes_in == s.bytes_out + s.bytes_skipped + s.bytes_padding + s.bytes_format +
                                 s.bytes_sync + s.bytes_discarded);
    FUZZ_CHECK(s.bytes_out == whole.out.size());
    FUZZ_CHECK(s.frames * 16 <= s.bytes_in);
    for (const auto& chunks : {chunks_of(in.payload, in.chunk_lengths), single_bytes(in.payload)}) {
        const Deframed split = deframe(id, chunks);
        FUZZ_CHECK(split.out == whole.out);
        FUZZ_CHECK(split.stats == whole.stats);
    }
    return 0;
}
