#include "storage/chunk_blocks.h"

#include <doctest/doctest.h>
#include <zstd.h>

#include <random>

#include "storage/storage_error.h"

namespace rackprof::storage {
namespace {

using protocol::Record;
using Bytes = std::vector<std::uint8_t>;

TEST_CASE("a raw block gives back every chunk, its bytes and its receive time") {
    std::mt19937 random(8);
    std::vector<Bytes> chunks;
    std::vector<RawChunkView> views;
    std::int64_t t = 1'700'000'000'000'000'000;
    for (int i = 0; i < 50; ++i) {
        Bytes bytes(random() % 3000 + 1);
        for (auto& b : bytes) b = static_cast<std::uint8_t>(random() % 7);  // compressible
        chunks.push_back(bytes);
        t += (i == 20) ? -5 : static_cast<std::int64_t>(random() % 30'000'000);  // clocks step back
        views.push_back({t, {}});
    }
    for (std::size_t i = 0; i < chunks.size(); ++i) views[i].bytes = chunks[i];
    const Bytes blob = encode_raw_block(views);
    std::size_t total = 0;
    for (const auto& c : chunks) total += c.size();
    CHECK(blob.size() < total / 2);
    const auto back = decode_raw_block(blob, views.front().received_ns);
    REQUIRE(back.size() == chunks.size());
    for (std::size_t i = 0; i < chunks.size(); ++i) {
        CAPTURE(i);
        CHECK(back[i].received_ns == views[i].received_ns);
        CHECK(back[i].bytes == chunks[i]);
    }
}

TEST_CASE("a record block gives back every chunk's records in order") {
    std::vector<std::vector<Record>> chunks = {
        {Record::arc(0x1001, 0x2000), Record::pc_sample(0x2002)},
        {Record::pc_sample(0x08000000, 70000)},
        {Record::arc(0xFFFFFFFF, 0, 7), Record::arc(1, 2), Record::pc_sample(3)},
    };
    std::vector<RecordChunkView> views;
    for (std::size_t i = 0; i < chunks.size(); ++i)
        views.push_back({static_cast<std::int64_t>(100 + 10 * i), chunks[i]});
    const auto back = decode_record_block(encode_record_block(views), 100);
    REQUIRE(back.size() == 3);
    for (std::size_t i = 0; i < chunks.size(); ++i) {
        CHECK(back[i].received_ns == views[i].received_ns);
        CHECK(back[i].records == chunks[i]);
    }
}

// What blocks of encodings 1 and 2 hold for records (chunk_blocks.h), built byte by byte as
// rackprof wrote them before v14: the index, the heads, then every record's values in one run.
Bytes interleaved_record_block(std::span<const RecordChunkView> chunks, bool seqs) {
    Bytes payload;
    const auto varint = [&payload](std::uint64_t v) {
        for (; v >= 0x80; v >>= 7) payload.push_back(static_cast<std::uint8_t>(v | 0x80));
        payload.push_back(static_cast<std::uint8_t>(v));
    };
    const auto zigzag = [](std::int64_t v) {
        return (static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63);
    };
    varint(chunks.size());
    std::int64_t t = chunks.front().received_ns, seq = chunks.front().seq;
    for (const auto& c : chunks) {
        varint(zigzag(c.received_ns - t));
        varint(c.records.size());
        if (seqs) varint(zigzag(c.seq - seq));
        t = c.received_ns;
        seq = c.seq;
    }
    for (const auto& c : chunks)
        for (const auto& r : c.records)
            payload.push_back(
                static_cast<std::uint8_t>(static_cast<int>(r.kind) | (r.count != 1 ? 0x80 : 0)));
    std::int64_t from = 0, self = 0, pc = 0;
    for (const auto& c : chunks) {
        for (const auto& r : c.records) {
            if (r.kind == protocol::RecordKind::kArc) {
                varint(zigzag(std::int64_t{r.from_pc} - from));
                varint(zigzag(std::int64_t{r.self_pc} - self));
                from = r.from_pc;
                self = r.self_pc;
            } else {
                varint(zigzag(std::int64_t{r.self_pc} - pc));
                pc = r.self_pc;
            }
            if (r.count != 1) varint(r.count);
        }
    }
    Bytes framed(ZSTD_compressBound(payload.size()));
    framed.resize(ZSTD_compress(framed.data(), framed.size(), payload.data(), payload.size(), 1));
    return framed;
}

// A firmware's loop as the thesis-style stream shows it: the same few arcs over and over, in
// the same order, between PC samples that land anywhere in the code.
std::vector<std::vector<Record>> loop_chunks(std::size_t chunks, std::size_t records) {
    std::mt19937 random(14);
    const std::vector<Record> calls = {
        Record::arc(0x08000120, 0x08000400), Record::arc(0x08000410, 0x08000800),
        Record::arc(0x08000820, 0x08000C00, 3), Record::arc(0x08000130, 0x08001000)};
    std::vector<std::vector<Record>> out(chunks);
    std::size_t next_call = 0;
    for (auto& chunk : out) {
        while (chunk.size() < records) {
            if (random() % 3 == 0) {
                chunk.push_back(
                    Record::pc_sample(0x08000000 + random() % 0x1400, random() % 50 == 0 ? 2 : 1));
            } else {
                chunk.push_back(calls[next_call++ % calls.size()]);
            }
        }
    }
    return out;
}

TEST_CASE(
    "a v14 record block keeps arcs' and samples' values apart; v8 and v13 blocks still read") {
    const auto chunks = loop_chunks(6, 3000);
    std::vector<RecordChunkView> views;
    for (std::size_t i = 0; i < chunks.size(); ++i)
        views.push_back({static_cast<std::int64_t>(5000 + 70 * i), chunks[i],
                         static_cast<std::int64_t>(40 + i)});
    const Bytes v14 = encode_record_block(views);
    const Bytes v13 = interleaved_record_block(views, true);
    const Bytes v8 = interleaved_record_block(views, false);
    const auto check = [&](const std::vector<DecodedRecordChunk>& back, bool seqs) {
        REQUIRE(back.size() == chunks.size());
        for (std::size_t i = 0; i < chunks.size(); ++i) {
            CAPTURE(i);
            CHECK(back[i].received_ns == views[i].received_ns);
            CHECK(back[i].records == chunks[i]);
            if (seqs) CHECK(back[i].seq == views[i].seq);
        }
    };
    check(decode_record_block(v14, 5000, 40, BlockEncoding::kZstdBlockColumns), true);
    check(decode_record_block(v13, 5000, 40, BlockEncoding::kZstdBlockSeq), true);
    check(decode_record_block(v8, 5000, 0, BlockEncoding::kZstdBlock), false);
    // What the split is for: the arcs' run repeats as the loop does, the samples' alone.
    MESSAGE("v14 block " << v14.size() << " bytes, v13 " << v13.size() << " bytes for " << 6 * 3000
                         << " records");
    CHECK(v14.size() < v13.size());
    // A block read with another encoding than its row's is an error, never other records.
    CHECK_THROWS_AS(decode_record_block(v13, 5000, 40, BlockEncoding::kZstdBlockColumns),
                    StorageError);
}

TEST_CASE("a v14 record block whose arcs' length is wrong is a StorageError") {
    const std::vector<Record> records = {Record::arc(0x100, 0x200), Record::pc_sample(0x300),
                                         Record::arc(0x104, 0x200, 9)};
    const RecordChunkView view{1, records, 0};
    const Bytes blob = encode_record_block(std::span(&view, 1));
    std::vector<std::uint8_t> payload(ZSTD_getFrameContentSize(blob.data(), blob.size()));
    REQUIRE(ZSTD_decompress(payload.data(), payload.size(), blob.data(), blob.size()) ==
            payload.size());
    // index (count 1, time 0, 3 records, seq 0), 3 heads, then the arcs' length
    const std::size_t length_at = 4 + records.size();
    REQUIRE(payload[length_at] < 0x80);
    for (const int change : {-1, +1, +60}) {
        CAPTURE(change);
        Bytes damaged = payload;
        damaged[length_at] = static_cast<std::uint8_t>(damaged[length_at] + change);
        Bytes framed(ZSTD_compressBound(damaged.size()));
        framed.resize(
            ZSTD_compress(framed.data(), framed.size(), damaged.data(), damaged.size(), 1));
        CHECK_THROWS_AS(decode_record_block(framed, 1), StorageError);
    }
}

TEST_CASE("a damaged block is a StorageError, never a crash or a huge allocation") {
    const Bytes raw = {'A', 0, 0x10, 0x01, 0, 0x20, 0x00};
    const RawChunkView view{5, raw};
    const Bytes blob = encode_raw_block(std::span(&view, 1));
    CHECK(decode_raw_block(blob, 5).size() == 1);
    for (std::size_t cut = 0; cut < blob.size(); ++cut) {
        CAPTURE(cut);
        CHECK_THROWS_AS(decode_raw_block(std::span(blob).first(cut), 5), StorageError);
    }
    Bytes flipped = blob;
    for (std::size_t i = 0; i < flipped.size(); ++i) {
        flipped[i] ^= 0x40;
        try {  // either an error or some chunks; never undefined behaviour (ASan checks)
            (void)decode_raw_block(flipped, 5);
        } catch (const StorageError&) {
        }
        flipped[i] ^= 0x40;
    }
    // A frame that claims far more than a block may hold is refused before allocating.
    Bytes bomb = {0x28, 0xB5, 0x2F, 0xFD, 0x24, 0x00};  // magic, content size field follows
    CHECK_THROWS_AS(decode_raw_block(bomb, 0), StorageError);
    CHECK_THROWS_AS(decode_record_block(Bytes{1, 2, 3}, 0), StorageError);
}

// A fuzz input (storage_blocks, UBSan): a damaged block's time steps can overflow a signed sum
// (undefined behaviour), and so can address deltas and the record count. The input is
// tests/fuzz/corpus/storage_blocks/regression-time-delta-overflow, tried as the fuzz target tries
// it: as a block itself, and as the payload of a valid zstd frame. The promise: a StorageError or
// chunks, and chunks that encode and decode to themselves; the sanitizer run (tests/run.sh) catches
// the undefined behaviour itself.
TEST_CASE(
    "a block whose time steps overflow: a StorageError or chunks, never undefined "
    "behaviour (fuzz regression)") {
    const Bytes input = {0x04, 0x00, 0x00, 0xfd, 0xff, 0xff, 0xff, 0xff, 0xff,
                         0xff, 0xff, 0xff, 0x01, 0x82, 0xca, 0xff, 0xf2, 0x01,
                         0xff, 0xff, 0xff, 0xfa, 0x00, 0x00, 0x01, 0x00};
    Bytes framed(ZSTD_compressBound(input.size()));
    const std::size_t n =
        ZSTD_compress(framed.data(), framed.size(), input.data(), input.size(), 1);
    REQUIRE_FALSE(ZSTD_isError(n));
    framed.resize(n);
    int decoded = 0;
    for (const Bytes& blob : {input, framed}) {
        try {
            const auto raw = decode_raw_block(blob, 1000);
            ++decoded;
            for (const auto& c : raw) CHECK(c.bytes.size() <= input.size());
        } catch (const StorageError&) {
        }
        try {
            const auto chunks = decode_record_block(blob, 1000);
            ++decoded;
            std::vector<RecordChunkView> views;
            for (const auto& c : chunks) views.push_back({c.received_ns, c.records, c.seq});
            if (views.empty()) continue;
            const auto again = decode_record_block(encode_record_block(views),
                                                   views.front().received_ns, views.front().seq);
            REQUIRE(again.size() == chunks.size());
            for (std::size_t i = 0; i < chunks.size(); ++i) {
                CHECK(again[i].received_ns == chunks[i].received_ns);
                CHECK(again[i].records == chunks[i].records);
            }
        } catch (const StorageError&) {
        }
    }
    MESSAGE(decoded << " of 4 decodings gave chunks");
}

}  // namespace
}  // namespace rackprof::storage
