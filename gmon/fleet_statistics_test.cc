// The fleet's statistics: diffs (profile_diff.h) and per-board spread (board_spread.h).
#include "gmon/board_spread.h"
#include "gmon/function_index.h"
#include "gmon/profile_diff.h"

#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <map>

#include "gmon/profile_pipeline.h"
#include "gmon/synthetic_elf.h"

namespace rackprof::gmon {
namespace {

struct FourFunctions {
    std::filesystem::path path;
    std::shared_ptr<const Symbolizer> elf;
    FourFunctions() {
        path = std::filesystem::temp_directory_path() /
               ("rackprof-diff-test-" + std::to_string(::getpid()) + ".elf");
        write_synthetic_elf(path,
                            {{"main", 0x100, 0x40},
                             {"alpha", 0x140, 0x40},
                             {"beta", 0x180, 0x40},
                             {"gamma", 0x1c0, 0x40}},
                            0x100, 0x200);
        elf = Symbolizer::load(path);
    }
    ~FourFunctions() { std::filesystem::remove(path); }

    // main calls each function `calls` times; each function's samples as given.
    std::shared_ptr<Aggregate> aggregate(
        std::uint64_t calls, const std::map<std::uint64_t, std::uint64_t>& samples) const {
        auto a = std::make_shared<Aggregate>();
        if (calls) {
            for (const std::uint64_t f : {0x140u, 0x180u, 0x1c0u}) a->add_arc(0x104, f, calls);
        }
        for (const auto& [pc, n] : samples) a->add_pc(pc, n);
        return a;
    }
    Profile profile(std::uint64_t calls,
                    const std::map<std::uint64_t, std::uint64_t>& samples) const {
        ProfileSource s;
        s.aggregate = aggregate(calls, samples);
        s.elf = elf;
        return profile_of(s);
    }
};

const FunctionDiff& row(const ProfileDiff& d, const std::string& name) {
    for (const auto& f : d.functions)
        if (f.name == name) return f;
    FAIL("no row for " << name);
    throw 0;
}

TEST_CASE("diff: a function doing three times the work is the one significant change") {
    FourFunctions fw;
    const Profile a = fw.profile(100, {{0x150, 1000}, {0x190, 1000}, {0x1d0, 1000}, {0x110, 50}});
    const Profile b = fw.profile(100, {{0x150, 1012}, {0x190, 991}, {0x1d0, 3000}, {0x110, 49}});
    DiffOptions options;
    options.gates = {parse_gate_rule("self>+5%"), parse_gate_rule("calls>+0%")};
    const ProfileDiff d = diff_profiles(a, b, options);
    CHECK(d.per_call);
    CHECK(d.compared == 4);
    REQUIRE(d.functions.size() == 4);
    CHECK(d.functions.front().name == "gamma");  // significant first
    const auto& gamma = row(d, "gamma");
    CHECK(gamma.direction == 1);
    REQUIRE(gamma.self_change.has_value());
    CHECK(*gamma.self_change == doctest::Approx(2.0));
    CHECK(*gamma.calls_change == doctest::Approx(0.0));
    for (const char* same : {"main", "alpha", "beta"}) {
        CAPTURE(same);
        CHECK(row(d, same).direction == 0);
    }
    REQUIRE(d.gates.size() == 2);
    CHECK(d.gates[0].functions == std::vector<std::string>{"gamma"});
    CHECK(d.gates[1].functions.empty());  // calls did not change
    CHECK(d.failed());
    const auto j = diff_json(d, "a", "b");
    CHECK(j["schema"] == "rackprof.diff/1");
    CHECK(j["functions"][0]["change"] == "slower");
    CHECK(j["gates"][0]["tripped"] == true);
    CHECK(j["failed"] == true);
    const std::string text = render_diff_text(d, "build 1", "build 2");
    CHECK(text.find("+200.0%") != std::string::npos);
    CHECK(text.find("gate self>+5%: TRIPPED by gamma") != std::string::npos);
}

TEST_CASE("diff: runs of different lengths compare per call; noise trips no gate") {
    FourFunctions fw;
    const Profile a = fw.profile(100, {{0x150, 1000}, {0x190, 2000}, {0x1d0, 500}});
    // Twice as long: twice the calls and about twice the samples.
    const Profile b = fw.profile(200, {{0x150, 2030}, {0x190, 3950}, {0x1d0, 1010}});
    DiffOptions options;
    options.gates = {parse_gate_rule("self>+5%"), parse_gate_rule("total>+5%")};
    const ProfileDiff d = diff_profiles(a, b, options);
    for (const auto& f : d.functions) {
        CAPTURE(f.name);
        CHECK(f.direction == 0);
    }
    CHECK_FALSE(d.failed());
    CHECK(*row(d, "alpha").calls_change == doctest::Approx(1.0));  // the counts' own change
    // Calls are compared as shares of all the calls: twice as long, twice the calls of every
    // function, trips no calls gate (a rise of +0% included).
    options.gates = {parse_gate_rule("calls>+0%"), parse_gate_rule("calls<-0%")};
    for (const auto& gate : diff_profiles(a, b, options).gates) CHECK(gate.functions.empty());
    // One function called three times as often trips it for that one, and the others' shares
    // fall.
    ProfileSource more;
    auto aggregate = std::make_shared<Aggregate>(*fw.aggregate(200, {{0x150, 2000}}));
    aggregate->add_arc(0x104, 0x140, 400);  // alpha: 600 calls against beta's and gamma's 200
    more.aggregate = aggregate;
    more.elf = fw.elf;
    options.gates = {parse_gate_rule("calls>+50%"), parse_gate_rule("calls<-20%")};
    const ProfileDiff shifted = diff_profiles(a, profile_of(more), options);
    CHECK(shifted.gates[0].functions == std::vector<std::string>{"alpha"});
    CHECK(shifted.gates[1].functions == std::vector<std::string>{"beta", "gamma"});
}

TEST_CASE("diff: without calls, shares are compared; a function only in b is new") {
    FourFunctions fw;
    const Profile a = fw.profile(0, {{0x150, 1000}, {0x190, 1000}});
    const Profile b = fw.profile(0, {{0x150, 1000}, {0x190, 1000}, {0x1d0, 500}});
    const ProfileDiff d = diff_profiles(a, b);
    CHECK_FALSE(d.per_call);
    const auto& gamma = row(d, "gamma");
    CHECK_FALSE(gamma.self_change.has_value());
    CHECK(gamma.direction == 1);
    CHECK(render_diff_text(d, "a", "b").find(" new ") != std::string::npos);
    // Without gates nothing fails.
    CHECK_FALSE(d.failed());
    CHECK_FALSE(diff_json(d, "a", "b").contains("failed"));
}

TEST_CASE("gate rules: metric, direction, a percentage; anything else is refused") {
    const auto r = parse_gate_rule("total<-20%");
    CHECK(r.metric == GateRule::Metric::kTotal);
    CHECK_FALSE(r.rise);
    CHECK(r.fraction == doctest::Approx(-0.2));
    CHECK(parse_gate_rule("self>+5%").fraction == doctest::Approx(0.05));
    CHECK(parse_gate_rule("calls>0%").fraction == 0.0);
    CHECK(parse_gate_rule("self>5.5%").fraction == doctest::Approx(0.055));
    CHECK(parse_gate_rule("calls>-99%").fraction == doctest::Approx(-0.99));
    // A URL's '+' arrives as a space: "self>+-5%" must not read as -5 %.
    for (const char* bad : {"self", "self>5", "speed>+5%", "self>+x%", "self>-100%", "self>+5%%",
                            "self> -5%", "self>+-5%", "self>--5%", "self>1e1%", "self>0x10%",
                            "self>inf%", "self>+%", "self>5 %", "self>.%"}) {
        CAPTURE(bad);
        CHECK_THROWS_AS(parse_gate_rule(bad), std::invalid_argument);
    }
}

TEST_CASE("spread: the board spending three times the fleet's share is the one outside") {
    FourFunctions fw;
    std::vector<BoardSamples> boards;
    for (int i = 0; i < 5; ++i) {
        // gamma: 120 of ~1000 samples on four boards (12 %), 310 on board b3 (31 %).
        const std::uint64_t gamma = i == 3 ? 310 : 118 + static_cast<std::uint64_t>(i);
        const auto a =
            fw.aggregate(10, {{0x150, 500}, {0x190, 1000 - 500 - gamma}, {0x1d0, gamma}});
        boards.push_back({"b" + std::to_string(i),
                          {i + 1},
                          a->total_calls(),
                          a->total_samples(),
                          samples_by_function(*a, *fw.elf)});
    }
    const Profile merged =
        fw.profile(50, {{0x150, 2500}, {0x190, 5000 - 2500 - 789}, {0x1d0, 789}});
    const auto spread = board_spread_json(merged, boards, {});
    REQUIRE(spread["boards"].size() == 5);
    CHECK(spread["boards"][3]["samples"] == 1000);
    CHECK(spread["boards"][3]["calls"] == 30);
    const nlohmann::json* gamma = nullptr;
    for (const auto& f : spread["functions"])
        if (f["name"] == "gamma") gamma = &f;
    REQUIRE(gamma != nullptr);
    CHECK((*gamma)["fleet_percent"].get<double>() == doctest::Approx(15.78));
    CHECK((*gamma)["max_percent"].get<double>() == doctest::Approx(31.0));
    CHECK((*gamma)["min_percent"].get<double>() == doctest::Approx(11.8));
    for (int i = 0; i < 5; ++i) {
        CAPTURE(i);
        CHECK((*gamma)["boards"][i]["outside"] == (i == 3));
        const auto interval = (*gamma)["boards"][i]["interval"];
        CHECK(interval[0].get<double>() < (*gamma)["boards"][i]["percent"].get<double>());
        CHECK(interval[1].get<double>() > (*gamma)["boards"][i]["percent"].get<double>());
    }
    // alpha: board 3's beta share (100 - 50 - 31 = 19 %, others ~38 %) deviates too; main none.
    for (const auto& f : spread["functions"]) {
        if (f["name"] == "alpha") {
            for (const auto& b : f["boards"]) CHECK(b["outside"] == false);
        }
    }
    // Trimmed as the flat profile: the top row only.
    JsonReportOptions top1;
    top1.top = 1;
    CHECK(board_spread_json(merged, boards, top1)["functions"].size() == 1);
}

}  // namespace
}  // namespace rackprof::gmon
