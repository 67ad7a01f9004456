// Fleet profiles over HTTP from a real daemon: boards of one build merged into one profile
// whose counts are exactly the sum of what the simulated boards sent, and boards of another
// build refused rather than merged.
#include <signal.h>

#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "gmon/gmon_reader.h"
#include "tests/integration/test_support.h"
#include "tests/integration/truth_counts.h"

namespace rackprof {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

using testing::add_truth;
using testing::Counts;
using testing::counts_in;

TEST_CASE("fleet profile: one build's boards merged exactly; another build refused, not mixed") {
    testing::TempDir dir;
    // Three boards of one build, each running its own number of iterations, and a fourth of
    // another firmware; all tagged "fleet".
    Counts truth;
    const int iterations[] = {3, 5, 8};
    for (int i = 0; i < 3; ++i) {
        const auto n = std::to_string(i);
        REQUIRE(testing::rackprof({"simulate", "--model", "deterministic", "--iterations",
                                   std::to_string(iterations[i]), "-o",
                                   (dir / ("det" + n + ".bin")).string(), "--truth",
                                   (dir / ("det" + n + ".json")).string(), "--write-elf",
                                   (dir / "det.elf").string()})
                    .exit_code == 0);
        add_truth(truth, dir / ("det" + n + ".json"));
    }
    REQUIRE(testing::rackprof({"simulate", "--model", "blinky", "--iterations", "2", "-o",
                               (dir / "blinky.bin").string(), "--write-elf",
                               (dir / "blinky.elf").string()})
                .exit_code == 0);
    {
        std::ofstream config(dir / "rack.toml");
        config << "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\npath = \""
               << (dir / "rack.db").string() << "\"\n";
        for (int i = 0; i < 3; ++i) {
            config << "[[boards]]\nname = \"det-" << i << "\"\nlink = \"file://"
                   << (dir / ("det" + std::to_string(i) + ".bin")).string()
                   << "?pace=fast\"\nelf = \"" << (dir / "det.elf").string()
                   << "\"\ntags = [\"fleet\"]\n";
        }
        config << "[[boards]]\nname = \"blinky\"\nlink = \"file://" << (dir / "blinky.bin").string()
               << "?pace=fast\"\nelf = \"" << (dir / "blinky.elf").string()
               << "\"\ntags = [\"fleet\"]\n";
    }
    testing::Process daemon(
        testing::rackprof_argv({"serve", "--config", (dir / "rack.toml").string()}),
        dir / "serve.log");
    const std::string port = testing::wait_for_api_port(dir / "serve.log");
    const json sessions = testing::wait_for_completed_sessions(port, 4);
    std::string build_id;
    for (const auto& s : sessions) {
        REQUIRE(s["build_id"].is_string());
        if (s["board"] == "det-0") build_id = s["build_id"];
    }
    for (const auto& s : sessions) {
        CAPTURE(s["board"]);
        CHECK((s["build_id"] == build_id) == (s["board"] != "blinky"));
    }

    // The tag alone spans two builds: refused, naming them.
    const auto mixed = testing::http_get(port, "/api/v1/profile?tag=fleet");
    CHECK(mixed.status == 409);
    CHECK(mixed.body.find("2 different builds") != std::string::npos);
    // Asked for, the two builds merge with functions matched by name: every sample and call
    // is in it, and the selection says which builds it holds.
    const auto by_name = testing::http_get(port, "/api/v1/profile?tag=fleet&merge=by_name");
    REQUIRE(by_name.status == 200);
    const json named = json::parse(by_name.body);
    CHECK(named["selection"]["builds"].size() == 2);
    CHECK(named["selection"]["matched_by_name"] == true);
    CHECK(named["selection"]["samples_outside_functions"] == 0);
    std::uint64_t all_samples = 0;
    for (const auto& s : sessions) all_samples += s["counters"]["pc_samples"].get<std::uint64_t>();
    CHECK(named["total_samples"] == all_samples);
    CHECK(testing::http_get(port, "/api/v1/profile/export/gmon?tag=fleet&merge=by_name").status ==
          200);
    CHECK(testing::http_get(port, "/api/v1/profile?tag=fleet&merge=yes").status == 400);

    // One build: merged, and the selection says what was merged.
    const auto merged = testing::http_get(port, "/api/v1/profile?tag=fleet&build_id=" + build_id);
    REQUIRE(merged.status == 200);
    const json profile = json::parse(merged.body);
    CHECK(profile["selection"]["sessions"].size() == 3);
    CHECK(profile["selection"]["build_id"] == build_id);
    CHECK(profile["selection"]["boards"] == json({"det-0", "det-1", "det-2"}));

    // Its gmon.out holds exactly the sum of what the three boards sent, and gprof reads it as
    // rackprof profiles it.
    const auto file = dir / "fleet.gmon.out";
    REQUIRE(
        testing::http_get(port, "/api/v1/profile/export/gmon?tag=fleet&build_id=" + build_id, file)
            .status == 200);
    const Counts served = counts_in(file);
    CHECK(served.arcs == truth.arcs);
    CHECK(served.samples == truth.samples);
    const auto report = testing::rackprof(
        {"convert", file.string(), "--format", "gmon", "--elf", (dir / "det.elf").string()});
    REQUIRE(report.exit_code == 0);
    CHECK(report.out == testing::gprof_brief(dir / "det.elf", file));

    // The same sessions named by id, or by board, give the same profile.
    std::string ids;
    for (const auto& s : sessions) {
        if (s["board"] != "blinky")
            ids += (ids.empty() ? "" : ",") + std::to_string(s["id"].get<std::int64_t>());
    }
    CHECK(json::parse(testing::http_get(port, "/api/v1/profile?session=" + ids).body)["flat"] ==
          profile["flat"]);
    CHECK(json::parse(
              testing::http_get(port, "/api/v1/profile?board=det-0,det-1,det-2").body)["flat"] ==
          profile["flat"]);

    // Bad selections: clear 4xx, nothing partial.
    CHECK(testing::http_get(port, "/api/v1/profile").status == 400);
    CHECK(testing::http_get(port, "/api/v1/profile?bulid_id=" + build_id).status == 400);
    CHECK(testing::http_get(port, "/api/v1/profile?board=nowhere").status == 404);
    CHECK(testing::http_get(port, "/api/v1/profile?session=999").status == 404);
    CHECK(testing::http_get(port, "/api/v1/profile?build_id=00ff").status == 404);
    CHECK(testing::http_get(port, "/api/v1/profile/export/raw?tag=fleet&build_id=" + build_id)
              .status == 404);
    daemon.signal(SIGTERM);
    CHECK(daemon.wait(5s) == 0);

    // The CLI names sessions with the same syntax and merges through the same code.
    const auto db = (dir / "rack.db").string();
    const auto cli_file = dir / "cli.gmon.out";
    const auto cli = testing::rackprof({"convert", "--db", db, "--select",
                                        "board=det-0,det-1,det-2&build_id=" + build_id, "-o",
                                        cli_file.string(), "--report", "none"});
    CAPTURE(cli.err);
    REQUIRE(cli.exit_code == 0);
    CHECK(cli.err.find("merged 3 session(s) of 3 board(s)") != std::string::npos);
    const Counts from_cli = counts_in(cli_file);
    CHECK(from_cli.arcs == truth.arcs);
    CHECK(from_cli.samples == truth.samples);
    const auto mixed_cli = testing::rackprof(
        {"convert", "--db", db, "--select", "board=det-0,blinky", "-o", "/dev/null"});
    CHECK(mixed_cli.exit_code == 1);
    CHECK(mixed_cli.err.find("2 different builds") != std::string::npos);
    const auto tag_cli =
        testing::rackprof({"convert", "--db", db, "--select", "tag=fleet", "-o", "/dev/null"});
    CHECK(tag_cli.exit_code == 2);
    CHECK(tag_cli.err.find("needs --config") != std::string::npos);
    std::ofstream(dir / "tags.toml") << testing::read_text(dir / "rack.toml");
    const auto tagged =
        testing::rackprof({"convert", "--db", db, "--select", "tag=fleet&build_id=" + build_id,
                           "--config", (dir / "tags.toml").string(), "-o", "/dev/null"});
    CHECK(tagged.exit_code == 0);
    CHECK(testing::rackprof({"convert", "--db", db, "--select", "bogus"}).exit_code == 2);
}

}  // namespace
}  // namespace rackprof
