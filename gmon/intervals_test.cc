// Error bars: each flat row's share with its 95 % Wilson score interval (JSON, the text
// report's optional table, the diff's sides) and the synchronisation alarm's comparison.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>

#include "gmon/profile_diff.h"
#include "gmon/report.h"
#include "gmon/sampling_stats.h"
#include "gmon/sync_check.h"
#include "gmon/synthetic_elf.h"

namespace rackprof::gmon {
namespace {

struct ModelElf {
    std::filesystem::path path = std::filesystem::temp_directory_path() /
                                 ("rackprof-intervals-test-" + std::to_string(::getpid()) + ".elf");
    ModelElf() {
        write_synthetic_elf(path,
                            {{"main", 0x100, 0x20},
                             {"compute", 0x120, 0x20},
                             {"idle_wait", 0x140, 0x20},
                             {"end", 0x160, 0x20}},
                            0x100, 0x180);
    }
    ~ModelElf() { std::filesystem::remove(path); }
};

// main calls compute and idle_wait once each; `samples` of main, compute, idle_wait.
Profile profile_of_shares(const Symbolizer& elf, std::uint64_t main_samples,
                          std::uint64_t compute_samples, std::uint64_t wait_samples) {
    Aggregate a;
    a.add_arc(0x105, 0x125, 1);
    a.add_arc(0x109, 0x145, 1);
    if (main_samples) a.add_pc(0x102, main_samples);
    if (compute_samples) a.add_pc(0x124, compute_samples);
    if (wait_samples) a.add_pc(0x144, wait_samples);
    return compute_profile(to_gmon_data(a, {0x100, 0x180, 2, 1000}, elf.layout()).data, elf);
}

const nlohmann::json& row_named(const nlohmann::json& flat, const std::string& name) {
    for (const auto& row : flat)
        if (row["name"] == name) return row;
    FAIL("no flat row " << name);
    throw std::logic_error("unreachable");
}

}  // namespace

// By hand: p = k/n, z = 1.96, z^2 = 3.8416;
// centre = (p + z^2/2n) / (1 + z^2/n), half = z sqrt(p(1-p)/n + z^2/4n^2) / (1 + z^2/n).
TEST_CASE("Wilson bounds by hand: 400 of 500, 100 of 500, 0 of 500 and a credit of 12.5 of 100") {
    // 400/500: centre = 0.8038416/1.0076832 = 0.797712, half = 0.0350025.
    auto [low, high] = wilson_interval(400, 500);
    CHECK(low == doctest::Approx(0.762710).epsilon(1e-5));
    CHECK(high == doctest::Approx(0.832715).epsilon(1e-5));
    // 100/500: the mirror image of 400/500.
    std::tie(low, high) = wilson_interval(100, 500);
    CHECK(low == doctest::Approx(1 - 0.832715).epsilon(1e-5));
    CHECK(high == doctest::Approx(1 - 0.762710).epsilon(1e-5));
    // 0/500: [0, z^2/(n + z^2)] = [0, 3.8416/503.8416]; the normal approximation gives [0, 0].
    std::tie(low, high) = wilson_interval(0, 500);
    CHECK(low == 0.0);
    CHECK(high == doctest::Approx(3.8416 / 503.8416).epsilon(1e-9));
    // gprof's overlap credit need not be whole: 12.5 of 100.
    std::tie(low, high) = wilson_interval_of_credit(12.5, 100);
    CHECK(low == doctest::Approx(0.0737672).epsilon(1e-5));
    CHECK(high == doctest::Approx(0.2039789).epsilon(1e-5));
    CHECK(wilson_interval_of_credit(12.0, 100.0) == wilson_interval(12, 100));
}

TEST_CASE("the JSON report: every flat row has its share's and its seconds' interval") {
    ModelElf elf;
    const auto sym = Symbolizer::load(elf.path);
    const Profile p = profile_of_shares(*sym, 0, 400, 100);
    const nlohmann::json json = profile_json(p);
    REQUIRE(json["flat"].size() >= 2);
    for (const auto& row : json["flat"]) {
        INFO(row.dump());
        REQUIRE(row.contains("self_percent_interval"));
        REQUIRE(row.contains("self_seconds_interval"));
        const auto interval = row["self_percent_interval"].get<std::pair<double, double>>();
        CHECK(interval.first <= row["percent"].get<double>());
        CHECK(interval.second >= row["percent"].get<double>());
        CHECK(interval.first >= 0.0);
        CHECK(interval.second <= 100.0);
    }
    const auto& compute = row_named(json["flat"], "compute");
    CHECK(compute["self_percent_interval"][0].get<double>() ==
          doctest::Approx(76.2710).epsilon(1e-5));
    CHECK(compute["self_percent_interval"][1].get<double>() ==
          doctest::Approx(83.2715).epsilon(1e-5));
    // Seconds: the same fractions of the 0.5 s the 500 samples at 1000 Hz stand for.
    CHECK(compute["self_seconds_interval"][0].get<double>() ==
          doctest::Approx(0.381355).epsilon(1e-5));
    CHECK(compute["self_seconds_interval"][1].get<double>() ==
          doctest::Approx(0.416358).epsilon(1e-5));
    // A function with calls and no samples: a share of 0 whose interval still has room above.
    const nlohmann::json idle = profile_json(profile_of_shares(*sym, 0, 500, 0));
    const auto& wait_row = row_named(idle["flat"], "idle_wait");
    CHECK(wait_row["percent"].get<double>() == 0.0);
    CHECK(wait_row["self_percent_interval"][0].get<double>() == 0.0);
    CHECK(wait_row["self_percent_interval"][1].get<double>() ==
          doctest::Approx(100 * 3.8416 / 503.8416).epsilon(1e-9));
}

TEST_CASE("the text report: gprof's layout unless intervals are asked for, then a table after it") {
    ModelElf elf;
    const auto sym = Symbolizer::load(elf.path);
    const Profile p = profile_of_shares(*sym, 0, 400, 100);
    const std::string plain = render_gprof_text(p);
    CHECK(plain == render_gprof_text(p, TextReportOptions{}));
    CHECK(plain.find("Wilson") == std::string::npos);
    const std::string with = render_gprof_text(p, TextReportOptions{true});
    // The flat profile as gprof prints it, then the intervals, then the call graph unchanged.
    const auto graph = plain.find("\f\n");
    REQUIRE(graph != std::string::npos);
    CHECK(with.starts_with(plain.substr(0, graph)));
    CHECK(with.ends_with(plain.substr(graph)));
    const std::string table = with.substr(graph, with.size() - plain.size());
    CHECK(table.find("95% Wilson score intervals of each share of the 500 samples") !=
          std::string::npos);
    CHECK(table.find(" 80.00  [ 76.27,  83.27]      0.40  [    0.38,     0.42]  compute\n") !=
          std::string::npos);
}

TEST_CASE("a diff's sides carry their shares' intervals") {
    ModelElf elf;
    const auto sym = Symbolizer::load(elf.path);
    const Profile a = profile_of_shares(*sym, 0, 400, 100);
    const Profile b = profile_of_shares(*sym, 0, 100, 400);
    const auto json = diff_json(diff_profiles(a, b), "a", "b");
    bool seen = false;
    for (const auto& f : json["functions"]) {
        REQUIRE(f["a"].contains("self_percent_interval"));
        REQUIRE(f["b"].contains("self_percent_interval"));
        if (f["name"] != "compute") continue;
        seen = true;
        CHECK(f["a"]["self_percent_interval"][0].get<double>() ==
              doctest::Approx(76.2710).epsilon(1e-5));
        CHECK(f["b"]["self_percent_interval"][1].get<double>() ==
              doctest::Approx(100 - 76.2710).epsilon(1e-5));
    }
    CHECK(seen);
}

TEST_CASE("the synchronisation alarm: a phase-locked histogram against its dithered run") {
    ModelElf elf;
    const auto sym = Symbolizer::load(elf.path);
    // Fixed period: every sample at one phase of the loop, inside compute. Dithered: the true
    // shares, 10 / 60 / 30 %.
    const Profile fixed = profile_of_shares(*sym, 0, 2000, 0);
    const Profile dithered = profile_of_shares(*sym, 200, 1200, 600);
    const SyncCheck alarm = check_sync(fixed, dithered);
    CHECK(alarm.synchronised());
    CHECK(alarm.compared == 3);
    CHECK(alarm.flagged() == 3);
    const auto json = sync_check_json(alarm);
    CHECK(json["synchronised"] == true);
    CHECK(json["warning"].get<std::string>().find("compute (100.0 % fixed, 60.0 % dithered)") !=
          std::string::npos);
    // The same shares from two runs of different lengths: within sampling error.
    const SyncCheck calm =
        check_sync(profile_of_shares(*sym, 100, 600, 300), profile_of_shares(*sym, 210, 1190, 600));
    CHECK_FALSE(calm.synchronised());
    CHECK(sync_check_json(calm)["warning"].is_null());
    CHECK_THROWS_AS(check_sync(fixed, profile_of_shares(*sym, 0, 0, 0)), std::invalid_argument);
}

}  // namespace rackprof::gmon
