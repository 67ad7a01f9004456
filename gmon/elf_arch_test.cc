#include "gmon/elf_arch.h"

#include <doctest/doctest.h>

#include <random>
#include <string>

namespace rackprof::gmon {
namespace {

// The pieces in order, NULs kept (GCC 12 warns wrongly about operator+ chains of literals).
std::string join(std::initializer_list<std::string_view> pieces) {
    std::string out;
    for (std::string_view p : pieces) out.append(p.data(), p.size());
    return out;
}

std::string u32(std::size_t v) {
    std::string s(4, '\0');
    for (int i = 0; i < 4; ++i) s[static_cast<std::size_t>(i)] = static_cast<char>(v >> (8 * i));
    return s;
}

// A build-attributes section: 'A', one vendor subsection holding one Tag_File group.
std::string section(std::string_view vendor, std::string_view attributes) {
    const std::string file = join({"\x01", u32(1 + 4 + attributes.size()), attributes});
    const std::string sub = join({vendor, std::string_view("\0", 1), file});
    return join({"A", u32(4 + sub.size()), sub});
}

constexpr std::string_view kNul("\0", 1);

TEST_CASE("build attributes name the architecture as the HELLO does") {
    // Tag_CPU_name "cortex-m3" (5, text), Tag_CPU_arch v7 (6, 10), profile 'M' (7, 0x4D).
    const std::string m3 = join({"\x05", "cortex-m3", kNul, "\x06\x0a\x07\x4d"});
    CHECK(arch_of_attributes(40, section("aeabi", m3)) == "armv7-m");
    CHECK(arch_of_attributes(40, section("aeabi", "\x06\x0b")) == "armv6-m");
    CHECK(arch_of_attributes(40, section("aeabi", "\x06\x0d\x07\x4d")) == "armv7e-m");
    CHECK(arch_of_attributes(40, section("aeabi", "\x06\x11")) == "armv8-m.main");
    CHECK(arch_of_attributes(40, section("aeabi", "\x06\x0a\x07\x41")).empty());  // v7-A
    // Tag_RISCV_stack_align (4, a number), Tag_RISCV_arch (5, text).
    const std::string rv = join({"\x04\x10\x05", "rv32i2p1_m2p0_a2p1_c2p0_zicsr2p0", kNul});
    CHECK(arch_of_attributes(243, section("riscv", rv)) == "rv32imac");
    const std::string imc = join({"\x05", "rv32i2p1_m2p0_c2p0", kNul});
    CHECK(arch_of_attributes(243, section("riscv", imc)) == "rv32imc");
    CHECK(arch_of_attributes(243, section("aeabi", rv)).empty());  // another vendor's
    CHECK(std::string(machine_family(243)) == "riscv");
    CHECK(std::string(machine_family(40)) == "arm");
}

TEST_CASE("malformed build attributes give no architecture, never a read past their end") {
    const std::string good = section("riscv", join({"\x05", "rv32i2p1_m2p0_c2p0", kNul}));
    for (std::size_t n = 0; n < good.size(); ++n) {
        CAPTURE(n);
        CHECK(arch_of_attributes(243, good.substr(0, n)).empty());  // cut short anywhere
    }
    std::mt19937 rng(7);
    for (int i = 0; i < 20000; ++i) {
        std::string bytes = good;
        bytes[rng() % bytes.size()] = static_cast<char>(rng());
        arch_of_attributes(243, bytes);  // must not crash or hang (ASan run)
        arch_of_attributes(40, bytes);
    }
}

}  // namespace
}  // namespace rackprof::gmon
