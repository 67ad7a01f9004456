#include "probe/firmware_identity.h"

#include <doctest/doctest.h>

#include <cstdio>
#include <string>

namespace rackprof::probe {
namespace {

// What binutils' readelf says this test's own build-id is ("Build ID: ...").
std::string readelf_build_id(const std::string& path) {
    std::string out;
    if (FILE* p = ::popen(("readelf -n '" + path + "' 2>/dev/null").c_str(), "r")) {
        char buf[512];
        while (std::fgets(buf, sizeof buf, p)) out += buf;
        ::pclose(p);
    }
    const auto at = out.find("Build ID: ");
    if (at == std::string::npos) return "";
    return out.substr(at + 10, out.find('\n', at) - at - 10);
}

TEST_CASE("a build-id note is read from an ELF where it is loaded, as readelf reads it") {
    const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    const std::string expected = readelf_build_id(self);
    if (expected.empty()) {
        MESSAGE("SKIP: readelf shows no build-id for this test binary");
        return;
    }
    const auto note = build_id_note(self);
    REQUIRE(note);
    CHECK(note->id == expected);
    CHECK(note->size == 16 + expected.size() / 2);
    CHECK(note->address != 0);
}

TEST_CASE("a build-id note's bytes: the GNU note of type 3 only, whole") {
    std::string note("\x04\0\0\0\x04\0\0\0\x03\0\0\0GNU\0\xde\xad\xbe\xef", 20);
    CHECK(parse_build_id_note(note) == "deadbeef");
    CHECK_FALSE(parse_build_id_note(note.substr(0, 19)));  // cut short
    std::string wrong_type = note;
    wrong_type[8] = 1;
    CHECK_FALSE(parse_build_id_note(wrong_type));
    std::string wrong_name = note;
    wrong_name[12] = 'X';
    CHECK_FALSE(parse_build_id_note(wrong_name));
    CHECK_FALSE(parse_build_id_note(std::string(20, '\xff')));  // erased flash
    CHECK_THROWS(build_id_note("/proc/self/status"));           // not an ELF
}

}  // namespace
}  // namespace rackprof::probe
