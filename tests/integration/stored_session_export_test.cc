// One stored session exported by the two roads that read it: `rackprof convert --db --session
// --export` and the daemon's /api/v1/sessions/{id}/export/{format}. Both make the export input
// in daemon/service/stored_session_input.h, so every format comes out byte for byte the same,
// the JSON report's "source" (the summary) included.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/integration/test_support.h"

namespace rackprof {
namespace {

using nlohmann::json;

TEST_CASE("a stored session's exports: rackprof convert --session equals the daemon's") {
    testing::TempDir dir;
    REQUIRE(testing::rackprof({"simulate", "--model", "blinky", "--iterations", "9", "--seed", "3",
                               "-o", (dir / "b.bin").string(), "--write-elf",
                               (dir / "blinky.elf").string()})
                .exit_code == 0);
    {
        std::ofstream config(dir / "rack.toml");
        config << "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\npath = \""
               << (dir / "rack.db").string() << "\"\n";
        config << "[[boards]]\nname = \"with-elf\"\nlink = \"file://" << (dir / "b.bin").string()
               << "?pace=fast\"\nelf = \"" << (dir / "blinky.elf").string() << "\"\n";
        // The same bytes without an ELF: addresses only, and the formats that name functions
        // refused by both.
        config << "[[boards]]\nname = \"bare\"\nlink = \"file://" << (dir / "b.bin").string()
               << "?pace=fast\"\n";
    }
    testing::Process daemon(
        testing::rackprof_argv({"serve", "--config", (dir / "rack.toml").string()}),
        dir / "serve.log");
    const std::string port = testing::wait_for_api_port(dir / "serve.log");
    const json sessions = testing::wait_for_completed_sessions(port, 2);
    for (const auto& s : sessions) {
        const std::string board = s["board"];
        const std::string id = std::to_string(s["id"].get<std::int64_t>());
        for (const std::string format : {"gmon", "text", "json", "csv", "raw", "ndjson", "pprof",
                                         "callgrind", "folded", "speedscope", "dot"}) {
            const std::string name = board + "-" + format;
            CAPTURE(name);
            const auto served = dir / (name + ".served");
            const auto converted = dir / (name + ".converted");
            const int status =
                testing::http_get(port, "/api/v1/sessions/" + id + "/export/" + format, served)
                    .status;
            const auto cli =
                testing::rackprof({"convert", "--db", (dir / "rack.db").string(), "--session", id,
                                   "--export", format, "-o", converted.string()});
            if (status != 200) {
                CHECK(status == 422);  // the bare session's function names
                CHECK(cli.exit_code != 0);
                continue;
            }
            REQUIRE_MESSAGE(cli.exit_code == 0, cli.err);
            CHECK(testing::read_text(served) == testing::read_text(converted));
        }
        const json report = json::parse(testing::read_text(dir / (board + "-json.served")));
        CHECK(report["source"]["session"]["id"] == s["id"]);
        CHECK(report["source"]["board"] == board);
        CHECK(report["source"]["decoder"]["arcs"] == s["counters"]["arcs"]);
    }
}

}  // namespace
}  // namespace rackprof
