#include "daemon/ingest/capture_import.h"
#include "daemon/ingest/import_formats.h"

#include <doctest/doctest.h>

#include <unistd.h>

#include <sys/stat.h>

#include <fstream>
#include <thread>

#include "gmon/gmon_reader.h"
#include "gmon/gmon_writer.h"
#include "gmon/profile_pipeline.h"
#include "protocol/legacy_format.h"

namespace rackprof::daemon::ingest {
namespace {

// A 5 Hz histogram of fractional bin width (as the thesis' host program wrote).
gmon::Histogram five_hz_gmon_histogram() {
    gmon::Histogram h;
    h.low_pc = 0x400;
    h.high_pc = 0x400 + 40;
    h.prof_rate = 5;
    h.bins = {0, 4, 0, 0, 9, 1, 0, 0, 2, 0, 3};  // 11 bins over 40 bytes
    return h;
}

std::vector<std::uint8_t> five_hz_gmon() {
    gmon::GmonData data;
    data.histograms.push_back(five_hz_gmon_histogram());
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

// The records a gmon.out gave when it was read whole: its merged counts as an aggregate, arcs
// then samples by address, counts above 2^32-1 split.
std::vector<protocol::Record> records_read_whole(const std::vector<std::uint8_t>& bytes) {
    const gmon::GmonData data = gmon::merge_duplicates(gmon::parse_gmon(bytes, {}));
    gmon::Aggregate aggregate;
    for (const auto& a : data.arcs) aggregate.add_arc(a.from_pc, a.self_pc, a.count);
    for (const auto& h : data.histograms) {
        for (std::size_t i = 0; i < h.bins.size(); ++i)
            if (h.bins[i]) aggregate.add_pc(gmon::bin_address(gmon::shape_of(h), i), h.bins[i]);
    }
    std::vector<protocol::Record> out;
    auto push = [&](protocol::Record r, std::uint64_t count) {
        for (; count > 0; count -= r.count) {
            r.count = static_cast<std::uint32_t>(std::min<std::uint64_t>(count, 0xFFFFFFFFu));
            out.push_back(r);
        }
    };
    for (const auto& a : aggregate.arcs())
        push(protocol::Record::arc(static_cast<std::uint32_t>(a.from_pc),
                                   static_cast<std::uint32_t>(a.self_pc)),
             a.count);
    for (const auto& p : aggregate.pc_samples())
        push(protocol::Record::pc_sample(static_cast<std::uint32_t>(p.pc)), p.count);
    return out;
}

TEST_CASE("a gmon.out file is mapped and streamed: the same records, order and shapes") {
    // Two histograms with the same range (summed), a second range below them, 150 000 bins
    // (more than a piece of records), duplicate arcs and a count wider than 32 bits.
    gmon::GmonData data;
    gmon::Histogram wide;
    wide.low_pc = 0x10000;
    wide.high_pc = 0x10000 + 2 * 150000;
    wide.bins.resize(150000);
    for (std::size_t i = 0; i < wide.bins.size(); ++i) wide.bins[i] = (i * 7919) % 5;
    gmon::Histogram again = wide;
    for (auto& bin : again.bins) bin = bin == 4 ? 65535 : 0;
    data.histograms = {wide, again, five_hz_gmon_histogram()};
    data.arcs = {{0x404, 0x420, 5}, {0x410, 0x420, 0x1'0000'0002ull}, {0x404, 0x420, 1}};
    const auto bytes = gmon::serialize_gmon(data);
    char name[] = "/tmp/rackprof-gmon-XXXXXX";
    const int fd = ::mkstemp(name);
    REQUIRE(fd >= 0);
    ::close(fd);
    const std::filesystem::path path(name);
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));

    RecordCollector records;
    ImportSpec spec;
    spec.kind = InputKind::kGmon;
    const Imported imported = import_file(path, spec, records);
    CHECK(records.records == records_read_whole(bytes));
    CHECK(imported.stats.bytes_in == bytes.size());
    const auto merged = gmon::merge_duplicates(gmon::parse_gmon(bytes, {}));
    REQUIRE(imported.histograms.size() == 2);
    for (std::size_t h = 0; h < 2; ++h)
        CHECK(imported.histograms[h] == gmon::shape_of(merged.histograms[h]));
    // Into an aggregate: the same counts, kept wide.
    gmon::Aggregate aggregate;
    AggregateImportSink into(aggregate);
    import_file(path, spec, into);
    gmon::Aggregate from_records;
    from_records.add(records.records);
    CHECK(aggregate == from_records);
    CHECK(aggregate.total_samples() == imported.stats.pc_samples);
    // From a pipe (no mapping, no second read): the same records.
    std::filesystem::remove(path);
    REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
    std::thread writer([&] {
        std::ofstream(path, std::ios::binary)
            .write(reinterpret_cast<const char*>(bytes.data()),
                   static_cast<std::streamsize>(bytes.size()));
    });
    RecordCollector piped;
    import_file(path, spec, piped);
    writer.join();
    CHECK(piped.records == records.records);
    std::filesystem::remove(path);
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
    // A bad file's error names it.
    std::filesystem::resize_file(path, bytes.size() - 3);
    CHECK_THROWS_WITH_AS(import_file(path, spec, records), doctest::Contains(path.c_str()),
                         gmon::GmonFormatError);
    std::filesystem::resize_file(path, 0);
    CHECK_THROWS_WITH_AS(import_file(path, spec, records), doctest::Contains("empty"),
                         gmon::GmonFormatError);
    std::filesystem::remove(path);
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
    ImportSpec gmon_spec;
    gmon_spec.kind = InputKind::kGmon;
    CHECK_THROWS_AS(import_bytes(bytes, gmon_spec, records), gmon::GmonFormatError);
    ImportSpec spec;
    spec.kind = InputKind::kCapture;
    spec.wire.protocol = "morse";
    const std::vector<std::uint8_t> some(10, 0x41);
    CHECK_THROWS_AS(import_bytes(some, spec, records), std::invalid_argument);
}

}  // namespace
}  // namespace rackprof::daemon::ingest

namespace rackprof::daemon::ingest {

TEST_CASE("import formats: one table for the command line and the API") {
    REQUIRE(find_import_format("gmon") != nullptr);
    CHECK(find_import_format("gmon")->kind == InputKind::kGmon);
    CHECK(find_import_format("tiva")->kind == InputKind::kTiva);
    CHECK(find_import_format("hex")->wire_encoding == "hex");
    CHECK(find_import_format("auto")->kind == InputKind::kAuto);
    CHECK_FALSE(find_import_format("auto")->uploadable);  // detection is the command line's
    CHECK(find_import_format("elf") == nullptr);
    CHECK(import_format_names(true) == "bin, hex, gmon or tiva");
    CHECK(import_format_names(false) == "auto, bin, hex, gmon or tiva");
}

}  // namespace rackprof::daemon::ingest
