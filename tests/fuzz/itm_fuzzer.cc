// libFuzzer target: the ITM/DWT packet decoder on its own (it has no registry entry;
// swo_fuzzer drives it through the registry). No settings bits are used.
#include "protocol/itm_decoder.h"
#include "protocol/swo_test_support.h"
#include "tests/fuzz/fuzz_input.h"

namespace rackprof::fuzz {
namespace {

struct Decoded {
    std::vector<protocol::ItmPacket> packets;
    protocol::ItmStats stats;
};

Decoded decode(const std::vector<Bytes>& chunks) {
    protocol::ItmDecoder decoder;
    protocol::testing::PacketCollector sink;
    for (const Bytes chunk : chunks) decoder.feed(chunk, sink);
    decoder.finish();
    return {std::move(sink.packets), decoder.stats()};
}

}  // namespace
}  // namespace rackprof::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace rackprof::fuzz;
    const SettingsInput in = split_input(data, size);
    const Decoded whole = decode({in.payload});
    const auto& s = whole.stats;
    FUZZ_CHECK(s.bytes_in == in.payload.size());
    FUZZ_CHECK(s.bytes_in == s.bytes_decoded + s.bytes_discarded);
    FUZZ_CHECK(s.packets == whole.packets.size());
    FUZZ_CHECK(s.syncs <= s.packets);
    for (const auto& chunks : {chunks_of(in.payload, in.chunk_lengths), single_bytes(in.payload)}) {
        const Decoded split = decode(chunks);
        FUZZ_CHECK(split.packets == whole.packets);
        FUZZ_CHECK(split.stats == whole.stats);
    }
    return 0;
}
