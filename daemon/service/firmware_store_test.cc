// Uploaded firmware: kept once by id, found by id, and the only ELFs a board over HTTP may name.
#include "daemon/service/firmware_store.h"

#include <doctest/doctest.h>

#include <fstream>
#include <iterator>

#include "daemon/capture/board.h"
#include "daemon/service/failure_of_test.h"
#include "daemon/service/scratch_rack_test.h"
#include "gmon/profile.h"
#include "gmon/synthetic_elf.h"

namespace rackprof::daemon::service {
namespace {

TEST_CASE("firmware store: an upload is kept once under its id, and found by it") {
    ScratchDir dir;
    const auto upload = dir.path / "app.elf";
    gmon::write_synthetic_elf(upload, {{"main", 0x100, 0x20}, {"work", 0x120, 0x20}}, 0x100, 0x200);
    const std::string sha256 = capture::file_sha256(upload);
    std::filesystem::copy_file(upload, dir.path / "again.elf");
    FirmwareStore store(dir.path / "firmware");
    const Stored first = store.put(upload);
    CHECK(first.created);
    CHECK(first.view["stored"] == true);
    CHECK(first.view["functions"] ==
          gmon::gprof_symbol_table(*gmon::Symbolizer::load(dir.path / "again.elf")).size());
    CHECK(first.view["sha256"] == sha256);
    const std::string id = first.view["id"];
    CHECK(id ==
          (first.view["build_id"] == "" ? sha256 : first.view["build_id"].get<std::string>()));
    const Stored again = store.put(dir.path / "again.elf");
    CHECK_FALSE(again.created);
    CHECK(again.view["id"] == id);
    CHECK(again.view["stored"] == false);

    REQUIRE(store.find(id));
    CHECK(*store.find(id) == store.dir() / (id + ".elf"));
    CHECK(store.holds(*store.find(id)));
    CHECK_FALSE(store.find("ab"));      // an id, but nothing stored under it
    CHECK_FALSE(store.find("../app"));  // not an id
    CHECK_FALSE(store.holds(dir.path / "again.elf"));
    CHECK_FALSE(store.holds(store.dir() / ".." / "again.elf"));
}

TEST_CASE("firmware store: ids are lower-case hex of at most 128 digits") {
    CHECK(FirmwareStore::is_id("0123456789abcdef"));
    CHECK_FALSE(FirmwareStore::is_id(""));
    CHECK_FALSE(FirmwareStore::is_id("ABCDEF"));
    CHECK_FALSE(FirmwareStore::is_id("../x"));
    CHECK(FirmwareStore::is_id(std::string(128, 'a')));
    CHECK_FALSE(FirmwareStore::is_id(std::string(129, 'a')));
}

// Found by tests/fuzz (api): an upload that loads as an ELF but gives gprof no symbol table
// (here: its code section is not named .text) got past the ELF check, and counting its
// functions for the reply threw: a 500 instead of 422 not_an_elf.
TEST_CASE("firmware that names no functions for gprof is refused as not a usable ELF") {
    ScratchDir dir;
    const auto elf_path = dir.path / "fw.elf";
    gmon::write_synthetic_elf(elf_path, {{"main", 0x100, 0x20}}, 0x100, 0x200);
    std::string elf_bytes;
    {
        std::ifstream f(elf_path, std::ios::binary);
        elf_bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    }
    const auto text = elf_bytes.find(std::string(".text\0", 6));
    REQUIRE(text != std::string::npos);
    elf_bytes[text + 4] = 'x';  // ".texx": still executable code, no longer gprof's .text
    const auto upload = dir.path / "texx.elf";
    std::ofstream(upload, std::ios::binary) << elf_bytes;
    FirmwareStore store(dir.path / "firmware");
    CHECK(failure_of([&] { store.put(upload); }) == Failure::kNotAnElf);
}

TEST_CASE("firmware store: what is not an ELF is refused") {
    ScratchDir dir;
    std::ofstream(dir.path / "junk") << "junk";
    FirmwareStore store(dir.path / "firmware");
    CHECK(failure_of([&] { store.put(dir.path / "junk"); }) == Failure::kNotAnElf);
}

}  // namespace
}  // namespace rackprof::daemon::service
