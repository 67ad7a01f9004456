// Uploads made stored sessions: a capture decoded as a board's bytes are, refusals as failures.
#include "daemon/service/upload_import.h"

#include <doctest/doctest.h>

#include <fstream>

#include "daemon/service/failure_of_test.h"
#include "daemon/service/scratch_rack_test.h"
#include "protocol/legacy_format.h"
#include "storage/session_store.h"

namespace rackprof::daemon::service {
namespace {

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
    std::ofstream(file, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
    const std::int64_t id = imports.import(file, {{"board", "up"}, {"format", "bin"}});
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
    rack.capture.shutdown();
    storage::SessionStore store(rack.config.storage_path, storage::Database::Mode::kReadOnly);
    CHECK(store.sessions().empty());
}

}  // namespace
}  // namespace rackprof::daemon::service
