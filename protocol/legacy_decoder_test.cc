#include "protocol/legacy_decoder.h"

#include <doctest/doctest.h>

#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace rackprof::protocol {
namespace {

std::span<const std::uint8_t> as_bytes(const std::string& s) {
    return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

struct Decoded {
    std::vector<Record> records;
    DecoderStats stats;
};

// Decodes `wire` fed as chunks cut at the given offsets.
Decoded decode(std::span<const std::uint8_t> wire, LegacyOptions options,
               const std::vector<std::size_t>& cuts = {}) {
    LegacyDecoder decoder(options);
    RecordCollector sink;
    std::size_t start = 0;
    for (std::size_t cut : cuts) {
        decoder.feed(wire.subspan(start, cut - start), sink);
        start = cut;
    }
    decoder.feed(wire.subspan(start), sink);
    decoder.finish(sink);
    return {sink.records, decoder.stats()};
}

std::vector<Record> sample_records() {
    return {Record::arc(0x153D, 0x14E5), Record::arc(0x150D, 0x1499), Record::pc_sample(0x14B4),
            Record::arc(0x153D, 0x14E5), Record::pc_sample(0x146E),   Record::pc_sample(0x08A0),
            Record::arc(0x05BD, 0x04FD)};
}

std::vector<std::uint8_t> encode(const std::vector<Record>& records, int width) {
    std::vector<std::uint8_t> out;
    for (const Record& r : records) encode_legacy(r, width, out);
    return out;
}

TEST_CASE("decodes the documented examples") {
    const auto d = decode(as_bytes("4100153D0014E5500014B4"), {3, LegacyEncoding::kHex, {}});
    REQUIRE(d.records.size() == 2);
    CHECK(d.records[0] == Record::arc(0x153D, 0x14E5));
    CHECK(d.records[1] == Record::pc_sample(0x14B4));
    CHECK(d.stats.bytes_in == 22);
    CHECK(d.stats.bytes_discarded == 0);
    CHECK(d.stats.resyncs == 0);
    CHECK(d.stats.arcs == 1);
    CHECK(d.stats.pc_samples == 1);
}

TEST_CASE("every split point of a stream gives identical output") {
    for (int width : {3, 4}) {
        const auto wire = encode(sample_records(), width);
        const auto whole = decode(wire, {width, LegacyEncoding::kBinary, {}});
        CHECK(whole.records == sample_records());
        for (std::size_t a = 0; a <= wire.size(); ++a) {
            for (std::size_t b = a; b <= wire.size(); ++b) {
                const auto split = decode(wire, {width, LegacyEncoding::kBinary, {}}, {a, b});
                REQUIRE(split.records == whole.records);
                REQUIRE(split.stats == whole.stats);
            }
        }
    }
}

TEST_CASE("one byte at a time equals one chunk, for binary and hex") {
    std::mt19937 rng(7);
    std::vector<Record> records;
    for (int i = 0; i < 500; ++i) {
        records.push_back(i % 3 ? Record::arc(0x400 + rng() % 0x1000, 0x400 + rng() % 0x1000)
                                : Record::pc_sample(0x400 + rng() % 0x1000));
    }
    const auto wire = encode(records, 3);
    std::string text;
    append_hex(wire, text);
    std::vector<std::size_t> every;
    for (std::size_t i = 1; i < text.size(); ++i) every.push_back(i);
    const auto hex = decode(as_bytes(text), {3, LegacyEncoding::kHex, {}}, every);
    every.resize(wire.size() - 1);
    const auto bin = decode(wire, {3, LegacyEncoding::kBinary, {}}, every);
    CHECK(bin.records == records);
    CHECK(hex.records == records);
    CHECK(hex.stats.bytes_in == 2 * bin.stats.bytes_in);
    CHECK(hex.stats.bytes_discarded == 0);
}

TEST_CASE("4-byte addresses keep the top byte") {
    const std::vector<Record> records = {Record::arc(0x0800153D, 0x080014E5),
                                         Record::pc_sample(0x20001000)};
    const auto d = decode(encode(records, 4), {4, LegacyEncoding::kBinary, {}});
    CHECK(d.records == records);
}

TEST_CASE("hex text tolerates white space and line breaks") {
    const auto d =
        decode(as_bytes("41 00 15 3D\r\n00 14 E5\n50 00\t14 b4\n"), {3, LegacyEncoding::kHex, {}});
    CHECK(d.records == std::vector<Record>{Record::arc(0x153D, 0x14E5), Record::pc_sample(0x14B4)});
    CHECK(d.stats.bytes_discarded == 0);
}

TEST_CASE("garbage before the stream is discarded, counted, and decoding resumes") {
    std::vector<std::uint8_t> wire = {0x00, 0xFF, 0x13, 0x37};
    const auto good = encode(sample_records(), 3);
    wire.insert(wire.end(), good.begin(), good.end());
    const auto d = decode(wire, {3, LegacyEncoding::kBinary, {}});
    CHECK(d.records == sample_records());
    CHECK(d.stats.bytes_discarded == 4);
    CHECK(d.stats.resyncs == 1);
    CHECK(d.stats.bytes_in == wire.size());
}

TEST_CASE("a lost byte costs the damaged record only") {
    auto wire = encode(sample_records(), 3);
    wire.erase(wire.begin() + 9);  // inside the second arc
    const AddressRange range{0x400, 0x2000};
    const auto d = decode(wire, {3, LegacyEncoding::kBinary, range});
    auto expected = sample_records();
    expected.erase(expected.begin() + 1);
    CHECK(d.records == expected);
    CHECK(d.stats.bytes_discarded == 6);  // the 7-byte arc less the lost byte
    CHECK(d.stats.resyncs == 1);
    CHECK(d.stats.bytes_in == d.stats.bytes_discarded + 7 * 3 + 4 * 3);
}

TEST_CASE("addresses outside the code range are rejected") {
    const std::vector<Record> records = {Record::arc(0x153D, 0x14E5), Record::pc_sample(0x9000),
                                         Record::pc_sample(0x1400)};
    const auto d =
        decode(encode(records, 3), {3, LegacyEncoding::kBinary, AddressRange{0x400, 0x2000}});
    CHECK(d.records == std::vector<Record>{Record::arc(0x153D, 0x14E5), Record::pc_sample(0x1400)});
    CHECK(d.stats.bytes_discarded == 4);
}

TEST_CASE("a truncated record at the end is counted, not decoded") {
    auto wire = encode(sample_records(), 3);
    wire.resize(wire.size() - 2);
    const auto d = decode(wire, {3, LegacyEncoding::kBinary, {}});
    auto expected = sample_records();
    expected.pop_back();
    CHECK(d.records == expected);
    CHECK(d.stats.bytes_discarded == 5);
}

TEST_CASE("invalid hex characters are counted in text characters") {
    const auto d = decode(as_bytes("500014B4zz500014B4"), {3, LegacyEncoding::kHex, {}});
    CHECK(d.records.size() == 2);
    CHECK(d.stats.bytes_discarded == 2);
    const auto odd = decode(as_bytes("500014B45"), {3, LegacyEncoding::kHex, {}});
    CHECK(odd.records.size() == 1);
    CHECK(odd.stats.bytes_discarded == 1);
}

TEST_CASE("random corruption never crashes and accounts for every byte") {
    std::mt19937 rng(42);
    for (int round = 0; round < 200; ++round) {
        std::vector<std::uint8_t> wire(rng() % 300);
        for (auto& b : wire)
            b = static_cast<std::uint8_t>(rng() % 4 == 0 ? 0x41 + (rng() % 2) * 0x0F : rng());
        std::vector<std::size_t> cuts;
        for (std::size_t i = 1; i < wire.size(); i += 1 + rng() % 13) cuts.push_back(i);
        const auto whole = decode(wire, {3, LegacyEncoding::kBinary, {}});
        const auto split = decode(wire, {3, LegacyEncoding::kBinary, {}}, cuts);
        REQUIRE(split.records == whole.records);
        REQUIRE(split.stats == whole.stats);
        REQUIRE(whole.stats.bytes_in ==
                whole.stats.bytes_discarded + 7 * whole.stats.arcs + 4 * whole.stats.pc_samples);
    }
}

TEST_CASE("an address width other than 3 or 4 is refused") {
    CHECK_THROWS_AS(LegacyDecoder({2, LegacyEncoding::kBinary, {}}), std::invalid_argument);
}

}  // namespace
}  // namespace rackprof::protocol
