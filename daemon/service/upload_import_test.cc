// Uploads made stored sessions: a capture decoded as a board's bytes are, refusals as failures.
#include "daemon/service/upload_import.h"

#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "daemon/service/failure_of_test.h"
#include "daemon/service/scratch_rack_test.h"
#include "gmon/tiva_test_support.h"
#include "protocol/legacy_format.h"
#include "storage/session_store.h"

namespace rackprof::daemon::service {
namespace {

void write_file(const std::filesystem::path& file, const std::vector<std::uint8_t>& bytes) {
    std::ofstream(file, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
}

TEST_CASE("upload import: a capture becomes a completed session of its records") {
    ScratchRack rack;
    FirmwareStore firmware(rack.dir.path / "firmware");
    SymbolizerCache elves;
    UploadImport imports(rack.capture, firmware, elves);
    std::vector<std::uint8_t> bytes;
    protocol::encode_legacy(protocol::Record::arc(0x105, 0x121), 3, bytes);
    for (int i = 0; i < 3; ++i)
        protocol::encode_legacy(protocol::Record::pc_sample(0x124), 3, bytes);
    const auto file = rack.dir.path / "capture.bin";
    write_file(file, bytes);
    const std::int64_t id = imports.import(file, {{"board", "up"}, {"format", "bin"}}).at(0);
    rack.capture.shutdown();  // its last commit written
    storage::SessionStore store(rack.config.storage_path, storage::Database::Mode::kReadOnly);
    const auto info = store.session(id);
    REQUIRE(info);
    CHECK(info->state == "completed");
    CHECK(info->spec.board == "up");
    CHECK(info->spec.link == "import");
    CHECK(info->counters.arcs == 1);
    CHECK(info->counters.pc_samples == 3);
    CHECK(store.aggregate(id).total_samples() == 3);
}

TEST_CASE("upload import: a capture of several MiB is stored whole, in pieces of 1 MiB") {
    // The file is read 64 KiB at a time; its raw bytes are gathered into pieces of about 1 MiB
    // (a stored chunk each), read back in order as the file was.
    ScratchRack rack;
    FirmwareStore firmware(rack.dir.path / "firmware");
    SymbolizerCache elves;
    UploadImport imports(rack.capture, firmware, elves);
    std::vector<std::uint8_t> bytes;
    std::uint64_t samples = 0;
    while (bytes.size() < (5u << 19) + 12345) {  // 2.5 MiB and a part of a read
        protocol::encode_legacy(protocol::Record::pc_sample(0x100 + 2 * (samples % 500)), 3, bytes);
        ++samples;
    }
    const auto file = rack.dir.path / "big.bin";
    write_file(file, bytes);
    const std::int64_t id = imports.import(file, {{"board", "big"}, {"format", "bin"}}).at(0);
    rack.capture.shutdown();
    storage::SessionStore store(rack.config.storage_path, storage::Database::Mode::kReadOnly);
    std::vector<std::uint8_t> stored;
    std::size_t pieces = 0;
    store.for_each_chunk(id, [&](std::int64_t, std::span<const std::uint8_t> raw) {
        stored.insert(stored.end(), raw.begin(), raw.end());
        pieces += raw.empty() ? 0 : 1;
    });
    CHECK(stored == bytes);
    CHECK(pieces == 3);  // 1 MiB, 1 MiB and the rest
    CHECK(store.session(id)->counters.pc_samples == samples);
    CHECK(store.aggregate(id).total_samples() == samples);
}

TEST_CASE("upload import: refusals as failures, and nothing stored") {
    ScratchRack rack;
    FirmwareStore firmware(rack.dir.path / "firmware");
    SymbolizerCache elves;
    UploadImport imports(rack.capture, firmware, elves);
    std::ofstream(rack.dir.path / "capture.txt") << "ff";
    const auto junk = rack.dir.path / "capture.txt";
    CHECK(failure_of([&] { imports.import(junk, {{"format", "hex"}}); }) == Failure::kNoRecords);
    CHECK(failure_of([&] { imports.import(junk, {{"format", "tar"}}); }) == Failure::kBadRequest);
    CHECK(failure_of([&] { imports.import(junk, {{"board", "../x"}}); }) == Failure::kBadRequest);
    CHECK(failure_of([&] { imports.import(junk, {{"firmware", "ab"}}); }) == Failure::kNotFound);
    CHECK(failure_of([&] { imports.import(junk, {{"format", "gmon"}}); }) == Failure::kBadGmon);
    CHECK(failure_of([&] { imports.import(junk, {{"format", "tiva"}}); }) == Failure::kBadGmon);
    CHECK(failure_of([&] { imports.import(junk, {{"reports", "all"}}); }) == Failure::kBadRequest);
    rack.capture.shutdown();
    storage::SessionStore store(rack.config.storage_path, storage::Database::Mode::kReadOnly);
    CHECK(store.sessions().empty());
}

// Three reports as a report task prints them (its printf's layout), one line of the second
// garbled on the UART.
std::string three_reports() {
    std::string out = "boot\r\n";
    for (int report = 1; report <= 3; ++report) {
        std::string printed = gmon::testing::printed_tiva_report(
            report, {{7, static_cast<std::uint64_t>(10 * report)}});
        if (report == 2) {  // bin 100's line
            const auto at = printed.find("\n", printed.find(",+0000100,")) + 1;
            const auto line = printed.rfind('\n', at - 2) + 1;
            printed.replace(line, at - line, "0660\x7f\r\n");
        }
        out += printed;
    }
    return out;
}

TEST_CASE("upload import: a Tiva file's reports, a session each, or one for their sum") {
    ScratchRack rack;
    FirmwareStore firmware(rack.dir.path / "firmware");
    SymbolizerCache elves;
    UploadImport imports(rack.capture, firmware, elves);
    const auto file = rack.dir.path / "reports.txt";
    std::ofstream(file, std::ios::binary) << three_reports();
    const auto each = imports.import(file, {{"format", "tiva"}, {"board", "tiva"}});
    const auto summed = imports.import(file, {{"format", "tiva"}, {"reports", "sum"}});
    rack.capture.shutdown();
    storage::SessionStore store(rack.config.storage_path, storage::Database::Mode::kReadOnly);
    REQUIRE(each.size() == 3);
    REQUIRE(summed.size() == 1);
    for (std::size_t i = 0; i < 3; ++i) {
        INFO("report " << i + 1);
        CHECK(store.aggregate(each[i]).total_samples() == 10 * (i + 1));
        const auto tiva = nlohmann::json::parse(store.session(each[i])->spec.wire_options)["tiva"];
        CHECK(tiva["report"] == i + 1);
        CHECK(tiva["number"] == i + 1);
        CHECK(tiva["bins_missing"] == (i == 1 ? 1 : 0));  // the garbled line's bin
        CHECK(tiva["lines_unread"] == 0);  // "0660\x7f" names no report: a stray line
        CHECK(tiva["lines_skipped"] == 2);
    }
    CHECK(store.aggregate(summed[0]).total_samples() == 60);
    const auto tiva = nlohmann::json::parse(store.session(summed[0])->spec.wire_options)["tiva"];
    CHECK(tiva["summed"] == true);
    CHECK(tiva["reports"] == 3);
    CHECK(tiva["bins_missing"] == 1);
}

}  // namespace
}  // namespace rackprof::daemon::service
