#include "protocol/itm_decoder.h"

#include <doctest/doctest.h>

#include <random>
#include <vector>

#include "protocol/swo_encoder.h"
#include "protocol/swo_test_support.h"

namespace rackprof::protocol {
namespace {

using Bytes = std::vector<std::uint8_t>;
using K = ItmPacketKind;

struct Decoded {
    std::vector<ItmPacket> packets;
    ItmStats stats;
};

Decoded decode_chunks(const std::vector<std::span<const std::uint8_t>>& chunks) {
    ItmDecoder decoder;
    testing::PacketCollector sink;
    for (const auto& chunk : chunks) decoder.feed(chunk, sink);
    decoder.finish();
    return {sink.packets, decoder.stats()};
}

Decoded decode(const Bytes& wire) {
    return decode_chunks({std::span<const std::uint8_t>(wire)});
}

// Every byte ends up in exactly one good packet or is discarded.
void check_accounting(const ItmStats& s) {
    CHECK(s.bytes_in == s.bytes_decoded + s.bytes_discarded);
}

ItmPacket packet(K kind, std::uint64_t value = 0, std::uint16_t channel = 0, std::uint8_t flags = 0,
                 std::uint8_t size = 0) {
    return ItmPacket{kind, size, flags, channel, value};
}

// Expected bytes below are written from the ARMv7-M ARM, appendix D4, not from ItmEncoder.
TEST_CASE("sync and overflow packets") {
    const auto d = decode({0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x70});
    CHECK(d.packets == std::vector{packet(K::kSync), packet(K::kOverflow)});
    CHECK(d.stats.syncs == 1);
    CHECK(d.stats.bytes_discarded == 0);
    check_accounting(d.stats);

    const auto longer = decode({0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80});
    CHECK(longer.packets == std::vector{packet(K::kSync)});
    CHECK(longer.stats.bytes_decoded == 8);

    // 4 zero bytes and 0x80 are 39 zero bits: too few, all garbage.
    const auto short_sync = decode({0x00, 0x00, 0x00, 0x00, 0x80});
    CHECK(short_sync.packets.empty());
    CHECK(short_sync.stats.bytes_discarded == 5);
    CHECK(short_sync.stats.resyncs == 1);
}

TEST_CASE("software source packets of every size, and stimulus port pages") {
    const auto d = decode({
        0x01, 0x41,                          // port 0, 1 byte
        0x2A, 0x34, 0x12,                    // port 5, 2 bytes
        0xFB, 0x78, 0x56, 0x34, 0x12,        // port 31, 4 bytes
        0x18, 0x09, 0x7A,                    // page 1, then port 1 + 32
        0x78, 0xFB, 0x01, 0x02, 0x03, 0x04,  // page 7, port 31 + 224
        0x00, 0x00, 0x00, 0x00, 0x00, 0x80,  // sync: the page is 0 again
        0x09, 0x7B,                          // port 1
    });
    CHECK(d.packets == std::vector{
                           packet(K::kSoftware, 0x41, 0, 0, 1),
                           packet(K::kSoftware, 0x1234, 5, 0, 2),
                           packet(K::kSoftware, 0x12345678, 31, 0, 4),
                           packet(K::kSoftware, 0x7A, 33, 0, 1),
                           packet(K::kSoftware, 0x04030201, 255, 0, 4),
                           packet(K::kSync),
                           packet(K::kSoftware, 0x7B, 1, 0, 1),
                       });
    CHECK(d.stats.packets == 7);  // extension packets set the page, are not reported
    CHECK(d.stats.bytes_discarded == 0);
    check_accounting(d.stats);
}

TEST_CASE("hardware packets: event counter, exception trace, PC samples, data trace") {
    const auto d = decode({
        0x05, 0x21,                    // event counter: CPI and Cyc wrapped
        0x0E, 0x0F, 0x10,              // exception 15 (SysTick) entered
        0x0E, 0x0F, 0x20,              // exited
        0x0E, 0x00, 0x30,              // returned to thread mode
        0x0E, 0x10, 0x11,              // exception 272 entered (ExcNum bit 8 in byte 2)
        0x17, 0xB4, 0x14, 0x00, 0x00,  // PC sample 0x14B4
        0x15, 0x00,                    // PC sample: asleep
        0x57, 0x00, 0x10, 0x00, 0x08,  // data trace PC, comparator 1
        0x6E, 0x34, 0x12,              // data trace address, comparator 2
        0x8F, 0x78, 0x56, 0x34, 0x12,  // data value written, comparator 0, 4 bytes
        0xB5, 0xAB,                    // data value read, comparator 3, 1 byte
    });
    CHECK(d.packets == std::vector{
                           packet(K::kEventCounter, 0, 0, 0x21),
                           packet(K::kException, 0, 15, kExceptionEnter),
                           packet(K::kException, 0, 15, kExceptionExit),
                           packet(K::kException, 0, 0, kExceptionReturn),
                           packet(K::kException, 0, 272, kExceptionEnter),
                           packet(K::kPcSample, 0x14B4),
                           packet(K::kPcSleep),
                           packet(K::kDataTracePc, 0x08001000, 1),
                           packet(K::kDataTraceAddress, 0x1234, 2),
                           packet(K::kDataTraceValue, 0x12345678, 0, 1, 4),
                           packet(K::kDataTraceValue, 0xAB, 3, 0, 1),
                       });
    CHECK(d.stats.bytes_discarded == 0);
    check_accounting(d.stats);
}

TEST_CASE("local and global timestamps") {
    const auto d = decode({
        0x30,                                      // short form: 3 cycles
        0xC0, 0x85, 0x01,                          // long form, TC 0: 5 + (1 << 7)
        0xE0, 0x7F,                                // TC 2, 127
        0xD0, 0xFF, 0xFF, 0xFF, 0x7F,              // TC 1, 28 bits
        0x94, 0x85, 0x01,                          // GTS1, 2 bytes
        0x94, 0x81, 0x80, 0x80, 0x61,              // GTS1, 4 bytes: bits 25:21 = 1, ClkCh and Wrap
        0xB4, 0x81, 0x80, 0x80, 0x01,              // GTS2, 4 bytes
        0xB4, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01,  // GTS2, 6 bytes
    });
    CHECK(d.packets == std::vector{
                           packet(K::kLocalTimestamp, 3),
                           packet(K::kLocalTimestamp, 133),
                           packet(K::kLocalTimestamp, 127, 0, 2),
                           packet(K::kLocalTimestamp, 0x0FFFFFFF, 0, 1),
                           packet(K::kGlobalTimestamp1, 133),
                           packet(K::kGlobalTimestamp1, 0x200001, 0, 3),
                           packet(K::kGlobalTimestamp2, 0x200001),
                           packet(K::kGlobalTimestamp2, std::uint64_t{1} << 35),
                       });
    CHECK(d.stats.bytes_discarded == 0);
    check_accounting(d.stats);
}

TEST_CASE("invalid headers and reserved encodings are discarded and counted") {
    struct Case {
        Bytes wire;
        std::uint64_t discarded;
    };
    const std::vector<Case> cases = {
        {{0x80}, 1},                                // 10xx0000 is reserved
        {{0x04}, 1},                                // xxxx0100 other than GTS1/GTS2
        {{0x1D, 0x00}, 2},                          // DWT discriminator 3; then a lone zero
        {{0x06}, 1},                                // event counter with 2 bytes
        {{0x15, 0x01}, 2},                          // one-byte PC sample that is not "asleep"
        {{0x0E, 0x0F, 0x00}, 3},                    // exception FN 00
        {{0xB4, 0x80, 0x80, 0x80, 0x80, 0x01}, 6},  // GTS2 of 5 bytes
        {{0xC0, 0x80, 0x80, 0x80, 0x80}, 5},        // local timestamp longer than 4 bytes
        {{0x00, 0x00}, 2},                          // zeros that are no sync
    };
    for (const auto& c : cases) {
        Bytes wire = c.wire;
        wire.push_back(0x70);  // decoding goes on after the garbage
        const auto d = decode(wire);
        INFO("first byte ", int(c.wire[0]));
        CHECK(d.packets == std::vector{packet(K::kOverflow)});
        CHECK(d.stats.bytes_discarded == c.discarded);
        CHECK(d.stats.resyncs == 1);
        check_accounting(d.stats);
    }
}

TEST_CASE("a truncated packet at the end is discarded") {
    const auto d = decode({0x70, 0x17, 0xB4, 0x14});
    CHECK(d.packets == std::vector{packet(K::kOverflow)});
    CHECK(d.stats.bytes_discarded == 3);
    check_accounting(d.stats);
}

TEST_CASE("a sync is found even when a misaligned packet swallowed its first zeros") {
    // 0x17 takes 12 34 56 00 as a PC; the sync's remaining 4 zero bytes still complete the
    // 47 zero bits, so alignment is certain again at the overflow packet.
    const auto d = decode({0x17, 0x12, 0x34, 0x56, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x70});
    CHECK(d.packets ==
          std::vector{packet(K::kPcSample, 0x563412), packet(K::kSync), packet(K::kOverflow)});
    check_accounting(d.stats);
    // A timestamp ended by the first zero: 4 zero bytes are left before 0x80.
    const auto ts = decode({0xC0, 0x80, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x70});
    CHECK(ts.packets ==
          std::vector{packet(K::kLocalTimestamp, 0), packet(K::kSync), packet(K::kOverflow)});
}

TEST_CASE("finish() breaks a run of zero bits: no sync across a link break") {
    ItmDecoder decoder;
    testing::PacketCollector sink;
    decoder.feed(Bytes{0x00, 0x00, 0x00}, sink);
    decoder.finish();
    decoder.feed(Bytes{0x00, 0x00, 0x80, 0x70}, sink);
    decoder.finish();
    CHECK(sink.packets == std::vector{packet(K::kOverflow)});
    CHECK(decoder.stats().bytes_discarded == 6);
    CHECK(decoder.stats().resyncs == 1);
}

TEST_CASE("every split point of a vector gives identical output") {
    const Bytes wire = {0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x18, 0x09, 0x7A, 0x17, 0xB4, 0x14,
                        0x00, 0x00, 0x80, 0xC0, 0x85, 0x01, 0x15, 0x00, 0x0E, 0x0F, 0x10, 0xB4,
                        0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80,
                        0x70, 0x94, 0x81, 0x80, 0x80, 0x61, 0x03, 0x01, 0x02, 0x03};
    const auto whole = decode(wire);
    CHECK(whole.stats.bytes_discarded == 5);  // the 0x80 after the PC sample, the cut-off tail
    for (std::size_t a = 0; a <= wire.size(); ++a) {
        for (std::size_t b = a; b <= wire.size(); ++b) {
            const std::span<const std::uint8_t> all(wire);
            const auto split = decode_chunks({all.first(a), all.subspan(a, b - a), all.subspan(b)});
            REQUIRE(split.packets == whole.packets);
            REQUIRE(split.stats == whole.stats);
        }
    }
}

ItmPacket random_packet(std::mt19937_64& rng) {
    const auto u32 = [&] { return static_cast<std::uint32_t>(rng()); };
    const std::uint8_t sizes[] = {1, 2, 4};
    const std::uint8_t size = sizes[rng() % 3];
    const std::uint64_t size_mask = size == 4 ? 0xFFFFFFFF : (1U << (8 * size)) - 1;
    const auto channel4 = static_cast<std::uint16_t>(rng() % 4);
    switch (rng() % 13) {
        case 0:
            return packet(K::kSync);
        case 1:
            return packet(K::kOverflow);
        case 2:
            return packet(K::kEventCounter, 0, 0, static_cast<std::uint8_t>(rng() % 64));
        case 3:
            return packet(K::kException, 0, static_cast<std::uint16_t>(rng() % 512),
                          static_cast<std::uint8_t>(1 + rng() % 3));
        case 4:
            return packet(K::kPcSleep);
        case 5:
            return packet(K::kDataTracePc, u32(), channel4);
        case 6:
            return packet(K::kDataTraceAddress, u32() & 0xFFFF, channel4);
        case 7:
            return packet(K::kDataTraceValue, u32() & size_mask, channel4,
                          static_cast<std::uint8_t>(rng() % 2), size);
        case 8:
            return packet(K::kLocalTimestamp, u32() >> (4 + rng() % 28), 0,
                          static_cast<std::uint8_t>(rng() % 4));
        case 9:
            return packet(K::kGlobalTimestamp1, u32() >> (6 + rng() % 26), 0,
                          static_cast<std::uint8_t>(rng() % 4));
        case 10:
            return packet(K::kGlobalTimestamp2, rng() >> (26 + rng() % 38));
        case 11:
            return packet(K::kPcSample, u32());
        default:
            return packet(K::kSoftware, u32() & size_mask, static_cast<std::uint16_t>(rng() % 256),
                          0, size);
    }
}

TEST_CASE("property: random packets -> encoder -> random chunks -> decoder -> the same packets") {
    std::mt19937_64 rng(11);
    for (int round = 0; round < 300; ++round) {
        std::vector<ItmPacket> packets;
        Bytes wire;
        ItmEncoder encoder(wire);
        const int n = 1 + static_cast<int>(rng() % 400);
        for (int i = 0; i < n; ++i) {
            packets.push_back(random_packet(rng));
            encoder.packet(packets.back());
        }
        const auto d = decode_chunks(testing::random_chunks(wire, rng, 1 + rng() % 64));
        REQUIRE(d.packets == packets);
        REQUIRE(d.stats.bytes_discarded == 0);
        REQUIRE(d.stats.bytes_decoded == wire.size());
    }
}

TEST_CASE("millions of random bytes: never a crash, every byte accounted, chunking invariant") {
    std::mt19937_64 rng(5);
    Bytes wire(4'000'000);
    for (auto& b : wire) {
        // Plenty of zeros and 0x80 so that syncs and near-syncs occur too.
        const auto r = rng() % 8;
        b = r == 0 ? 0x00 : r == 1 ? 0x80 : static_cast<std::uint8_t>(rng());
    }
    const auto whole = decode(wire);
    const auto split = decode_chunks(testing::random_chunks(wire, rng, 97));
    CHECK(split.stats == whole.stats);
    CHECK(split.packets == whole.packets);
    CHECK(whole.stats.bytes_in == wire.size());
    CHECK(whole.stats.bytes_discarded > 0);
    CHECK(whole.stats.syncs > 0);
    check_accounting(whole.stats);
}

}  // namespace
}  // namespace rackprof::protocol
