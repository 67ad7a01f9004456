// GNU gprof is the oracle: for many random firmware images and profiles, rackprof's report
// must equal `arm-none-eabi-gprof -b` byte for byte (flat profile, call graph and index).
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "gmon/gmon_reader.h"
#include "gmon/gmon_writer.h"
#include "gmon/profile.h"
#include "gmon/profile_pipeline.h"
#include "gmon/report.h"
#include "gmon/synthetic_elf.h"
#include "tests/integration/test_support.h"

namespace rackprof {
namespace {

using gmon::Aggregate;
using gmon::SyntheticFunction;

struct RandomCase {
    std::vector<SyntheticFunction> functions;
    std::uint32_t low = 0;
    std::uint32_t high = 0;
    Aggregate aggregate;
    gmon::HistogramSpec spec;
};

// gprof's last symbol has no defined upper bound (gprof reads past its table), so samples and
// bins stay below the `_etext` label the image ends with, as in real firmware.
// A random image: functions and labels, statics and globals, gaps, aliases, odd names; and a
// random profile over it: arcs (self-recursion and cycles arise naturally), stray addresses,
// and bins beyond 65535 samples.
RandomCase make_case(std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    auto pick = [&](std::uint64_t n) { return rng() % n; };
    RandomCase c;
    const std::size_t n = 2 + pick(30);
    std::uint32_t addr = 0x1000 + 2 * static_cast<std::uint32_t>(pick(64));
    c.low = addr;
    static const char* kSuffixes[] = {"", "", "", "", ".constprop.0", ".part.1", ".42", "_isr"};
    for (std::size_t i = 0; i < n; ++i) {
        if (pick(6) == 0) addr += 2 * static_cast<std::uint32_t>(pick(16));  // a gap
        SyntheticFunction f;
        const char* prefix = pick(8) == 0 ? "_" : (pick(12) == 0 ? "__" : "");
        f.name = std::string(prefix) + "fn" + std::to_string(i) +
                 (pick(5) == 0 ? kSuffixes[pick(8)] : "");
        // A profiling hook's name: gprof leaves it out of the flat profile, the graph and the
        // total time by default (the RISC-V runtime's is _mcount).
        if (i == 1 && pick(6) == 0) f.name = pick(2) ? "_mcount" : "mcount";
        f.addr = addr;
        f.size = 2 * static_cast<std::uint32_t>(1 + pick(40));
        f.global = pick(10) < 7;
        f.function = pick(10) < 9;
        c.functions.push_back(f);
        if (pick(15) == 0) {  // an alias at the same address
            SyntheticFunction alias = f;
            alias.name = f.name + "_alias";
            alias.global = pick(2);
            c.functions.push_back(alias);
        }
        addr += f.size;
    }
    static const std::uint32_t kBins[] = {2, 2, 2, 4, 6, 8, 16};
    static const std::uint32_t kRates[] = {1000, 1000, 100, 10000, 60};
    const std::uint32_t bin = kBins[pick(7)];
    c.high = c.low + (addr - c.low + bin - 1) / bin * bin;  // the last bin ends at _etext
    const std::uint32_t span = c.high - c.low;
    auto anywhere = [&](std::uint32_t slack) {
        return c.low - slack + static_cast<std::uint32_t>(pick(span + 2 * slack));
    };
    auto entry = [&] {
        const auto& f = c.functions[pick(c.functions.size())];
        return f.addr + std::min<std::uint32_t>(4, f.size - 2);
    };
    const std::size_t arcs = pick(4 * n + 1);
    for (std::size_t i = 0; i < arcs; ++i) {
        const std::uint32_t from = (pick(20) == 0 ? anywhere(16) : anywhere(0)) | 1u;
        const std::uint32_t self = (pick(10) == 0 ? anywhere(8) : entry()) | 1u;
        const std::uint64_t count =
            pick(30) == 0 ? 1 + pick(5'000'000'000ull) : 1 + pick(pick(2) ? 10 : 2000);
        c.aggregate.add_arc(from, self, count);
    }
    const std::size_t pcs = pick(300);
    for (std::size_t i = 0; i < pcs; ++i) {
        const std::uint64_t count =
            pick(40) == 0 ? 60000 + pick(200000) : 1 + pick(pick(3) ? 5 : 500);
        c.aggregate.add_pc(anywhere(0) & ~1u, count);
    }
    c.spec = {c.low, c.high, bin, kRates[pick(5)]};
    return c;
}

TEST_CASE("random profiles: rackprof's report equals gprof's, byte for byte") {
    testing::TempDir dir;
    // RACKPROF_ORACLE_CASES=N widens the search (3000 passed when this was written).
    const char* wanted = std::getenv("RACKPROF_ORACLE_CASES");
    const std::uint64_t cases = wanted ? std::strtoull(wanted, nullptr, 10) : 150;
    std::uint64_t compared = 0;
    for (std::uint64_t seed = 1; seed <= cases; ++seed) {
        CAPTURE(seed);
        const RandomCase c = make_case(seed);
        const auto elf_path = dir / ("case" + std::to_string(seed) + ".elf");
        const auto gmon_path = dir / ("case" + std::to_string(seed) + ".gmon");
        gmon::write_synthetic_elf(elf_path, c.functions, c.low, c.high);
        const auto elf = gmon::Symbolizer::load(elf_path);
        const auto binned = gmon::to_gmon_data(c.aggregate, c.spec, elf->layout());
        gmon::write_file_atomically(gmon_path, gmon::serialize_gmon(binned.data));

        // What rackprof computes from the file it wrote, read back through its reader.
        const auto data = gmon::merge_duplicates(gmon::read_gmon_file(gmon_path, elf->layout()));
        // Every fourth case in line mode: no DWARF here, so gprof -l keeps the function table
        // but prints the call graph of functions only (labels are not functions).
        const bool lines = seed % 4 == 0;
        CAPTURE(lines);
        const std::string ours =
            gmon::render_gprof_text(gmon::compute_profile(data, *elf, {0, lines}));
        const std::string theirs = testing::gprof_brief(elf_path, gmon_path, lines);
        if (ours != theirs) {
            MESSAGE("gprof:\n" << theirs << "\nrackprof:\n" << ours);
        }
        REQUIRE(ours == theirs);
        ++compared;
    }
    CHECK(compared == cases);
}

// The report sorts each function's callers and callees; gprof insertion-sorts them, rackprof
// stable-sorts them. Lists of hundreds of arcs with many ties (equal counts within the cycle,
// equal times outside it) must come out in gprof's order.
TEST_CASE("a profile with hundreds of callers per function: rackprof's report equals gprof's") {
    testing::TempDir dir;
    std::mt19937_64 rng(7);
    RandomCase c;
    c.low = 0x1000;
    std::uint32_t addr = c.low;
    for (int i = 0; i < 400; ++i) {
        const auto size = 2 * static_cast<std::uint32_t>(4 + rng() % 40);
        c.functions.push_back({"fn" + std::to_string(i), addr, size, rng() % 5 != 0});
        addr += size;
    }
    c.high = addr;
    for (int i = 0; i < 12000; ++i) {
        const auto& from = c.functions[rng() % c.functions.size()];
        // A few popular callees (long parent lists), and callers among the first 100 only,
        // so the rest have callers but no callees: arcs in and out of one big cycle.
        const auto& to = c.functions[rng() % (i % 3 ? 25 : c.functions.size())];
        const auto& caller = i % 5 ? from : c.functions[rng() % 100];
        c.aggregate.add_arc(
            (caller.addr + 2 * static_cast<std::uint32_t>(rng() % (caller.size / 2))) | 1,
            to.addr | 1, 1 + rng() % 6);
    }
    for (int i = 0; i < 4000; ++i)
        c.aggregate.add_pc(c.low + 2 * static_cast<std::uint32_t>(rng() % ((addr - c.low) / 2)),
                           1 + rng() % 4);
    c.spec = {c.low, c.high, 2, 1000};
    const auto elf_path = dir / "wide.elf";
    const auto gmon_path = dir / "wide.gmon";
    gmon::write_synthetic_elf(elf_path, c.functions, c.low, c.high);
    const auto elf = gmon::Symbolizer::load(elf_path);
    const auto binned = gmon::to_gmon_data(c.aggregate, c.spec, elf->layout());
    gmon::write_file_atomically(gmon_path, gmon::serialize_gmon(binned.data));
    const auto data = gmon::merge_duplicates(gmon::read_gmon_file(gmon_path, elf->layout()));
    const gmon::Profile profile = gmon::compute_profile(data, *elf);
    CHECK(profile.arcs.size() > 5000);
    CHECK_FALSE(profile.cycles.empty());
    const std::string ours = gmon::render_gprof_text(profile);
    const std::string theirs = testing::gprof_brief(elf_path, gmon_path);
    CHECK(ours.size() > 500000);
    CHECK(ours == theirs);
}

// The same oracle on the thesis' real firmware (blinky.elf, shield.elf): a real symbol table
// (~400 functions, .isra/.part/.constprop clones, local labels and mapping symbols, aliases,
// data in .text) under random profiles shaped like captures: arcs whose source is anywhere in
// a function (an RTOS function calling from its middle), whose target is a function's
// prologue (where mcount is called) or now and then a label, a data symbol or the middle of a
// function; interrupt handlers as callers and callees; most symbols never called.
struct RealElf {
    std::filesystem::path path;
    std::shared_ptr<const gmon::Symbolizer> elf;
    std::vector<gmon::ElfSymbol> functions;  // STT_FUNC in .text, any binding
    std::vector<gmon::ElfSymbol> handlers;   // interrupt and exception handlers
    std::vector<gmon::ElfSymbol> others;     // labels, data and mapping symbols in .text
};

RealElf load_real_elf(const std::filesystem::path& path) {
    RealElf r;
    r.path = path;
    r.elf = gmon::Symbolizer::load(path);
    const std::uint64_t low = r.elf->text_addr();
    const std::uint64_t high = low + r.elf->text_size();
    for (const gmon::ElfSymbol& s : r.elf->symbols()) {
        if (!s.defined || s.addr < low || s.addr >= high) continue;
        if (s.function && s.size >= 2) {
            r.functions.push_back(s);
            if (s.name.find("Handler") != std::string::npos ||
                s.name.find("IRQ") != std::string::npos || s.name.find("ISR") != std::string::npos)
                r.handlers.push_back(s);
        } else if (!s.function) {
            r.others.push_back(s);
        }
    }
    return r;
}

RandomCase make_real_case(const RealElf& r, std::uint64_t seed) {
    const std::uint32_t thumb = r.elf->arm() ? 1u : 0u;  // arcs' addresses as the target sends them
    std::mt19937_64 rng(seed);
    auto pick = [&](std::uint64_t n) { return n ? rng() % n : 0; };
    RandomCase c;
    c.low = static_cast<std::uint32_t>(r.elf->text_addr());
    // Stay below the last symbol (_etext), whose range gprof does not define.
    c.high = static_cast<std::uint32_t>(r.elf->text_addr() + r.elf->text_size());
    // The functions this run touches: a few to most of them.
    std::vector<gmon::ElfSymbol> active;
    const std::size_t wanted = 2 + pick(pick(2) ? 40 : r.functions.size());
    for (std::size_t i = 0; i < wanted; ++i)
        active.push_back(r.functions[pick(r.functions.size())]);
    for (std::size_t i = 0, n = pick(4); i < n && !r.handlers.empty(); ++i)
        active.push_back(r.handlers[pick(r.handlers.size())]);
    auto inside = [&](const gmon::ElfSymbol& f) {
        return static_cast<std::uint32_t>(f.addr + 2 * pick(f.size / 2));
    };
    auto anywhere = [&] {
        return c.low + 2 * static_cast<std::uint32_t>(pick((c.high - c.low) / 2));
    };
    auto callee = [&]() -> std::uint32_t {
        const auto kind = pick(40);
        if (kind == 0 && !r.others.empty())
            return static_cast<std::uint32_t>(r.others[pick(r.others.size())].addr);
        if (kind == 1) return inside(active[pick(active.size())]);
        if (kind == 2) return anywhere();
        const auto& f = active[pick(active.size())];
        // mcount's return address: a few instructions into the prologue.
        return static_cast<std::uint32_t>(f.addr +
                                          std::min<std::uint64_t>(2 * (1 + pick(5)), f.size - 2));
    };
    const std::size_t arcs = pick(6 * active.size() + 1);
    for (std::size_t i = 0; i < arcs; ++i) {
        const std::uint32_t from = pick(25) == 0 ? anywhere() : inside(active[pick(active.size())]);
        const std::uint64_t count = pick(30) == 0  ? 1 + pick(5'000'000'000ull)
                                    : pick(3) == 0 ? 1 + pick(4)
                                                   : 1 + pick(pick(2) ? 10 : 2000);
        c.aggregate.add_arc(from | thumb, callee() | thumb, count);
    }
    const std::size_t pcs = pick(pick(2) ? 50 : 2000);
    for (std::size_t i = 0; i < pcs; ++i) {
        const std::uint32_t pc = pick(8) == 0 ? anywhere() : inside(active[pick(active.size())]);
        const std::uint64_t count =
            pick(40) == 0 ? 60000 + pick(200000) : 1 + pick(pick(3) ? 5 : 500);
        c.aggregate.add_pc(pc, count);
    }
    static const std::uint32_t kBins[] = {2, 2, 4, 4, 8, 16};
    static const std::uint32_t kRates[] = {1000, 1000, 100, 10000, 60};
    c.spec = {c.low, c.high, kBins[pick(6)], kRates[pick(5)]};
    return c;
}

// `cases` random profiles of a real ELF (every third by line): rackprof's report of each
// gmon.out it writes equals the report of the ELF's own gprof.
void compare_real_cases(const std::filesystem::path& path, std::uint64_t cases) {
    testing::TempDir dir;
    const RealElf r = load_real_elf(path);
    REQUIRE(r.functions.size() > 50);
    std::uint64_t compared = 0;
    for (std::uint64_t seed = 1; seed <= cases; ++seed) {
        const std::string elf_name = path.filename().string();
        CAPTURE(elf_name);
        CAPTURE(seed);
        const RandomCase c = make_real_case(r, seed);
        const auto gmon_path = dir / ("real" + std::to_string(seed) + ".gmon");
        const auto binned = gmon::to_gmon_data(c.aggregate, c.spec, r.elf->layout());
        gmon::write_file_atomically(gmon_path, gmon::serialize_gmon(binned.data));
        const auto read = gmon::merge_duplicates(gmon::read_gmon_file(gmon_path, r.elf->layout()));
        const bool lines = seed % 3 == 0;
        CAPTURE(lines);
        const gmon::Profile prof = gmon::compute_profile(read, *r.elf, {0, lines});
        const std::string ours = gmon::render_gprof_text(prof);
        const std::string theirs = testing::gprof_brief(r.path, gmon_path, lines);
        if (ours != theirs) {
            if (const char* keep = std::getenv("RACKPROF_ORACLE_KEEP")) {
                std::filesystem::copy_file(gmon_path, std::string(keep) + ".gmon",
                                           std::filesystem::copy_options::overwrite_existing);
                std::ofstream(std::string(keep) + ".ours") << ours;
                std::ofstream(std::string(keep) + ".gprof") << theirs;
            }
            MESSAGE("gprof:\n" << theirs << "\nrackprof:\n" << ours);
        }
        REQUIRE(ours == theirs);
        ++compared;
    }
    CHECK(compared == cases);
}

std::uint64_t oracle_cases(std::uint64_t fallback) {
    // RACKPROF_ORACLE_CASES=N widens the search (per ELF).
    const char* wanted = std::getenv("RACKPROF_ORACLE_CASES");
    return wanted ? std::strtoull(wanted, nullptr, 10) : fallback;
}

TEST_CASE("random profiles on the thesis' real ELFs: rackprof's report equals gprof's") {
    const auto data = testing::shared_data("random profiles on the thesis' real ELFs");
    if (data.empty()) return;
    for (const char* name : {"blinky.elf", "shield.elf"})
        compare_real_cases(data / name, oracle_cases(25));
}

// A C program of `n` functions calling each other (a DAG, with loops, statics, a recursive
// one), as firmware is: many small functions, a few big ones.
std::string generated_program(std::size_t n) {
    std::ostringstream c;
    c << "volatile unsigned sink;\n";
    for (std::size_t i = n; i-- > 0;) {
        c << (i % 5 == 3 ? "static " : "") << "__attribute__((noinline)) unsigned f" << i
          << "(unsigned x) {\n    unsigned acc = x;\n";
        c << "    for (unsigned k = 0; k < " << 1 + (i * 7) % 13
          << "u; k++) acc = acc * 33u + k;\n";
        for (std::size_t j = i + 1; j < n && j <= i + 3; ++j)
            if ((i + j) % 3 != 0)
                c << "    if (acc & " << (1u << (j % 5)) << "u) acc += f" << j << "(acc);\n";
        if (i % 11 == 4) c << "    if (x > 3u) acc += f" << i << "(x / 2u);\n";
        c << "    sink = acc;\n    return acc;\n}\n";
    }
    c << "void _start(void) { for (;;) sink = f0(sink); }\n";
    return c.str();
}

// RISC-V firmware: GCC's rv32 code (RV32IMAC, and RV32IMC without atomics) with its DWARF 5,
// read by riscv64-unknown-elf-gprof.
TEST_CASE("random profiles on RISC-V ELFs: rackprof's report equals riscv64-unknown-elf-gprof's") {
    if (testing::run({"sh", "-c",
                      "command -v riscv64-unknown-elf-gcc && command -v "
                      "riscv64-unknown-elf-gprof"})
            .exit_code != 0) {
        MESSAGE(
            "SKIP: needs gcc-riscv64-unknown-elf and binutils-riscv64-unknown-elf (./setup.sh)");
        return;
    }
    testing::TempDir dir;
    std::ofstream(dir / "prog.c") << generated_program(90);
    for (const char* arch : {"rv32imac", "rv32imc"}) {
        const auto elf = dir / (std::string(arch) + ".elf");
        const auto built = testing::run({"riscv64-unknown-elf-gcc", std::string("-march=") + arch,
                                         "-mabi=ilp32", "-O2", "-g", "-nostdlib", "-Wl,--build-id",
                                         "-o", elf.string(), (dir / "prog.c").string()});
        INFO(built.err);
        REQUIRE(built.exit_code == 0);
        CHECK(gmon::Symbolizer::load(elf)->arch() == arch);  // from .riscv.attributes
        compare_real_cases(elf, oracle_cases(25));
    }
}

TEST_CASE("target-fw's ELFs name their architecture as their build attributes say") {
    const auto fw = std::filesystem::path(RACKPROF_BINARY).parent_path() / "target-fw";
    if (!std::filesystem::exists(fw / "blinky-microbit-compat.elf")) {
        MESSAGE("SKIP: target-fw not built");
        return;
    }
    CHECK(gmon::Symbolizer::load(fw / "blinky-microbit-compat.elf")->arch() == "armv6-m");
    CHECK(gmon::Symbolizer::load(fw / "blinky-mps2-an385-compat.elf")->arch() == "armv7-m");
    CHECK(gmon::Symbolizer::load(fw / "blinky-mps2-an386-compat.elf")->arch() == "armv7e-m");
}

std::uint64_t address_of(const gmon::Symbolizer& elf, const std::string& name) {
    for (const gmon::ElfSymbol& s : elf.symbols()) {
        if (s.name == name) return s.addr;
    }
    FAIL("no symbol " << name << " in " << elf.path());
    return 0;
}

// Issue 16: on a shield.elf capture, a function that only calls (no time, no calls of its own,
// so it is printed only as a caller) had index [370] where gprof prints [369]. Labels in
// .init_array/.fini_array (data_init_end, ___ROM_AT, ...) were taken for code, because
// ".init_array" was matched as ".init": one symbol too many ahead of it in the index order.
TEST_CASE("shield.elf: a caller without time or calls has gprof's index number (issue 16)") {
    const auto data = testing::shared_data("shield.elf caller index");
    if (data.empty()) return;
    testing::TempDir dir;
    const auto elf = gmon::Symbolizer::load(data / "shield.elf");
    const auto caller = address_of(*elf, "xEventGroupSetBits");
    gmon::Aggregate aggregate;
    // Its three calls, from the middle of it (return addresses after each bl).
    aggregate.add_arc((caller + 0x26) | 1, (address_of(*elf, "vTaskSuspendAll") + 4) | 1, 3);
    aggregate.add_arc((caller + 0x5e) | 1,
                      (address_of(*elf, "vTaskRemoveFromUnorderedEventList") + 4) | 1, 2);
    aggregate.add_arc((caller + 0x8e) | 1, (address_of(*elf, "xTaskResumeAll") + 4) | 1, 3);
    aggregate.add_pc(address_of(*elf, "main") + 8, 10);
    const gmon::HistogramSpec spec{elf->text_addr(), elf->text_addr() + elf->text_size(), 2, 1000};
    const auto gmon_path = dir / "issue16.gmon";
    gmon::write_file_atomically(
        gmon_path, gmon::serialize_gmon(gmon::to_gmon_data(aggregate, spec, elf->layout()).data));
    const auto read = gmon::merge_duplicates(gmon::read_gmon_file(gmon_path, elf->layout()));
    const std::string ours = gmon::render_gprof_text(gmon::compute_profile(read, *elf));
    const std::string theirs = testing::gprof_brief(data / "shield.elf", gmon_path);
    CHECK(theirs.find("xEventGroupSetBits [") != std::string::npos);
    CHECK(ours == theirs);
}

// gprof's symbol table of the real ELFs, as `gprof -z` lists it (every symbol, used or not):
// the same names as rackprof's, neither more nor fewer.
TEST_CASE("the thesis' ELFs: rackprof's gprof symbol table is the one gprof -z lists") {
    const auto data = testing::shared_data("thesis ELFs symbol table");
    if (data.empty()) return;
    for (const char* pair : {"blinky.elf:blink1gmon.out", "shield.elf:shield1gmon.out"}) {
        const std::string s = pair;
        const auto elf_path = data / s.substr(0, s.find(':'));
        const auto gmon_path = data / s.substr(s.find(':') + 1);
        CAPTURE(s);
        const auto r = testing::run(
            {"arm-none-eabi-gprof", "-b", "-z", "-p", elf_path.string(), gmon_path.string()});
        REQUIRE(r.exit_code == 0);
        std::multiset<std::string> theirs;
        std::istringstream lines(r.out);
        std::string line;
        for (int i = 0; i < 5 && std::getline(lines, line);) ++i;  // the heading
        while (std::getline(lines, line)) {
            const auto last = line.find_last_of(' ');
            if (!line.empty()) theirs.insert(line.substr(last + 1));
        }
        std::multiset<std::string> ours;
        const auto elf = gmon::Symbolizer::load(elf_path);
        for (const gmon::ProfileSymbol& p : gmon::gprof_symbol_table(*elf)) ours.insert(p.name);
        CHECK(theirs.size() > 90);
        CHECK(ours == theirs);
    }
}

// Firmware that runs code from two distant regions: functions in flash and one copied to RAM
// (.ramfunc at 0x20000000, 512 MiB above). The capture's samples in both regions keep one
// histogram each, written as two histogram records, and gprof's report of that gmon.out (by
// function and by line) is rackprof's. (gprof gives the highest symbol no range, so RAM code
// must not end with a function that matters: here ram_last does.)
TEST_CASE("code in flash and in RAM: one histogram per region, and gprof's report of it") {
    testing::TempDir dir;
    const auto source = dir / "two_regions.c";
    std::ofstream(source) << R"(
__attribute__((section(".ramfunc"), noinline)) int ram_work(int x) {
    for (int i = 0; i < 8; ++i) x = x * 3 + i;
    return x;
}
__attribute__((section(".ramfunc"), noinline)) int ram_last(int x) { return x + 1; }
__attribute__((noinline)) int flash_work(int x) {
    for (int i = 0; i < 4; ++i) x += ram_work(x);
    return ram_last(x);
}
void _start(void) { for (;;) flash_work(1); }
)";
    const auto elf_path = dir / "two_regions.elf";
    const auto built =
        testing::run({"arm-none-eabi-gcc", "-mcpu=cortex-m3", "-mthumb", "-O1", "-g", "-nostdlib",
                      "-Wl,-Ttext=0x1000", "-Wl,--section-start=.ramfunc=0x20000000", "-o",
                      elf_path.string(), source.string()});
    REQUIRE_MESSAGE(built.exit_code == 0, built.err);
    const auto elf = gmon::Symbolizer::load(elf_path);
    const auto regions = elf->code_regions(gmon::kHistogramRegionGap);
    REQUIRE(regions.size() == 2);
    CHECK(regions[1].first == 0x20000000);

    auto address_in = [&](const char* name, std::uint64_t offset) {
        for (const gmon::ElfSymbol& s : elf->symbols())
            if (s.name == name) return s.addr + std::min<std::uint64_t>(offset, s.size - 2);
        FAIL("no symbol " << name);
        return std::uint64_t{0};
    };
    auto aggregate = std::make_shared<Aggregate>();
    for (std::uint64_t i = 0; i < 12; ++i) {
        aggregate->add_pc(address_in("ram_work", 2 * i), 100 + 7 * i);
        aggregate->add_pc(address_in("flash_work", 2 * i), 10 + i);
    }
    aggregate->add_arc(address_in("flash_work", 6) | 1, address_in("ram_work", 0) | 1, 4000);
    aggregate->add_arc(address_in("_start", 2) | 1, address_in("flash_work", 0) | 1, 1000);
    gmon::ProfileSource src;
    src.aggregate = aggregate;
    src.elf = elf;
    const auto binned = gmon::gmon_data_of(src);
    REQUIRE(binned.data.histograms.size() == 2);
    CHECK(binned.samples_outside == 0);
    CHECK(binned.data.histograms[0].total() + binned.data.histograms[1].total() ==
          aggregate->total_samples());
    // Two records of a few hundred bins each, not one of 256 Mi bins over the gap.
    CHECK(binned.data.histograms[0].bins.size() + binned.data.histograms[1].bins.size() < 1000);
    const auto gmon_path = dir / "two_regions.gmon";
    gmon::write_file_atomically(gmon_path, gmon::serialize_gmon(binned.data));
    for (const bool lines : {false, true}) {
        CAPTURE(lines);
        const auto read = gmon::merge_duplicates(gmon::read_gmon_file(gmon_path, elf->layout()));
        REQUIRE(read.histograms.size() == 2);
        const std::string ours =
            gmon::render_gprof_text(gmon::compute_profile(read, *elf, {0, lines}));
        CHECK(ours == testing::gprof_brief(elf_path, gmon_path, lines));
        // The hot function first; by line, gprof makes line symbols of .text only, so RAM code
        // is the function's one symbol among flash_work's lines.
        if (!lines) CHECK(ours.find("ram_work") < ours.find("flash_work"));
        CHECK(ours.find(lines ? "ram_work (two_regions.c:" : "ram_work") != std::string::npos);
    }
}

}  // namespace
}  // namespace rackprof
