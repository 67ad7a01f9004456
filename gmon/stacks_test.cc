#include "gmon/stacks.h"

#include <doctest/doctest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <random>
#include <set>

#include "gmon/folded_export.h"
#include "gmon/synthetic_elf.h"
#include "gmon/temp_elf_test.h"

namespace rackprof::gmon {
namespace {

// Functions of 0x20 bytes from 0x100 on, in the order named.
struct Program {
    std::vector<SyntheticFunction> functions;
    std::uint32_t low = 0x100;
    explicit Program(const std::vector<std::string>& names, std::uint32_t gap_before = 0) {
        low = 0x100 - gap_before;
        for (std::size_t i = 0; i < names.size(); ++i)
            functions.push_back({names[i], 0x100 + 0x20 * static_cast<std::uint32_t>(i), 0x20});
    }
    std::uint32_t high() const {
        return 0x100 + 0x20 * static_cast<std::uint32_t>(functions.size());
    }
    std::uint32_t at(const std::string& name) const {
        for (const auto& f : functions) {
            if (f.name == name) return f.addr;
        }
        FAIL("no function " << name);
        return 0;
    }
    // caller -> callee, from a call site `site` bytes into the caller.
    void call(Aggregate& a, const std::string& caller, const std::string& callee,
              std::uint64_t count, std::uint32_t site = 4) const {
        a.add_arc(at(caller) + site + 1, at(callee) + 4 + 1, count);
    }
    void work(Aggregate& a, const std::string& f, std::uint64_t samples) const {
        a.add_pc(at(f) + 8, samples);
    }
    Profile profile(const Aggregate& a) const {
        TempElf elf(functions, low, high());
        const auto sym = Symbolizer::load(elf.path);
        return compute_profile(to_gmon_data(a, {low, high(), 2, 100}, sym->layout()).data, *sym);
    }
};

std::map<std::string, std::uint64_t> by_names(const Profile& p, const EstimatedStacks& stacks) {
    std::map<std::string, std::uint64_t> out;
    for (const auto& s : stacks.stacks) {
        std::string key;
        for (const std::size_t f : s.frames)
            key += (key.empty() ? "" : ";") + std::string(frame_name(p, f));
        out[key] += s.samples;
    }
    return out;
}

std::uint64_t sum_of(const EstimatedStacks& stacks) {
    std::uint64_t sum = 0;
    for (const auto& s : stacks.stacks) sum += s.samples;
    return sum;
}

TEST_CASE("stacks split a callee's time among its callers by calls, as gprof does") {
    const Program prog({"main", "fast", "slow", "work"});
    Aggregate a;
    prog.call(a, "main", "fast", 10);
    prog.call(a, "main", "slow", 10, 8);
    prog.call(a, "fast", "work", 10);
    prog.call(a, "slow", "work", 30);
    prog.work(a, "work", 400);
    prog.work(a, "main", 100);
    const Profile p = prog.profile(a);
    const auto stacks = estimate_stacks(p);
    CHECK(by_names(p, stacks) == std::map<std::string, std::uint64_t>{{"main", 100},
                                                                      {"main;fast;work", 100},
                                                                      {"main;slow;work", 300}});
    CHECK(stacks.total_samples == 500);
    CHECK(stacks.cut_samples == 0);
    CHECK(folded_stacks(p, stacks) == "main 100\nmain;fast;work 100\nmain;slow;work 300\n");
}

TEST_CASE("a cycle is entered once, never looped, its time spread as gprof's cycle entry says") {
    const Program prog({"main", "ping", "pong", "leaf"});
    Aggregate a;
    prog.call(a, "main", "ping", 2);
    prog.call(a, "ping", "pong", 5);
    prog.call(a, "pong", "ping", 4);
    prog.call(a, "ping", "ping", 3, 12);  // self-recursion: set aside, as gprof does
    prog.call(a, "pong", "leaf", 6, 12);
    prog.work(a, "ping", 10);
    prog.work(a, "pong", 30);
    prog.work(a, "leaf", 60);
    const Profile p = prog.profile(a);
    REQUIRE(p.cycles.size() == 1);
    const auto stacks = estimate_stacks(p);
    CHECK(by_names(p, stacks) == std::map<std::string, std::uint64_t>{{"main;ping", 10},
                                                                      {"main;ping;pong", 30},
                                                                      {"main;ping;pong;leaf", 60}});
}

TEST_CASE("a cycle no one calls is a root entered at its least-called member") {
    const Program prog({"ping", "pong"});
    Aggregate a;
    prog.call(a, "ping", "pong", 5);
    prog.call(a, "pong", "ping", 4);
    prog.work(a, "ping", 7);
    prog.work(a, "pong", 3);
    const Profile p = prog.profile(a);
    const auto stacks = estimate_stacks(p);
    CHECK(by_names(p, stacks) ==
          std::map<std::string, std::uint64_t>{{"ping", 7}, {"ping;pong", 3}});
}

// gprof credits an excluded function's samples to no one (like samples outside every
// function): they are [unknown].
TEST_CASE("samples gprof's call graph leaves out or no function holds are stacks of their own") {
    const Program prog({"main", "mcount", "work"}, 0x20);  // 0x20 bytes of code before main
    Aggregate a;
    prog.call(a, "main", "work", 3);
    prog.call(a, "mcount", "work", 1, 8);  // an excluded caller: its share is left out
    prog.work(a, "main", 5);
    prog.work(a, "mcount", 11);
    prog.work(a, "work", 40);
    a.add_pc(prog.low + 2, 9);  // before any function
    const Profile p = prog.profile(a);
    const auto stacks = estimate_stacks(p);
    CHECK(by_names(p, stacks) ==
          std::map<std::string, std::uint64_t>{
              {"[unknown]", 20}, {"main", 5}, {"main;work", 30}, {"work", 10}});
    CHECK(sum_of(stacks) == p.total_samples);
}

TEST_CASE("the bounds keep a cut path's samples in the frame where it was cut") {
    const Program prog({"a", "b", "c", "d", "e"});
    Aggregate a;
    for (const auto& [from, to] : {std::pair{"a", "b"}, {"b", "c"}, {"c", "d"}, {"d", "e"}})
        prog.call(a, from, to, 1);
    prog.work(a, "a", 1);
    prog.work(a, "e", 99);
    const Profile p = prog.profile(a);
    StackOptions shallow;
    shallow.max_depth = 3;
    auto stacks = estimate_stacks(p, shallow);
    CHECK(by_names(p, stacks) == std::map<std::string, std::uint64_t>{{"a", 1}, {"a;b;c", 99}});
    CHECK(stacks.cut_samples == doctest::Approx(99));
    StackOptions coarse;
    coarse.min_fraction = 0.995;  // nothing below a frame holds 99.5 %
    stacks = estimate_stacks(p, coarse);
    CHECK(by_names(p, stacks) == std::map<std::string, std::uint64_t>{{"a", 100}});
}

// The invariant on random call graphs (cycles, self-calls, samples outside every function,
// excluded functions): the stacks hold every sample exactly once, as integers; no function
// repeats on a stack; each function's self samples are gprof's flat-profile self time.
TEST_CASE("random profiles: the stacks' samples sum to the total exactly") {
    std::mt19937_64 rng(7);
    for (int round = 0; round < 300; ++round) {
        CAPTURE(round);
        const std::size_t n = 2 + rng() % 12;
        std::vector<std::string> names;
        for (std::size_t i = 0; i < n; ++i) names.push_back("f" + std::to_string(i));
        if (rng() % 4 == 0) names[rng() % n] = "mcount";
        const Program prog(names, rng() % 2 ? 0x20 : 0);
        Aggregate a;
        const std::size_t arcs = rng() % (3 * n);
        for (std::size_t i = 0; i < arcs; ++i) {
            prog.call(a, names[rng() % n], names[rng() % n], 1 + rng() % 50,
                      2 * static_cast<std::uint32_t>(1 + rng() % 12));
        }
        for (std::size_t i = 0; i < n; ++i) {
            if (rng() % 3) a.add_pc(prog.at(names[i]) + 2 * (rng() % 16), rng() % 1000);
        }
        if (prog.low < 0x100) a.add_pc(prog.low + 2, rng() % 20);
        const Profile p = prog.profile(a);
        StackOptions options;
        options.min_fraction = rng() % 2 ? 0.0 : 0.01;
        options.max_depth = rng() % 2 ? 256 : 1 + rng() % 4;
        const auto stacks = estimate_stacks(p, options);
        CHECK(stacks.total_samples == p.total_samples);
        CHECK(sum_of(stacks) == p.total_samples);
        std::map<std::size_t, double> self;
        for (const auto& s : stacks.stacks) {
            REQUIRE_FALSE(s.frames.empty());
            CHECK(s.samples > 0);
            CHECK(s.frames.size() <= options.max_depth);
            CHECK(std::set<std::size_t>(s.frames.begin(), s.frames.end()).size() ==
                  s.frames.size());
            self[s.frames.back()] += static_cast<double>(s.samples);
        }
        if (stacks.cut_samples == 0) {
            // Rounding moves each stack by less than one sample.
            std::map<std::size_t, double> stack_count;
            for (const auto& s : stacks.stacks) stack_count[s.frames.back()] += 1;
            for (std::size_t s = 0; s < p.symbols.size(); ++s) {
                CAPTURE(p.symbols[s].name);
                CHECK(std::abs(self[s] - p.nodes[s].self_time) <= stack_count[s] + 1e-6);
            }
        }
    }
}

}  // namespace
}  // namespace rackprof::gmon

