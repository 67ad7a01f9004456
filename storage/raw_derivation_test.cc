#include "storage/raw_derivation.h"

#include <doctest/doctest.h>
#include <zstd.h>

#include <random>

#include "protocol/legacy_decoder.h"
#include "protocol/legacy_format.h"
#include "protocol/record_sink.h"
#include "storage/chunk_blocks.h"
#include "storage/storage_error.h"

namespace rackprof::storage {
namespace {

using protocol::Record;
using Bytes = std::vector<std::uint8_t>;

Bytes legacy_stream(int width, std::size_t records, std::uint32_t seed) {
    std::mt19937 random(seed);
    Bytes wire;
    for (std::size_t i = 0; i < records; ++i) {
        const std::uint32_t a = 0x1000 + random() % 0x800, b = 0x1000 + random() % 0x800;
        protocol::encode_legacy(random() % 3 ? Record::arc(a, b) : Record::pc_sample(a), width,
                                wire);
    }
    return wire;
}

// The chunks as the capture session hands them over: each chunk's bytes and the records the
// decoder gave while it was fed (a record held back for the byte after it comes with the next).
struct Chunk {
    Bytes raw;
    std::vector<Record> records;
};
std::vector<Chunk> decoded_chunks(const Bytes& wire, int width,
                                  const std::vector<std::size_t>& cuts) {
    protocol::LegacyDecoder decoder({width, protocol::LegacyEncoding::kBinary, std::nullopt});
    std::vector<Chunk> out;
    std::size_t from = 0;
    for (std::size_t i = 0; i <= cuts.size(); ++i) {
        const std::size_t to = i < cuts.size() ? cuts[i] : wire.size();
        protocol::RecordCollector sink;
        decoder.feed(std::span(wire).subspan(from, to - from), sink);
        if (i == cuts.size()) decoder.finish(sink);
        out.push_back({Bytes(wire.begin() + static_cast<std::ptrdiff_t>(from),
                             wire.begin() + static_cast<std::ptrdiff_t>(to)),
                       sink.records});
        from = to;
    }
    return out;
}

TEST_CASE("a clean legacy stream cut anywhere rebuilds every chunk from its records") {
    for (const int width : {3, 4}) {
        CAPTURE(width);
        const RawCodec codec = raw_codec_of({"legacy", "bin", width, std::nullopt});
        REQUIRE(codec != RawCodec::kVerbatim);
        const Bytes wire = legacy_stream(width, 40, 5);
        // Two cuts at every pair of nearby offsets: chunks shorter than a record, ending on a
        // record's boundary (the decoder holds that record back), or inside one.
        for (std::size_t a = 1; a < 30; ++a) {
            for (std::size_t b = a; b < a + 20; ++b) {
                CAPTURE(a);
                CAPTURE(b);
                for (const auto& c : decoded_chunks(wire, width, {a, b, wire.size() - 3})) {
                    const auto derived = derive_raw(codec, c.raw, c.records);
                    if (c.records.empty() || c.raw.empty()) {
                        CHECK_FALSE(derived);  // nothing to rebuild from: stored as it came
                        continue;
                    }
                    REQUIRE(derived);
                    const auto suffix = std::span(c.raw).last(derived->suffix);
                    CHECK(rebuild_raw(codec, *derived, c.records, suffix, c.raw.size()) == c.raw);
                }
            }
        }
    }
}

TEST_CASE("bytes the records do not rebuild exactly are stored as they came") {
    const RawCodec codec = RawCodec::kLegacy3;
    Bytes wire = legacy_stream(3, 200, 9);
    SUBCASE("garbage the decoder skipped") {
        wire.insert(wire.begin() + 500, {0xEE, 0x13});
    }
    SUBCASE("a byte flipped inside an address") {
        wire[301] ^= 0x40;
    }
    protocol::LegacyDecoder decoder({3, protocol::LegacyEncoding::kBinary, std::nullopt});
    protocol::RecordCollector sink;
    decoder.feed(wire, sink);
    decoder.finish(sink);
    REQUIRE_FALSE(sink.records.empty());
    // Records of another stream never pass for these bytes.
    std::vector<Record> other = sink.records;
    other[10].self_pc ^= 1;
    CHECK_FALSE(derive_raw(codec, wire, other));
    if (decoder.stats().bytes_discarded > 0) CHECK_FALSE(derive_raw(codec, wire, sink.records));
    // Other wires are never rebuilt.
    CHECK(raw_codec_of({"legacy", "hex", 3, std::nullopt}) == RawCodec::kVerbatim);
    CHECK(raw_codec_of({"framed", "bin", 4, std::nullopt}) == RawCodec::kVerbatim);
    CHECK_FALSE(derive_raw(RawCodec::kVerbatim, wire, sink.records));
}

TEST_CASE("records that cannot give a chunk's bytes are a StorageError") {
    const std::vector<Record> records = {Record::arc(0x100, 0x200), Record::pc_sample(0x104)};
    const Bytes suffix = {0x41};
    CHECK(rebuild_raw(RawCodec::kLegacy3, {0, 1}, records, suffix, 12).size() == 12);
    CHECK_THROWS_AS(rebuild_raw(RawCodec::kLegacy3, {0, 1}, records, suffix, 13), StorageError);
    CHECK_THROWS_AS(rebuild_raw(RawCodec::kLegacy3, {12, 0}, records, {}, 0), StorageError);
    CHECK_THROWS_AS(rebuild_raw(RawCodec::kLegacy3, {0, 2}, records, suffix, 13), StorageError);
    CHECK_THROWS_AS(rebuild_raw(RawCodec::kVerbatim, {0, 0}, records, {}, 11), StorageError);
    CHECK_THROWS_AS(rebuild_raw(static_cast<RawCodec>(9), {0, 0}, records, {}, 11), StorageError);
}

TEST_CASE("a v13 raw block keeps seqs and rebuilt chunks; a v8 block still reads") {
    const Bytes wire = legacy_stream(3, 30, 3);
    const auto chunks = decoded_chunks(wire, 3, {50, 101});
    std::vector<RawChunkView> views;
    for (std::size_t i = 0; i < chunks.size(); ++i) {
        RawChunkView v{static_cast<std::int64_t>(1000 + i), chunks[i].raw,
                       static_cast<std::int64_t>(40 + 2 * i)};
        if (i != 1) {  // the middle one stays as it came
            const auto d = derive_raw(RawCodec::kLegacy3, chunks[i].raw, chunks[i].records);
            REQUIRE(d);
            v.codec = RawCodec::kLegacy3;
            v.derivation = *d;
        }
        views.push_back(v);
    }
    const Bytes blob = encode_raw_block(views);
    const auto back = decode_raw_block(blob, 1000, 40, BlockEncoding::kZstdBlockSeq);
    REQUIRE(back.size() == 3);
    for (std::size_t i = 0; i < 3; ++i) {
        CAPTURE(i);
        CHECK(back[i].received_ns == views[i].received_ns);
        CHECK(back[i].seq == views[i].seq);
        CHECK(back[i].length == chunks[i].raw.size());
        CHECK(back[i].codec == views[i].codec);
        const Bytes bytes = back[i].codec == RawCodec::kVerbatim
                                ? back[i].bytes
                                : rebuild_raw(back[i].codec, back[i].derivation, chunks[i].records,
                                              back[i].bytes, back[i].length);
        CHECK(bytes == chunks[i].raw);
    }
    CHECK(back[0].bytes.size() < 16);  // a rebuilt chunk keeps only its suffix

    // A v8 block (no seqs, no codecs), built here byte by byte as rackprof wrote them.
    Bytes payload = {2, 0, 3, 4, 2, 'A', 'B', 'C', 'D', 'E'};  // 2 chunks: +0 ns 3 B, +2 ns 2 B
    Bytes framed(ZSTD_compressBound(payload.size()));
    framed.resize(ZSTD_compress(framed.data(), framed.size(), payload.data(), payload.size(), 1));
    const auto old = decode_raw_block(framed, 500, 0, BlockEncoding::kZstdBlock);
    REQUIRE(old.size() == 2);
    CHECK(old[0].bytes == Bytes{'A', 'B', 'C'});
    CHECK(old[1].received_ns == 502);
    CHECK(old[1].bytes == Bytes{'D', 'E'});
    CHECK(old[1].seq == -1);
    CHECK_THROWS_AS(decode_raw_block(framed, 500, 0, static_cast<BlockEncoding>(7)), StorageError);
}

}  // namespace
}  // namespace rackprof::storage
