#include "gmon/profile.h"

#include <doctest/doctest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "gmon/report.h"
#include "gmon/synthetic_elf.h"
#include "gmon/temp_elf_test.h"

namespace rackprof::gmon {
namespace {

const ProfileNode& node_named(const Profile& p, const std::string& name) {
    for (std::size_t i = 0; i < p.symbols.size(); ++i) {
        if (p.symbols[i].name == name) return p.nodes[i];
    }
    FAIL("no symbol " << name);
    throw std::logic_error("unreachable");
}

TEST_CASE("symbols are read with the Thumb bit cleared and bounded by the next symbol") {
    TempElf elf({{"main", 0x100, 0x20}, {"work", 0x120, 0x10}, {"idle", 0x140, 0x10}}, 0x100,
                0x160);
    const auto sym = Symbolizer::load(elf.path);
    const auto table = gprof_symbol_table(*sym);
    REQUIRE(table.size() == 4);
    CHECK(table[0].name == "main");
    CHECK(table[0].addr == 0x100);
    CHECK(table[0].end_addr == 0x11F);
    CHECK(table[1].end_addr == 0x13F);
    CHECK(table[2].end_addr == 0x15F);
    CHECK(table[3].name == "_etext");  // the label the writer puts at the end of .text
    CHECK_FALSE(table[3].is_func);
    CHECK(sym->code_low() == 0x100);
    CHECK(sym->code_high() == 0x160);
}

TEST_CASE("time and calls are attributed with gprof's rules") {
    TempElf elf({{"main", 0x100, 0x20},
                 {"fast", 0x120, 0x20},
                 {"slow", 0x140, 0x20},
                 {"work", 0x160, 0x20},
                 {"end", 0x180, 0x20}},
                0x100, 0x1A0);
    const auto sym = Symbolizer::load(elf.path);
    Aggregate a;
    a.add_arc(0x105, 0x125, 10);  // main -> fast
    a.add_arc(0x109, 0x145, 10);  // main -> slow
    a.add_arc(0x129, 0x165, 10);  // fast -> work
    a.add_arc(0x149, 0x165, 30);  // slow -> work
    a.add_pc(0x164, 400);         // work
    a.add_pc(0x102, 100);         // main
    const auto data = to_gmon_data(a, {0x100, 0x1A0, 2, 100}, sym->layout()).data;
    const Profile p = compute_profile(data, *sym);
    CHECK(p.total_time == doctest::Approx(500));
    CHECK(node_named(p, "work").ncalls == 40);
    CHECK(node_named(p, "work").self_time == doctest::Approx(400));
    // slow made 3/4 of work's calls, so it is charged 3/4 of work's time.
    CHECK(node_named(p, "slow").child_time == doctest::Approx(300));
    CHECK(node_named(p, "fast").child_time == doctest::Approx(100));
    CHECK(node_named(p, "main").child_time == doctest::Approx(400));
    CHECK(p.nodes[p.flat_order[0]].self_time == doctest::Approx(400));
    const std::string text = render_gprof_text(p);
    CHECK(text.find("Flat profile:") == 0);
    CHECK(text.find("Call graph") != std::string::npos);
}

TEST_CASE("mutual recursion collapses into a cycle") {
    TempElf elf(
        {{"main", 0x100, 0x20}, {"ping", 0x120, 0x20}, {"pong", 0x140, 0x20}, {"end", 0x160, 0x20}},
        0x100, 0x180);
    const auto sym = Symbolizer::load(elf.path);
    Aggregate a;
    a.add_arc(0x105, 0x125, 2);  // main -> ping
    a.add_arc(0x129, 0x145, 5);  // ping -> pong
    a.add_arc(0x149, 0x125, 4);  // pong -> ping
    a.add_arc(0x12D, 0x125, 3);  // ping -> ping
    a.add_pc(0x124, 10);
    a.add_pc(0x144, 30);
    const Profile p =
        compute_profile(to_gmon_data(a, {0x100, 0x180, 2, 100}, sym->layout()).data, *sym);
    REQUIRE(p.cycles.size() == 1);
    CHECK(p.cycles[0].members.size() == 2);
    CHECK(p.cycles[0].ncalls == 2);      // from outside the cycle
    CHECK(p.cycles[0].self_calls == 9);  // among members
    CHECK(p.cycles[0].self_time == doctest::Approx(40));
    CHECK(node_named(p, "ping").self_calls == 3);
    CHECK(node_named(p, "main").child_time == doctest::Approx(40));
}

TEST_CASE("a wrong ELF is a clear error") {
    const auto path = std::filesystem::temp_directory_path() / "rackprof-not-an-elf";
    { std::ofstream(path) << "hello"; }
    CHECK_THROWS_WITH_AS(Symbolizer::load(path), doctest::Contains("not an ELF"), ElfError);
    std::filesystem::remove(path);
    CHECK_THROWS_AS(Symbolizer::load("/nonexistent/firmware.elf"), ElfError);
}

// A fuzz input (symbolizer): a symbol loop counting entries from the section header would
// spin through 2^32 failing reads for a .symtab claiming 4 GB (its data unreadable): an
// uploaded ELF must not hang an API thread.
TEST_CASE("a symbol table header larger than the file is not looped over") {
    TempElf elf({{"main", 0x100, 0x20}}, 0x100, 0x120);
    std::string bytes;
    {
        std::ifstream f(elf.path, std::ios::binary);
        bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    }
    const auto u32 = [&](std::size_t at) {
        std::uint32_t v = 0;
        for (int i = 3; i >= 0; --i) v = v << 8 | static_cast<std::uint8_t>(bytes[at + i]);
        return v;
    };
    const std::uint32_t shoff = u32(0x20);  // ELF32: e_shoff; e_shentsize 40, e_shnum at 0x30
    const unsigned shnum = static_cast<std::uint8_t>(bytes[0x30]);
    bool patched = false;
    for (unsigned i = 0; i < shnum; ++i) {
        const std::size_t sh = shoff + 40 * i;
        if (u32(sh + 4) != 2) continue;                           // SHT_SYMTAB
        for (int k = 0; k < 4; ++k) bytes[sh + 20 + k] = '\xFF';  // sh_size
        bytes[sh + 36] = 1;                                       // sh_entsize
        bytes[sh + 37] = bytes[sh + 38] = bytes[sh + 39] = 0;
        patched = true;
    }
    REQUIRE(patched);
    { std::ofstream(elf.path, std::ios::binary) << bytes; }
    const auto started = std::chrono::steady_clock::now();
    const auto sym = Symbolizer::load(elf.path);
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
    CHECK(sym->symbols().empty());  // unreadable: none, rather than garbage
    CHECK_THROWS_AS(gprof_symbol_table(*sym), std::invalid_argument);
}

// A 64-bit ELF with one executable section [addr, addr + size) and a section name table.
std::string elf64_with_code_section(std::uint64_t addr, std::uint64_t size) {
    std::string out(256, '\0');
    const auto put = [&](std::size_t at, std::uint64_t v, int bytes) {
        for (int i = 0; i < bytes; ++i) out[at + i] = static_cast<char>(v >> (8 * i));
    };
    out.replace(0, 7,
                "\x7f"
                "ELF\x02\x01\x01");  // 64-bit, little-endian, version 1
    put(16, 2, 2);                   // ET_EXEC
    put(18, 62, 2);                  // EM_X86_64
    put(20, 1, 4);
    put(40, 64, 8);  // e_shoff: the section headers right after this header
    put(52, 64, 2);  // e_ehsize
    put(58, 64, 2);  // e_shentsize
    put(60, 3, 2);   // e_shnum: null, .text, .shstrtab
    put(62, 2, 2);   // e_shstrndx
    const std::size_t text = 64 + 64, names = 64 + 2 * 64;
    put(text + 0, 1, 4);  // ".text"
    put(text + 4, 1, 4);  // SHT_PROGBITS
    put(text + 8, 6, 8);  // SHF_ALLOC | SHF_EXECINSTR
    put(text + 16, addr, 8);
    put(text + 24, 256, 8);
    put(text + 32, size, 8);
    put(names + 0, 7, 4);  // ".shstrtab"
    put(names + 4, 3, 4);  // SHT_STRTAB
    put(names + 24, 256, 8);
    put(names + 32, 17, 8);
    return out + std::string(".text\0.shstrtab\0", 17) + std::string(0x200, '\0');
}

// A fuzz input (symbolizer): an executable section ending past 2^64 would wrap, leaving
// code_high below code_low, a range no PC is in (imports would drop every record).
TEST_CASE("an executable section past the end of the address space is refused") {
    const auto path = std::filesystem::temp_directory_path() /
                      ("rackprof-wrapped-" + std::to_string(::getpid()) + ".elf");
    { std::ofstream(path, std::ios::binary) << elf64_with_code_section(~0xFFull, 0x200); }
    CHECK_THROWS_WITH_AS(Symbolizer::load(path), doctest::Contains("past the address space"),
                         ElfError);
    { std::ofstream(path, std::ios::binary) << elf64_with_code_section(0x400000, 0x200); }
    CHECK_THROWS_WITH_AS(Symbolizer::load(path), doctest::Contains("no symbol table"), ElfError);
    std::filesystem::remove(path);
}

}  // namespace
}  // namespace rackprof::gmon
