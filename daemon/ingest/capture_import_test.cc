#include "daemon/ingest/capture_import.h"

#include <doctest/doctest.h>

#include <unistd.h>

#include <fstream>

#include "gmon/gmon_reader.h"
#include "gmon/gmon_writer.h"
#include "gmon/profile_pipeline.h"
#include "protocol/legacy_format.h"

namespace rackprof::ingest {
namespace {

// A 5 Hz gmon.out with a histogram of fractional bin width (as the thesis' host program wrote).
std::vector<std::uint8_t> five_hz_gmon() {
    gmon::GmonData data;
    gmon::Histogram h;
    h.low_pc = 0x400;
    h.high_pc = 0x400 + 40;
    h.prof_rate = 5;
    h.bins = {0, 4, 0, 0, 9, 1, 0, 0, 2, 0, 3};  // 11 bins over 40 bytes
    data.histograms.push_back(h);
    data.arcs = {{0x404, 0x420, 5}, {0x410, 0x420, 0x1'0000'0002ull}};
    return gmon::serialize_gmon(data);
}

TEST_CASE("a gmon.out imports as records that bin back into the same histogram and rate") {
    const auto bytes = five_hz_gmon();
    RecordCollector records;
    const Imported imported = import_bytes(bytes, ImportSpec{}, records);  // detected by magic
    CHECK(imported.kind == InputKind::kGmon);
    CHECK(imported.format == "gmon");
    REQUIRE(imported.histograms.size() == 1);
    CHECK(imported.histograms[0].prof_rate == 5);
    CHECK(imported.stats.pc_samples == 19);
    CHECK(imported.stats.arcs == 0x1'0000'0007ull);
    CHECK(imported.stats.bytes_in == bytes.size());

    gmon::Aggregate aggregate;
    aggregate.add(records.records);
    gmon::ProfileSource source;
    source.aggregate = std::make_shared<const gmon::Aggregate>(aggregate);
    source.histograms = imported.histograms;
    const auto again = gmon::gmon_data_of(source).data;
    const auto original = gmon::merge_duplicates(gmon::parse_gmon(bytes, {}));
    REQUIRE(again.histograms.size() == 1);
    CHECK(again.histograms[0].bins == original.histograms[0].bins);
    CHECK(again.histograms[0].low_pc == original.histograms[0].low_pc);
    CHECK(again.histograms[0].high_pc == original.histograms[0].high_pc);
    CHECK(again.histograms[0].prof_rate == 5);
    CHECK(again.arcs == original.arcs);  // the wide count came back whole
    CHECK(gmon::serialize_gmon(again) == gmon::serialize_gmon(original));
}

TEST_CASE("into an aggregate a gmon.out keeps 64-bit addresses; as records it is refused") {
    gmon::GmonData data;
    data.layout.addr_bytes = 8;
    data.arcs = {{0x1'0000'0000ull, 0x1'0000'0010ull, 3}};
    const auto bytes = gmon::serialize_gmon(data);
    ImportSpec spec;
    spec.layout.addr_bytes = 8;
    gmon::Aggregate aggregate;
    AggregateImportSink into(aggregate);
    import_bytes(bytes, spec, into);
    CHECK(aggregate.arcs() == std::vector<gmon::ArcCount>{{0x1'0000'0000ull, 0x1'0000'0010ull, 3}});
    RecordCollector records;
    CHECK_THROWS_AS(import_bytes(bytes, spec, records), gmon::GmonFormatError);
}

TEST_CASE("a capture: the wire format is detected, and a file imports as its bytes do") {
    std::vector<std::uint8_t> wire;
    for (int i = 0; i < 100; ++i) {
        protocol::encode_legacy(
            protocol::Record::arc(0x100, 0x200 + 2 * static_cast<std::uint32_t>(i % 3)), 3, wire);
        protocol::encode_legacy(protocol::Record::pc_sample(0x104), 3, wire);
    }
    std::string text;
    protocol::append_hex(wire, text);
    const std::vector<std::uint8_t> hex(text.begin(), text.end());
    ImportSpec spec;
    spec.kind = InputKind::kCapture;
    spec.wire.format = "auto";
    gmon::Aggregate from_bytes;
    AggregateImportSink sink(from_bytes);
    const auto imported = import_bytes(hex, spec, sink);
    CHECK(imported.format == "hex");
    CHECK(imported.stats.arcs == 100);
    CHECK(imported.stats.pc_samples == 100);
    CHECK(imported.stats.bytes_discarded == 0);

    const auto path = std::filesystem::temp_directory_path() /
                      ("rackprof-import-test-" + std::to_string(::getpid()) + ".txt");
    std::ofstream(path, std::ios::binary)
        .write(text.data(), static_cast<std::streamsize>(text.size()));
    gmon::Aggregate from_file;
    AggregateImportSink file_sink(from_file);
    std::uint64_t last_progress = 0;
    std::string pieces;  // what a caller storing the raw bytes is handed, in order
    const auto file_imported = import_file(
        path, spec, file_sink, [&](std::uint64_t done, std::uint64_t) { last_progress = done; },
        [&](std::span<const std::uint8_t> bytes) { pieces.append(bytes.begin(), bytes.end()); });
    std::filesystem::remove(path);
    CHECK(pieces == text);
    CHECK(file_imported.format == "hex");
    CHECK(last_progress == text.size());
    CHECK(from_file == from_bytes);
    CHECK(file_imported.stats.bytes_in == imported.stats.bytes_in);

    spec.wire.format = "bin";  // told, not detected: hex text read as binary is mostly discarded
    gmon::Aggregate wrong;
    AggregateImportSink wrong_sink(wrong);
    CHECK(import_bytes(hex, spec, wrong_sink).stats.bytes_discarded > hex.size() / 2);
}

TEST_CASE("bad input: a truncated gmon.out and an unknown protocol are errors, not crashes") {
    auto bytes = five_hz_gmon();
    bytes.resize(bytes.size() - 7);
    RecordCollector records;
    CHECK_THROWS_AS(import_bytes(bytes, ImportSpec{InputKind::kGmon, {}, {}}, records),
                    gmon::GmonFormatError);
    ImportSpec spec;
    spec.kind = InputKind::kCapture;
    spec.wire.protocol = "morse";
    const std::vector<std::uint8_t> some(10, 0x41);
    CHECK_THROWS_AS(import_bytes(some, spec, records), std::invalid_argument);
}

}  // namespace
}  // namespace rackprof::ingest
