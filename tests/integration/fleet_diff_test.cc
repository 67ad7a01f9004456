// Fleets whose answer is known: simulated boards of one firmware, one of them slower in one
// function. The merged counts are the sum of the truths, the per-board spread flags that board
// and no other, and diffs (API, curl --fail, CLI) report that function and no other.
#include <signal.h>

#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "gmon/gmon_reader.h"
#include "tests/integration/test_support.h"

namespace rackprof {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kSlowed = "WAIT1_WaitLongCycles";

const json& function_named(const json& list, const std::string& name) {
    for (const auto& f : list)
        if (f["name"] == name) return f;
    FAIL("no function " << name);
    throw 0;
}

TEST_CASE(
    "fleet truth: the slower board is the one flagged; a diff names the slower function only") {
    testing::TempDir dir;
    // Four boards of one firmware (blinky), board s2 with kSlowed doing three times its work.
    std::uint64_t truth_samples = 0, truth_calls = 0;
    for (int i = 0; i < 4; ++i) {
        const auto n = std::to_string(i);
        std::vector<std::string> args = {"simulate",
                                         "--model",
                                         "blinky",
                                         "--iterations",
                                         "30",
                                         "--seed",
                                         std::to_string(1 + i),
                                         "-o",
                                         (dir / ("s" + n + ".bin")).string(),
                                         "--truth",
                                         (dir / ("s" + n + ".json")).string(),
                                         "--write-elf",
                                         (dir / "blinky.elf").string()};
        if (i == 2) {
            args.push_back("--slower");
            args.push_back(std::string(kSlowed) + "=3");
        }
        REQUIRE(testing::rackprof(args).exit_code == 0);
        const json truth = json::parse(testing::read_text(dir / ("s" + n + ".json")));
        for (const auto& pc : truth["pc_samples"])
            truth_samples += pc["count"].get<std::uint64_t>();
        for (const auto& arc : truth["arcs"]) truth_calls += arc["count"].get<std::uint64_t>();
    }
    {
        std::ofstream config(dir / "rack.toml");
        config << "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\npath = \""
               << (dir / "rack.db").string() << "\"\n";
        for (int i = 0; i < 4; ++i) {
            config << "[[boards]]\nname = \"s" << i << "\"\nlink = \"file://"
                   << (dir / ("s" + std::to_string(i) + ".bin")).string()
                   << "?pace=fast\"\nelf = \"" << (dir / "blinky.elf").string() << "\"\n";
        }
    }
    testing::Process daemon(
        testing::rackprof_argv({"serve", "--config", (dir / "rack.toml").string()}),
        dir / "serve.log");
    const std::string port = testing::wait_for_api_port(dir / "serve.log");
    REQUIRE(testing::eventually(
        [&] {
            const auto reply = testing::http_get(port, "/api/v1/sessions?state=completed");
            return reply.status == 200 && json::parse(reply.body).size() == 4;
        },
        20s));

    // The merged profile: exactly the truths' sums, and the spread flags s2 only.
    const auto merged = testing::http_get(port, "/api/v1/profile?board=s0,s1,s2,s3");
    REQUIRE(merged.status == 200);
    const json profile = json::parse(merged.body);
    CHECK(profile["total_samples"] == truth_samples);
    const json& spread = profile["spread"];
    REQUIRE(spread["boards"].size() == 4);
    std::uint64_t spread_samples = 0, spread_calls = 0;
    for (const auto& b : spread["boards"]) {
        spread_samples += b["samples"].get<std::uint64_t>();
        spread_calls += b["calls"].get<std::uint64_t>();
    }
    CHECK(spread_samples == truth_samples);
    CHECK(spread_calls == truth_calls);
    const json& slowed = function_named(spread["functions"], kSlowed);
    for (const auto& b : slowed["boards"]) {
        CAPTURE(b["board"]);
        CHECK(b["outside"] == (b["board"] == "s2"));
    }
    CHECK(slowed["max_percent"].get<double>() > 2 * slowed["min_percent"].get<double>());
    const auto fleet = slowed["fleet_interval"];
    CHECK(fleet[0].get<double>() < slowed["fleet_percent"].get<double>());
    CHECK(fleet[1].get<double>() > slowed["fleet_percent"].get<double>());
    for (const auto& f : spread["functions"]) {
        for (const auto& b : f["boards"]) {
            CAPTURE(f["name"]);
            CAPTURE(b["board"]);
            if (b["board"] != "s2") CHECK(b["outside"] == false);
        }
    }

    // Diff over HTTP: s0 against the slower s2 names kSlowed alone; the gate trips on it.
    const std::string gate = "&fail_on=self%3E%2B5%25";
    const auto slower = testing::http_get(port, "/api/v1/diff?a=board%3Ds0&b=board%3Ds2" + gate);
    CHECK(slower.status == 422);
    const json d = json::parse(slower.body);
    CHECK(d["error"]["code"] == "regression");
    CHECK(d["gates"][0]["functions"] == json({kSlowed}));
    for (const auto& f : d["functions"]) {
        CAPTURE(f["name"]);
        CHECK(f["significant"] == (f["name"] == kSlowed));
    }
    CHECK(function_named(d["functions"], kSlowed)["self_change"].get<double>() ==
          doctest::Approx(2.0).epsilon(0.02));
    CHECK(function_named(d["functions"], kSlowed)["change"] == "slower");
    // Two boards of the same build do not trip it; b over a reversed says faster.
    CHECK(testing::http_get(port, "/api/v1/diff?a=board%3Ds0&b=board%3Ds1" + gate).status == 200);
    const json faster =
        json::parse(testing::http_get(port, "/api/v1/diff?a=board%3Ds2&b=board%3Ds0").body);
    CHECK(function_named(faster["functions"], kSlowed)["change"] == "faster");
    const auto text =
        testing::http_get(port, "/api/v1/diff?a=board%3Ds0&b=board%3Ds2&format=text" + gate);
    CHECK(text.body.find(std::string("gate self>+5%: TRIPPED by ") + kSlowed) != std::string::npos);
    // As a CI job runs it: curl --fail fails on a tripped gate, passes otherwise.
    const std::string url = "http://127.0.0.1:" + port + "/api/v1/diff?a=board%3Ds0&b=board%3D";
    CHECK(testing::run({"curl", "-fsS", "-o", "/dev/null", url + "s2" + gate}).exit_code == 22);
    CHECK(testing::run({"curl", "-fsS", "-o", "/dev/null", url + "s1" + gate}).exit_code == 0);
    // Bad requests: clear 4xx.
    CHECK(testing::http_get(port, "/api/v1/diff?a=board%3Ds0").status == 400);
    CHECK(testing::http_get(port, "/api/v1/diff?a=board%3Ds0&b=board%3Dnowhere").status == 404);
    CHECK(testing::http_get(port, "/api/v1/diff?a=board%3Ds0&b=board%3Ds1&fail_on=fast").status ==
          400);
    CHECK(testing::http_get(port, "/api/v1/diff?a=board%3Ds0&b=board%3Ds1&alpha=2").status == 400);
    daemon.signal(SIGTERM);
    CHECK(daemon.wait(5s) == 0);

    // The CLI: the same answers from the database, and from the capture files.
    const auto db = (dir / "rack.db").string();
    const auto cli = testing::rackprof({"diff", "--db", db, "board=s0", "board=s2", "--fail-on",
                                        "self>+5%", "--fail-on", "calls>+0%"});
    CAPTURE(cli.err);
    CHECK(cli.exit_code == 1);
    CHECK(cli.err.find(std::string("gate self>+5% tripped by ") + kSlowed + "\n") !=
          std::string::npos);
    CHECK(cli.out.find("gate calls>+0%: passed") != std::string::npos);
    CHECK(testing::rackprof({"diff", "--db", db, "board=s0", "board=s1", "--fail-on", "self>+5%"})
              .exit_code == 0);
    const auto files =
        testing::rackprof({"diff", (dir / "s0.bin").string(), (dir / "s2.bin").string(), "--elf",
                           (dir / "blinky.elf").string(), "--json", "--fail-on", "self>+5%"});
    CHECK(files.exit_code == 1);
    const json from_files = json::parse(files.out);
    CHECK(from_files["gates"][0]["functions"] == json({kSlowed}));
    CHECK(from_files["functions"][0]["name"] == kSlowed);
    // Two runs of one build that ran for different lengths: no call gate trips (every
    // function's calls were counts compared as they were, so all of them rose).
    for (const char* iterations : {"20", "50"}) {
        REQUIRE(testing::rackprof({"simulate", "--model", "deterministic", "--iterations",
                                   iterations, "-o",
                                   (dir / ("det" + std::string(iterations) + ".bin")).string(),
                                   "--write-elf", (dir / "det.elf").string()})
                    .exit_code == 0);
    }
    const auto longer = testing::rackprof({"diff", (dir / "det20.bin").string(),
                                           (dir / "det50.bin").string(), "--elf",
                                           (dir / "det.elf").string(), "--fail-on", "calls>+0%",
                                           "--fail-on", "calls<-0%"});
    CAPTURE(longer.out);
    CAPTURE(longer.err);
    CHECK(longer.exit_code == 0);
    CHECK(longer.out.find("gate calls>+0%: passed") != std::string::npos);
    // Usage errors and inputs that cannot be read exit 2: only a regression is 1.
    CHECK(testing::rackprof({"diff", (dir / "s0.bin").string()}).exit_code == 2);
    CHECK(testing::rackprof({"diff", (dir / "s0.bin").string(), (dir / "s1.bin").string(), "--elf",
                             (dir / "blinky.elf").string(), "--fail-on", "speed>1%"})
              .exit_code == 2);
    CHECK(testing::rackprof({"diff", (dir / "s0.bin").string(), (dir / "s1.bin").string()})
              .exit_code == 2);  // no ELF: functions cannot be named
    CHECK(testing::rackprof({"diff", (dir / "s0.bin").string(), (dir / "nothing.bin").string(),
                             "--elf", (dir / "blinky.elf").string()})
              .exit_code == 2);
    const auto nowhere = testing::rackprof({"diff", "--db", db, "board=s0", "board=nowhere"});
    CHECK(nowhere.exit_code == 2);
    CHECK(nowhere.err.find("names no session") != std::string::npos);
}

}  // namespace
}  // namespace rackprof
