#include "protocol/tpiu_deframer.h"

#include <doctest/doctest.h>

#include <random>
#include <vector>

#include "protocol/swo_encoder.h"
#include "protocol/swo_test_support.h"

namespace rackprof::protocol {
namespace {

using Bytes = std::vector<std::uint8_t>;

const Bytes kSync = {0xFF, 0xFF, 0xFF, 0x7F};

struct Deframed {
    Bytes out;
    TpiuStats stats;
};

Deframed deframe_chunks(const std::vector<std::span<const std::uint8_t>>& chunks,
                        std::uint8_t id = 1) {
    TpiuDeframer deframer(id);
    Bytes out;
    for (const auto& chunk : chunks) deframer.feed(chunk, out);
    deframer.finish();
    return {out, deframer.stats()};
}

Deframed deframe(const Bytes& wire, std::uint8_t id = 1) {
    return deframe_chunks({std::span<const std::uint8_t>(wire)}, id);
}

Bytes cat(std::initializer_list<Bytes> parts) {
    Bytes all;
    for (const auto& p : parts) all.insert(all.end(), p.begin(), p.end());
    return all;
}

// Every byte is in exactly one bucket.
void check_accounting(const TpiuStats& s) {
    CHECK(s.bytes_in == s.bytes_out + s.bytes_skipped + s.bytes_padding + s.bytes_format +
                            s.bytes_sync + s.bytes_discarded);
}

// Frames below are written by hand from the CoreSight formatter rules, not by TpiuFramer.
// ID 1, then 14 data bytes 0x41..0x4E (the even ones have bit 0 clear, so the aux byte is 0).
const Bytes kFrameId1 = {0x03, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47,
                         0x48, 0x49, 0x4A, 0x4B, 0x4C, 0x4D, 0x4E, 0x00};
const Bytes kFrameId1Data = {0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47,
                             0x48, 0x49, 0x4A, 0x4B, 0x4C, 0x4D, 0x4E};

TEST_CASE("a frame after a full sync: ID change, data, aux byte") {
    const auto d = deframe(cat({kSync, kFrameId1}));
    CHECK(d.out == kFrameId1Data);
    CHECK(d.stats.frames == 1);
    CHECK(d.stats.full_syncs == 1);
    CHECK(d.stats.bytes_format == 2);  // the ID byte and the aux byte
    CHECK(d.stats.bytes_discarded == 0);
    check_accounting(d.stats);
}

TEST_CASE("bit 0 of data in even bytes comes from the aux byte") {
    // Even data bytes 0x43 (at 2) and 0x01 (at 14) are sent as 0x42 and 0x00, aux bits 1 and 7.
    const Bytes frame = {0x03, 0x10, 0x42, 0x20, 0x44, 0x21, 0x46, 0x22,
                         0x48, 0x23, 0x4A, 0x24, 0x4C, 0x25, 0x00, 0x82};
    const auto d = deframe(cat({kSync, frame}));
    CHECK(d.out == Bytes{0x10, 0x43, 0x20, 0x44, 0x21, 0x46, 0x22, 0x48, 0x23, 0x4A, 0x24, 0x4C,
                         0x25, 0x01});
}

TEST_CASE("an ID change mid-pair: the aux bit says whose the next odd byte is") {
    // Byte 2 changes to ID 2. Aux bit 1 set: byte 3 (0xBB) is still ID 1's.
    const Bytes delayed = {0x03, 0xAA, 0x05, 0xBB, 0xCC, 0xDD, 0xCE, 0xDE,
                           0xD0, 0xE0, 0xD2, 0xE2, 0xD4, 0xE4, 0xD6, 0x02};
    const auto one = deframe(cat({kSync, delayed}), 1);
    CHECK(one.out == Bytes{0xAA, 0xBB});
    CHECK(one.stats.bytes_skipped == 11);
    check_accounting(one.stats);
    const auto two = deframe(cat({kSync, delayed}), 2);
    CHECK(two.out == Bytes{0xCC, 0xDD, 0xCE, 0xDE, 0xD0, 0xE0, 0xD2, 0xE2, 0xD4, 0xE4, 0xD6});
    // Aux bit 1 clear: byte 3 is already ID 2's.
    Bytes immediate = delayed;
    immediate[15] = 0x00;
    CHECK(deframe(cat({kSync, immediate}), 1).out == Bytes{0xAA});
    CHECK(deframe(cat({kSync, immediate}), 2).out.front() == 0xBB);
}

TEST_CASE("ID 0 is padding, other IDs are skipped, not discarded") {
    const Bytes frame = {0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                         0x07, 0x11, 0x12, 0x13, 0x03, 0x55, 0x56, 0x00};
    const auto d = deframe(cat({kSync, frame}));
    CHECK(d.out == Bytes{0x55, 0x56});
    CHECK(d.stats.bytes_padding == 7);
    CHECK(d.stats.bytes_skipped == 3);
    CHECK(d.stats.bytes_discarded == 0);
    check_accounting(d.stats);
}

TEST_CASE("an ID change in byte 14 applies from the next frame") {
    Bytes first = kFrameId1;
    first[14] = 0x05;  // to ID 2; no odd byte follows in this frame
    const Bytes second = {0x60, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67,
                          0x68, 0x69, 0x6A, 0x6B, 0x6C, 0x6D, 0x6E, 0x00};
    const auto d = deframe(cat({kSync, first, second}), 2);
    CHECK(d.out == Bytes{0x60, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6A, 0x6B,
                         0x6C, 0x6D, 0x6E});
}

TEST_CASE("half-syncs on pair boundaries are dropped; FF 7F across a pair is data") {
    Bytes with_half = kFrameId1;
    with_half.insert(with_half.begin() + 4, {0xFF, 0x7F});
    with_half.insert(with_half.begin(), {0xFF, 0x7F});  // also between frames
    const auto d = deframe(cat({kSync, with_half}));
    CHECK(d.out == kFrameId1Data);
    CHECK(d.stats.half_syncs == 2);
    check_accounting(d.stats);
    // Odd byte 0xFF then even byte 0x7F: data, then an ID change to 0x3F.
    const Bytes across = {0x03, 0x41, 0x42, 0xFF, 0x7F, 0x45, 0x46, 0x47,
                          0x48, 0x49, 0x4A, 0x4B, 0x4C, 0x4D, 0x4E, 0x00};
    const auto a = deframe(cat({kSync, across}));
    CHECK(a.out == Bytes{0x41, 0x42, 0xFF});
    CHECK(a.stats.half_syncs == 0);
    CHECK(a.stats.bytes_skipped == 10);
}

TEST_CASE("bytes before the first full sync are discarded and counted") {
    const auto d = deframe(cat({{0x12, 0x34, 0xFF, 0xFF, 0x56, 0xFF}, kSync, kFrameId1}));
    CHECK(d.out == kFrameId1Data);
    CHECK(d.stats.bytes_discarded == 6);
    CHECK(d.stats.bytes_sync == 4);
    check_accounting(d.stats);
    // Without any sync nothing is trusted.
    const auto none = deframe(kFrameId1);
    CHECK(none.out.empty());
    CHECK(none.stats.bytes_discarded == 16);
}

TEST_CASE("a full sync mid-frame cuts the frame off and realigns") {
    const Bytes partial(kFrameId1.begin(), kFrameId1.begin() + 5);
    const auto d = deframe(cat({kSync, partial, kSync, kFrameId1}));
    CHECK(d.out == kFrameId1Data);
    CHECK(d.stats.frames == 1);
    CHECK(d.stats.frames_bad == 1);
    CHECK(d.stats.resyncs == 1);
    CHECK(d.stats.bytes_discarded == 5);
    check_accounting(d.stats);
}

TEST_CASE("a frame holding the reserved ID 0x7F loses alignment until the next full sync") {
    Bytes bad = kFrameId1;
    bad[4] = 0xFF;  // an even byte 0xFF not followed by 0x7F
    const auto d = deframe(cat({kSync, kFrameId1, bad, kFrameId1, kSync, kFrameId1}));
    CHECK(d.out == cat({kFrameId1Data, kFrameId1Data}));
    CHECK(d.stats.frames == 2);
    CHECK(d.stats.frames_bad == 1);
    CHECK(d.stats.resyncs == 1);
    CHECK(d.stats.bytes_discarded == 32);  // the bad frame and the unaligned one after it
    check_accounting(d.stats);
}

TEST_CASE("data before the first ID change is of unknown stream: discarded") {
    Bytes no_id = kFrameId1;
    no_id[0] = 0x40;
    const auto d = deframe(cat({kSync, no_id, kFrameId1}));
    CHECK(d.out == kFrameId1Data);
    CHECK(d.stats.bytes_discarded == 15);
    check_accounting(d.stats);
}

TEST_CASE("a truncated frame at the end is discarded") {
    const Bytes partial(kFrameId1.begin(), kFrameId1.begin() + 10);
    const auto d = deframe(cat({kSync, kFrameId1, partial}));
    CHECK(d.out == kFrameId1Data);
    CHECK(d.stats.bytes_discarded == 10);
    check_accounting(d.stats);
}

TEST_CASE("every split point of a vector gives identical output") {
    Bytes with_half = kFrameId1;
    with_half.insert(with_half.begin() + 6, {0xFF, 0x7F});
    const Bytes wire = cat({{0x12, 0xFF},
                            kSync,
                            kFrameId1,
                            with_half,
                            kSync,
                            {0x03, 0xAA, 0x05, 0xBB, 0xCC, 0xDD, 0xCE, 0xDE, 0xD0, 0xE0, 0xD2, 0xE2,
                             0xD4, 0xE4, 0xD6, 0x02},
                            {0x03, 0x41}});
    const auto whole = deframe(wire);
    CHECK(whole.out.size() == 14 + 14 + 2);
    const std::span<const std::uint8_t> all(wire);
    for (std::size_t a = 0; a <= wire.size(); ++a) {
        for (std::size_t b = a; b <= wire.size(); ++b) {
            const auto split =
                deframe_chunks({all.first(a), all.subspan(a, b - a), all.subspan(b)});
            REQUIRE(split.out == whole.out);
            REQUIRE(split.stats == whole.stats);
        }
    }
}

// TpiuFramer checked against the hand-written rules above.
TEST_CASE("TpiuFramer packs like the formatter") {
    Bytes wire;
    TpiuFramer framer(wire);
    framer.full_sync();
    framer.write(1, kFrameId1Data);
    CHECK(wire == cat({kSync, kFrameId1}));

    // Mid-pair change: ID 1's byte moves to the odd byte after the ID change, aux bit set.
    wire.clear();
    TpiuFramer mid(wire);
    mid.write(1, Bytes{0xAA, 0xBB});
    mid.write(2, Bytes{0xCC, 0xDD, 0xCE, 0xDE, 0xD0, 0xE0, 0xD2, 0xE2, 0xD4, 0xE4, 0xD6});
    CHECK(wire == Bytes{0x03, 0xAA, 0x05, 0xBB, 0xCC, 0xDD, 0xCE, 0xDE, 0xD0, 0xE0, 0xD2, 0xE2,
                        0xD4, 0xE4, 0xD6, 0x02});
}

TEST_CASE("TpiuFramer repeats the ID every 8 frames") {
    Bytes wire;
    TpiuFramer framer(wire);
    framer.write(1, Bytes(14 * 11, 0x10));
    REQUIRE(wire.size() >= 16 * 10);
    int id_frames = 0;
    for (std::size_t f = 0; f + 16 <= wire.size(); f += 16) id_frames += wire[f] == 0x03;
    CHECK(id_frames == 2);  // frame 0 and frame 8
}

TEST_CASE("property: random streams -> framer with syncs -> random chunks -> deframer") {
    std::mt19937_64 rng(3);
    for (int round = 0; round < 300; ++round) {
        Bytes wire;
        TpiuFramer framer(wire);
        framer.full_sync();
        std::array<Bytes, 4> sent;  // by stream ID 1..3
        const int n = static_cast<int>(rng() % 300);
        for (int i = 0; i < n; ++i) {
            const auto action = rng() % 20;
            if (action == 0) {
                framer.full_sync();
            } else if (action == 1) {
                framer.half_sync();
            } else {
                const auto id = static_cast<std::uint8_t>(1 + rng() % 3);
                Bytes data(1 + rng() % 20);
                for (auto& b : data) b = static_cast<std::uint8_t>(rng() % 4 ? rng() : 0xFF);
                framer.write(id, data);
                sent[id].insert(sent[id].end(), data.begin(), data.end());
            }
        }
        framer.flush();
        for (std::uint8_t id = 1; id <= 3; ++id) {
            const auto d = deframe_chunks(testing::random_chunks(wire, rng, 1 + rng() % 40), id);
            REQUIRE(d.out == sent[id]);
            REQUIRE(d.stats.bytes_discarded == 0);
            REQUIRE(d.stats.resyncs == 0);
        }
    }
}

TEST_CASE("long runs of one stream: frames decoded 16 bytes a step equal byte-at-a-time") {
    // Whole frames of our stream with no ID change take a word-at-a-time path; syncs, other
    // IDs, 0xFF data and damage must stop it exactly where the byte path would decide.
    std::mt19937_64 rng(12);
    for (int round = 0; round < 60; ++round) {
        Bytes wire;
        TpiuFramer framer(wire);
        framer.full_sync();
        for (int i = 0, n = 1 + static_cast<int>(rng() % 200); i < n; ++i) {
            const auto action = rng() % 40;
            if (action == 0) {
                framer.full_sync();
            } else if (action == 1) {
                framer.half_sync();
            } else {
                const auto id = static_cast<std::uint8_t>(action == 2 ? 2 + rng() % 3 : 1);
                Bytes data(1 + rng() % 400);
                for (auto& b : data) b = static_cast<std::uint8_t>(rng() % 16 ? rng() : 0xFF);
                framer.write(id, data);
            }
        }
        framer.flush();
        for (int damage = static_cast<int>(rng() % 4); damage > 0; --damage)
            wire[rng() % wire.size()] = static_cast<std::uint8_t>(rng() % 2 ? 0xFF : rng());
        const auto whole = deframe(wire);
        Bytes tail = wire;  // the stream joined mid-frame
        tail.erase(tail.begin(), tail.begin() + static_cast<std::ptrdiff_t>(rng() % 16));
        for (const Bytes& w : {wire, tail}) {
            const auto fast = deframe(w);
            const auto bytes = deframe_chunks(testing::random_chunks(w, rng, 1));
            REQUIRE(bytes.out == fast.out);
            REQUIRE(bytes.stats == fast.stats);
            check_accounting(fast.stats);
        }
        CHECK(whole.stats.bytes_out > 0);
    }
}

TEST_CASE("millions of random bytes: never a crash, every byte accounted, chunking invariant") {
    std::mt19937_64 rng(9);
    Bytes wire(3'000'000);
    for (auto& b : wire) {
        const auto r = rng() % 6;
        b = r == 0 ? 0xFF : r == 1 ? 0x7F : static_cast<std::uint8_t>(rng());
    }
    const auto whole = deframe(wire);
    const auto split = deframe_chunks(testing::random_chunks(wire, rng, 61));
    CHECK(split.stats == whole.stats);
    CHECK(split.out == whole.out);
    CHECK(whole.stats.full_syncs > 0);
    check_accounting(whole.stats);
}

}  // namespace
}  // namespace rackprof::protocol
