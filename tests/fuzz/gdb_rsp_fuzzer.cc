// libFuzzer target: what a GDB server sends (probe/): the packet reader, stop replies and target
// descriptions. A hostile server's bytes give the same items whatever their chunking, never hold
// more than about twice the largest packet, and every packet and description is read or refused
// with an error, never a crash or a loop.
//   settings bit 0: the reader's largest packet is 64 bytes (else 4096)
#include <stdexcept>
#include <string>
#include <vector>

#include "probe/gdb_packet.h"
#include "probe/stop_reply.h"
#include "probe/target_description.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

using namespace rackprof;

std::vector<probe::RspItem> read_in(const std::vector<fuzz::Bytes>& chunks, std::size_t max,
                                    std::uint64_t& discarded) {
    probe::RspReader reader(max);
    std::vector<probe::RspItem> items;
    for (const auto chunk : chunks) {
        reader.feed(fuzz::as_text(chunk));
        while (auto item = reader.next()) items.push_back(*item);
        // An unfinished packet (at most 2 * max + 4 before its "#") and its checksum digit.
        FUZZ_CHECK(reader.bytes_pending() <= 2 * max + 6);
    }
    discarded = reader.bytes_discarded();
    return items;
}

bool same(const std::vector<probe::RspItem>& a, const std::vector<probe::RspItem>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (a[i].kind != b[i].kind || a[i].payload != b[i].payload ||
            a[i].checksum_ok != b[i].checksum_ok)
            return false;
    }
    return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto in = fuzz::split_input(data, size);
    const std::size_t max = (in.settings & 1) ? 64 : 4096;
    std::uint64_t whole_discarded = 0, chunked_discarded = 0;
    const auto whole = read_in({in.payload}, max, whole_discarded);
    const auto chunked =
        read_in(fuzz::chunks_of(in.payload, in.chunk_lengths), max, chunked_discarded);
    FUZZ_CHECK(same(whole, chunked));
    for (const auto& item : whole) {
        FUZZ_CHECK(item.payload.size() <= max);
        // A packet framed again reads back as itself.
        if (item.kind == probe::RspItem::Kind::kPacket && item.checksum_ok) {
            probe::RspReader again(max + 8);
            again.feed(probe::frame_packet(item.payload));
            const auto back = again.next();
            FUZZ_CHECK(back && back->payload == item.payload && back->checksum_ok);
        }
        if (const auto stop = probe::parse_stop_reply(item.payload)) FUZZ_CHECK(stop->signal < 256);
    }
    // The payload as a target description that includes itself: refused or read, in bounds.
    const std::string text(fuzz::as_text(in.payload));
    try {
        const auto d =
            probe::parse_target_description(text, [&](const std::string&) { return text; });
        FUZZ_CHECK(d.registers.size() <= 32 * text.size());
    } catch (const std::runtime_error& e) {
        FUZZ_CHECK(*e.what() != '\0');
    }
    return 0;
}
