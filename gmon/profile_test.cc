#include "gmon/profile.h"

#include <doctest/doctest.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>

#include "gmon/report.h"
#include "gmon/synthetic_elf.h"

namespace rackprof::gmon {
namespace {

struct TempElf {
    std::filesystem::path path;
    explicit TempElf(const std::vector<SyntheticFunction>& functions, std::uint32_t low,
                     std::uint32_t high) {
        path = std::filesystem::temp_directory_path() /
               ("rackprof-profile-test-" + std::to_string(::getpid()) + "-" +
                std::to_string(counter++) + ".elf");
        write_synthetic_elf(path, functions, low, high);
    }
    ~TempElf() { std::filesystem::remove(path); }
    static inline int counter = 0;
};

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

}  // namespace
}  // namespace rackprof::gmon