namespace rackprof::gmon {
namespace {

// Layers of functions, each calling every function of the next layer: paths multiply
// (3^29 of them), the bounds keep the walk small.
TEST_CASE("a graph of exponentially many paths is walked within bounds") {
    std::vector<std::string> names;
    for (int layer = 0; layer < 30; ++layer) {
        for (int k = 0; k < 3; ++k)
            names.push_back("l" + std::to_string(layer) + "_" + std::to_string(k));
    }
    const Program prog(names);
    Aggregate a;
    for (int layer = 0; layer + 1 < 30; ++layer) {
        for (int k = 0; k < 3; ++k) {
            for (int j = 0; j < 3; ++j) {
                prog.call(a, names[layer * 3 + k], names[(layer + 1) * 3 + j], 1 + k + j,
                          4 + 2 * static_cast<std::uint32_t>(j));
            }
        }
    }
    for (const auto& n : names) prog.work(a, n, 1000);
    const Profile p = prog.profile(a);
    const auto started = std::chrono::steady_clock::now();
    const auto stacks = estimate_stacks(p);
    const auto took = std::chrono::steady_clock::now() - started;
    MESSAGE(
        stacks.stacks.size() << " stacks in "
                             << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                             << " ms");
    CHECK(sum_of(stacks) == p.total_samples);
    CHECK(stacks.min_fraction == 1e-5);
    // A smaller budget: walked again with coarser cuts, every sample still in place.
    StackOptions tight;
    tight.max_frames = 5000;
    const auto coarse = estimate_stacks(p, tight);
    CHECK(coarse.min_fraction >= 1e-4);
    CHECK(coarse.stacks.size() < 5000);
    CHECK(sum_of(coarse) == p.total_samples);
}

}  // namespace
}  // namespace rackprof::gmon
