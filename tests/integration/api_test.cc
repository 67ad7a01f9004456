// The HTTP API of a real `rackprof serve`, driven with curl as CI jobs do.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "gmon/synthetic_elf.h"
#include "gmon/tiva_test_support.h"
#include "storage/session_store.h"
#include "storage/sqlite.h"
#include "tests/integration/api_daemon.h"
#include "tests/integration/test_support.h"

namespace rackprof {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

using testing::ApiDaemon;

TEST_CASE(
    "serve: a second daemon on the same database exits 2 naming the first, changing nothing") {
    ApiDaemon d;
    const auto before = json::parse(d.call("GET", "/api/v1/sessions?state=capturing").second);
    REQUIRE(before.size() == 1);
    const auto firmware = d.dir() / "firmware";
    const bool had_firmware = std::filesystem::exists(firmware);
    // Bounded: without the lock a second daemon would start (port 0) and run on.
    testing::Process second(
        testing::rackprof_argv({"serve", "--config", (d.dir() / "rack.toml").string()}),
        d.dir() / "second.log");
    const int exit_code = second.wait(10s);
    if (exit_code < 0) second.signal(SIGKILL);
    CHECK(exit_code == 2);
    CHECK(testing::read_text(d.dir() / "second.log")
              .find("in use by another rackprof serve (pid " + std::to_string(d.pid()) + ")") !=
          std::string::npos);
    CHECK(std::filesystem::exists(firmware) == had_firmware);
    // The first daemon's session is still capturing (not marked interrupted) and still served.
    const auto after = json::parse(d.call("GET", "/api/v1/sessions?state=capturing").second);
    REQUIRE(after.size() == 1);
    CHECK(after[0]["id"] == before[0]["id"]);
    CHECK(json::parse(d.call("GET", "/api/v1/sessions?state=interrupted").second).empty());
    // Reading beside it does not disturb it either: `check --db` reads the file.
    const auto check = testing::rackprof({"check", "--db", (d.dir() / "rack.db").string()});
    CHECK(check.exit_code == 0);
    // Stopped, it lets go: the next daemon on the database starts.
    d.restart();
    CHECK(d.call("GET", "/healthz").first == 200);
}

TEST_CASE("API: health, version, boards, sessions, errors") {
    ApiDaemon d;
    CHECK(d.call("GET", "/healthz") == std::pair<int, std::string>{200, "{\"status\":\"ok\"}\n"});
    CHECK(d.call("GET", "/readyz").first == 200);
    const auto version = json::parse(d.call("GET", "/api/v1/version").second);
    CHECK(version["name"] == "rackprof");

    const auto boards = json::parse(d.call("GET", "/api/v1/boards").second);
    REQUIRE(boards.size() == 1);
    CHECK(boards[0]["name"] == "det");
    CHECK(boards[0]["state"] == "connected");
    const std::int64_t first = boards[0]["session"].get<std::int64_t>();

    const auto missing = d.call("GET", "/api/v1/boards/nope");
    CHECK(missing.first == 404);
    CHECK(json::parse(missing.second)["error"]["code"] == "not_found");
    CHECK(d.call("GET", "/api/v1/nothing/here").first == 404);
    CHECK(d.call("DELETE", "/api/v1/version").first == 405);
    CHECK(d.call("GET", "/api/v1/sessions/abc").first == 400);

    // Stop the running session, start another.
    const auto stopped = d.call("POST", "/api/v1/sessions/" + std::to_string(first) + "/stop");
    CHECK(stopped.first == 200);
    CHECK(json::parse(stopped.second)["state"] == "completed");
    CHECK(d.call("POST", "/api/v1/sessions/" + std::to_string(first) + "/stop").first == 409);
    const auto started = d.call("POST", "/api/v1/boards/det/sessions");
    REQUIRE(started.first == 201);
    const auto second = json::parse(started.second);
    CHECK(second["state"] == "capturing");
    CHECK(second["id"].get<std::int64_t>() > first);

    const auto listed =
        json::parse(d.call("GET", "/api/v1/sessions?board=det&state=completed").second);
    REQUIRE(listed.size() == 1);
    CHECK(listed[0]["id"] == first);
    CHECK(listed[0]["counters"]["arcs"].get<std::uint64_t>() > 0);
    CHECK_FALSE(listed[0]["elf"]["sha256"].get<std::string>().empty());

    // Deleting: not while capturing; afterwards it is gone.
    const auto second_id = std::to_string(second["id"].get<std::int64_t>());
    CHECK(d.call("DELETE", "/api/v1/sessions/" + second_id).first == 409);
    REQUIRE(d.call("POST", "/api/v1/sessions/" + second_id + "/stop").first == 200);
    CHECK(d.call("DELETE", "/api/v1/sessions/" + second_id).first == 204);
    CHECK(d.call("GET", "/api/v1/sessions/" + second_id).first == 404);

    // A time window over the stored records: all of it, or none of it.
    const auto whole =
        json::parse(d.call("GET", "/api/v1/sessions/" + std::to_string(first) + "/profile").second);
    const auto windowed = json::parse(d.call("GET", "/api/v1/sessions/" + std::to_string(first) +
                                                        "/profile?from=0&to=9223372036854775807")
                                          .second);
    CHECK(windowed["flat"] == whole["flat"]);
    const auto empty = json::parse(
        d.call("GET", "/api/v1/sessions/" + std::to_string(first) + "/profile?to=1").second);
    CHECK(empty["total_samples"] == 0);
    CHECK(d.call("GET", "/api/v1/sessions/" + std::to_string(first) + "/profile?from=yesterday")
              .first == 400);

    // The profile, with function names from the recorded ELF.
    const auto profile =
        d.call("GET", "/api/v1/sessions/" + std::to_string(first) + "/profile?top=3");
    REQUIRE(profile.first == 200);
    const auto p = json::parse(profile.second);
    CHECK(p["flat"].size() <= 3);
    CHECK(p["call_graph"].size() <= 3);  // top trims the call graph too
    bool named = false;
    for (const auto& row : whole["call_graph"]) named = named || row["name"] == "gamma";
    CHECK(named);

    // What the dashboard asks: every flat row, the busiest entries of the call graph, then the
    // entry of the function selected.
    const std::string base = "/api/v1/sessions/" + std::to_string(first) + "/profile";
    REQUIRE(whole["call_graph"].size() >= 3);
    const auto busiest = json::parse(d.call("GET", base + "?graph_top=2").second);
    CHECK(busiest["flat"] == whole["flat"]);
    CHECK(busiest["call_graph"] == json::array({whole["call_graph"][0], whole["call_graph"][1]}));
    json gamma;
    for (const auto& row : whole["call_graph"])
        if (row["name"] == "gamma") gamma = row;
    const auto selected = json::parse(d.call("GET", base + "?top=1&graph_function=gamma").second);
    CHECK(selected["flat"].size() == 1);
    CHECK(selected["call_graph"] == json::array({gamma}));
    CHECK(json::parse(d.call("GET", base + "?graph_top=0").second)["call_graph"].empty());
    CHECK(d.call("GET", base + "?graph_function=").first == 400);
}

TEST_CASE("API: the session a log line names is the API's session of that board") {
    // A restart: ids in the database go on from the first run's, so a per-process count would
    // name another run's session.
    ApiDaemon d;
    d.restart();
    std::smatch m;
    const std::string log = testing::read_text(d.dir() / "serve.log");
    REQUIRE(std::regex_search(log, m, std::regex("\\[det\\] session ([0-9]+) capturing")));
    const std::string logged = m[1].str();
    const auto session = d.call("GET", "/api/v1/sessions/" + logged);
    REQUIRE(session.first == 200);
    const auto s = json::parse(session.second);
    CHECK(s["board"] == "det");
    CHECK(s["state"] == "capturing");
    const auto board = json::parse(d.call("GET", "/api/v1/boards/det").second);
    CHECK(std::to_string(board["session"].get<std::int64_t>()) == logged);
    // convert --session with the logged id profiles that very run.
    d.call("POST", "/api/v1/sessions/" + logged + "/stop");
    const auto converted =
        testing::rackprof({"convert", "--db", (d.dir() / "rack.db").string(), "--session", logged,
                           "--report", "json", "-o", (d.dir() / "out.gmon").string()});
    REQUIRE_MESSAGE(converted.exit_code == 0, converted.err);
    CHECK(json::parse(converted.out)["source"]["session"]["id"].get<std::int64_t>() ==
          std::stoll(logged));
    CHECK(json::parse(converted.out)["source"]["session"]["state"] == "completed");
}

TEST_CASE("API: gmon.out with curl -fsSLOJ equals rackprof convert, and gprof reads it") {
    ApiDaemon d;
    const auto boards = json::parse(d.call("GET", "/api/v1/boards").second);
    const auto id = std::to_string(boards[0]["session"].get<std::int64_t>());
    std::this_thread::sleep_for(500ms);
    REQUIRE(d.call("POST", "/api/v1/sessions/" + id + "/stop").first == 200);

    const auto download = testing::run({"sh", "-c",
                                        "cd " + d.dir().path().string() + " && curl -fsSLOJ " +
                                            d.url("/api/v1/sessions/" + id + "/gmon.out")});
    INFO(download.err);
    REQUIRE(download.exit_code == 0);
    const auto file = d.dir() / ("det-" + id + ".gmon.out");
    REQUIRE(std::filesystem::exists(file));
    REQUIRE(testing::rackprof({"convert", "--db", (d.dir() / "rack.db").string(), "--session", id,
                               "-o", (d.dir() / "cli.gmon").string(), "--report", "none"})
                .exit_code == 0);
    CHECK(testing::read_text(file) == testing::read_text(d.dir() / "cli.gmon"));
    const std::string gprof = testing::gprof_brief(d.dir() / "model.elf", file);
    CHECK(gprof.find("gamma") != std::string::npos);
}

TEST_CASE("API: raw bytes, NDJSON records and CSV aggregates, streamed chunked") {
    ApiDaemon d;
    const auto boards = json::parse(d.call("GET", "/api/v1/boards").second);
    const auto id = boards[0]["session"].get<std::int64_t>();
    const auto sid = std::to_string(id);
    std::this_thread::sleep_for(700ms);
    REQUIRE(d.call("POST", "/api/v1/sessions/" + sid + "/stop").first == 200);
    const auto session = json::parse(d.call("GET", "/api/v1/sessions/" + sid).second);
    const auto arcs = session["counters"]["arcs"].get<std::uint64_t>();
    const auto pcs = session["counters"]["pc_samples"].get<std::uint64_t>();
    REQUIRE(arcs > 0);

    const auto raw =
        d.call("GET", "/api/v1/sessions/" + sid + "/raw", {"-D", (d.dir() / "headers").string()});
    CHECK(raw.first == 200);
    CHECK(raw.second.size() == session["counters"]["bytes_in"].get<std::uint64_t>());
    const std::string headers = testing::read_text(d.dir() / "headers");
    CHECK(headers.find("Transfer-Encoding: chunked") != std::string::npos);
    CHECK(headers.find("filename=\"det-" + sid + ".raw\"") != std::string::npos);
    // The raw bytes decode to exactly the stored records.
    std::ofstream(d.dir() / "raw.bin", std::ios::binary) << raw.second;
    const auto redecoded =
        testing::rackprof({"convert", (d.dir() / "raw.bin").string(), "--format", "bin", "--report",
                           "json", "-o", (d.dir() / "x.gmon").string()});
    REQUIRE(redecoded.exit_code == 0);
    CHECK(json::parse(redecoded.out)["source"]["decoder"]["arcs"] == arcs);

    const auto ndjson = d.call("GET", "/api/v1/sessions/" + sid + "/records.ndjson");
    CHECK(ndjson.first == 200);
    std::uint64_t lines = 0, arc_lines = 0;
    std::istringstream in(ndjson.second);
    for (std::string line; std::getline(in, line);) {
        const auto record = json::parse(line);
        ++lines;
        arc_lines += record["kind"] == "arc";
        CHECK(record["t"].get<std::int64_t>() > 0);
    }
    CHECK(lines == arcs + pcs);
    CHECK(arc_lines == arcs);

    const auto csv = d.call("GET", "/api/v1/sessions/" + sid + "/records.csv");
    CHECK(csv.first == 200);
    CHECK(csv.second.rfind("kind,from,self,pc,count\n", 0) == 0);
    std::uint64_t csv_arcs = 0;
    std::istringstream rows(csv.second);
    std::string row;
    std::getline(rows, row);
    while (std::getline(rows, row)) {
        if (row.rfind("arc,", 0) == 0) csv_arcs += std::stoull(row.substr(row.rfind(',') + 1));
    }
    CHECK(csv_arcs == arcs);
}

// Issue 16: the daemon stores a capture whatever firmware it is paired with; its profile says
// when the capture does not fit the firmware's code (the blinky capture with shield.elf).
TEST_CASE("API: a capture imported with the wrong firmware is kept, its profile says so") {
    const auto data = testing::shared_data("API wrong firmware");
    if (data.empty()) return;
    ApiDaemon d;
    auto import_with = [&](const char* elf) {
        const auto put =
            d.call("PUT", "/api/v1/firmware", {"--data-binary", "@" + (data / elf).string()});
        REQUIRE(put.first / 100 == 2);
        const std::string fw = json::parse(put.second)["id"];
        const auto imported =
            d.call("POST", "/api/v1/sessions/import?format=hex&board=thesis&firmware=" + fw,
                   {"--data-binary", "@" + (data / "blink1hex.txt").string()});
        REQUIRE(imported.first == 201);
        const auto id = std::to_string(json::parse(imported.second)["id"].get<std::int64_t>());
        const auto profile = d.call("GET", "/api/v1/sessions/" + id + "/profile");
        REQUIRE(profile.first == 200);
        return json::parse(profile.second);
    };
    const json wrong = import_with("shield.elf");
    REQUIRE(wrong["wrong_elf"].is_object());
    CHECK(wrong["wrong_elf"]["targets"] == 10);
    CHECK(wrong["wrong_elf"]["targets_off_entry"] == 10);
    CHECK(wrong["wrong_elf"]["warning"].get<std::string>().find(
              "10 of 10 call targets (26440 of 26440 calls) are not at a function entry in ") == 0);
    CHECK(import_with("blinky.elf")["wrong_elf"].is_null());
}

TEST_CASE("API: a Tiva binned PC report imported; text?intervals=1; the sync alarm's warning") {
    ApiDaemon d;
    // The Tiva report (gmon/tiva_report.h) and an ELF with functions over its busy bins.
    const auto tiva_elf = d.dir() / "tiva.elf";
    gmon::write_synthetic_elf(tiva_elf,
                              {{"startup", 0x0, 0xA80},
                               {"Task_ProgramTrace", 0xA80, 0x180},
                               {"xPortPendSVHandler", 0x5040, 0xC0}},
                              0x0, 0x8000);
    const auto put = d.call("PUT", "/api/v1/firmware", {"--data-binary", "@" + tiva_elf.string()});
    REQUIRE(put.first == 201);
    const std::string tiva_fw = json::parse(put.second)["id"];
    std::string report = "DONE COLLECTING (1)\n";
    for (int bin = 0; bin < 512; ++bin) {
        const int count = bin == 323 ? 4100 : bin == 42 ? 310 : 0;
        report += "7," + std::string("42,0,") + std::to_string(bin) + "," + std::to_string(count) +
                  ",0,0\n";
    }
    std::ofstream(d.dir() / "tiva.txt") << report;
    const auto imported =
        d.call("POST", "/api/v1/sessions/import?format=tiva&board=tiva&firmware=" + tiva_fw,
               {"--data-binary", "@" + (d.dir() / "tiva.txt").string()});
    REQUIRE_MESSAGE(imported.first == 201, imported.second);
    const auto tiva_id = std::to_string(json::parse(imported.second)["id"].get<std::int64_t>());
    const auto profile = d.call("GET", "/api/v1/sessions/" + tiva_id + "/profile");
    REQUIRE(profile.first == 200);
    const json tiva_profile = json::parse(profile.second);
    CHECK(tiva_profile["prof_rate"] == 100);
    CHECK(tiva_profile["total_samples"] == 4410);
    for (const auto& row : tiva_profile["flat"]) {
        CHECK(row.contains("self_percent_interval"));
        if (row["name"] == "xPortPendSVHandler") CHECK(row["samples"].get<double>() == 4100);
        if (row["name"] == "Task_ProgramTrace") CHECK(row["samples"].get<double>() == 310);
    }
    const auto bad = d.call("POST", "/api/v1/sessions/import?format=tiva&firmware=" + tiva_fw,
                            {"--data-binary", "hello"});
    CHECK(bad.first == 422);
    CHECK(bad.second.find("not a Tiva binned PC report") != std::string::npos);
    // Two reports as a report task's printf prints them: a session
    // each, every id in "imported"; reports=sum makes one of their sum.
    std::string printed;
    for (int number = 1; number <= 2; ++number)
        printed += gmon::testing::printed_tiva_report(
            number, {{323, static_cast<std::uint64_t>(1000 * number)}});
    std::ofstream(d.dir() / "printed.txt", std::ios::binary) << printed;
    const auto each = d.call("POST", "/api/v1/sessions/import?format=tiva&firmware=" + tiva_fw,
                             {"--data-binary", "@" + (d.dir() / "printed.txt").string()});
    REQUIRE_MESSAGE(each.first == 201, each.second);
    const json report_ids = json::parse(each.second)["imported"];
    REQUIRE(report_ids.size() == 2);
    for (int i = 0; i < 2; ++i) {
        const json p = json::parse(
            d.call("GET", "/api/v1/sessions/" + std::to_string(report_ids[i].get<int>()) + "/profile")
                .second);
        CHECK(p["total_samples"] == 1000 * (i + 1));
    }
    const auto sum = d.call("POST", "/api/v1/sessions/import?format=tiva&reports=sum&firmware=" + tiva_fw,
                            {"--data-binary", "@" + (d.dir() / "printed.txt").string()});
    REQUIRE_MESSAGE(sum.first == 201, sum.second);
    CHECK(json::parse(sum.second)["imported"].size() == 1);
    CHECK(json::parse(d.call("GET", "/api/v1/sessions/" +
                                        std::to_string(json::parse(sum.second)["id"].get<int>()) +
                                        "/profile")
                          .second)["total_samples"] == 3000);
    CHECK(d.call("POST", "/api/v1/sessions/import?reports=every", {"--data-binary", "x"}).first ==
          400);

    // text?intervals=1 is the text-intervals export: gprof's text, then the intervals.
    const auto text = d.call("GET", "/api/v1/sessions/" + tiva_id + "/export/text");
    const auto with = d.call("GET", "/api/v1/sessions/" + tiva_id + "/export/text?intervals=1");
    REQUIRE(with.first == 200);
    CHECK(text.second.find("Wilson") == std::string::npos);
    CHECK(with.second.starts_with(text.second.substr(0, text.second.find("\f"))));
    CHECK(with.second.find("95% Wilson score intervals") != std::string::npos);
    CHECK(d.call("GET", "/api/v1/sessions/" + tiva_id + "/export/text-intervals").second ==
          with.second);

    // The synchronisation alarm: the synced model at a fixed period against the dithered run.
    const auto synced_elf = d.dir() / "synced.elf";
    for (const char* dither : {"0", "125"}) {
        REQUIRE(
            testing::rackprof({"simulate", "--model", "synced", "--iterations", "2000", "--dither",
                               dither, "-o", (d.dir() / ("synced-" + std::string(dither))).string(),
                               "--write-elf", synced_elf.string()})
                .exit_code == 0);
    }
    const auto synced_put =
        d.call("PUT", "/api/v1/firmware", {"--data-binary", "@" + synced_elf.string()});
    const std::string synced_fw = json::parse(synced_put.second)["id"];
    std::map<std::string, std::string> ids;
    for (const char* dither : {"0", "125"}) {
        const auto r =
            d.call("POST", "/api/v1/sessions/import?format=bin&firmware=" + synced_fw,
                   {"--data-binary", "@" + (d.dir() / ("synced-" + std::string(dither))).string()});
        REQUIRE(r.first == 201);
        ids[dither] = std::to_string(json::parse(r.second)["id"].get<std::int64_t>());
    }
    const auto alarm =
        d.call("GET", "/api/v1/sessions/" + ids["0"] + "/profile?sync_reference=" + ids["125"]);
    REQUIRE_MESSAGE(alarm.first == 200, alarm.second);
    const json sync = json::parse(alarm.second)["sync_check"];
    CHECK(sync["synchronised"] == true);
    CHECK(sync["reference"].get<std::int64_t>() == std::stoll(ids["125"]));
    CHECK(sync["warning"].get<std::string>().find("compute") != std::string::npos);
    CHECK_FALSE(json::parse(d.call("GET", "/api/v1/sessions/" + ids["0"] + "/profile").second)
                    .contains("sync_check"));
    // The same run against itself: no warning.
    const json calm = json::parse(
        d.call("GET", "/api/v1/sessions/" + ids["125"] + "/profile?sync_reference=" + ids["125"])
            .second);
    CHECK(calm["sync_check"]["synchronised"] == false);
    CHECK(calm["sync_check"]["warning"].is_null());
    CHECK(d.call("GET", "/api/v1/sessions/" + ids["0"] + "/profile?sync_reference=999").first ==
          404);
    // A session of another build is refused (409, both builds named): its shares differ for
    // reasons of its own, and every function was flagged.
    const auto other_elf = d.dir() / "other.elf";
    REQUIRE(testing::rackprof({"simulate", "--model", "blinky", "--iterations", "50", "-o",
                               (d.dir() / "other.bin").string(), "--write-elf", other_elf.string()})
                .exit_code == 0);
    const auto other_put =
        d.call("PUT", "/api/v1/firmware", {"--data-binary", "@" + other_elf.string()});
    const std::string other_fw = json::parse(other_put.second)["id"];
    const auto other = d.call("POST", "/api/v1/sessions/import?format=bin&firmware=" + other_fw,
                              {"--data-binary", "@" + (d.dir() / "other.bin").string()});
    REQUIRE(other.first == 201);
    const auto other_id = std::to_string(json::parse(other.second)["id"].get<std::int64_t>());
    const auto refused =
        d.call("GET", "/api/v1/sessions/" + ids["0"] + "/profile?sync_reference=" + other_id);
    CHECK(refused.first == 409);
    CHECK(refused.second.find("another build") != std::string::npos);
    // Two builds are compared only when asked to match functions by name: the CLI exits 2,
    // the API answers 409, each naming both build-ids; asked, the CLI warns as the dashboard
    // does. Within one build nothing is said.
    const auto db = (d.dir() / "rack.db").string();
    const auto across =
        testing::rackprof({"diff", "--db", db, "session=" + ids["0"], "session=" + other_id});
    CHECK(across.exit_code == 2);
    CHECK(across.err.find("different builds (build-id ") != std::string::npos);
    CHECK(across.err.find("merge") != std::string::npos);
    const auto by_name = testing::rackprof(
        {"diff", "--db", db, "--merge", "by_name", "session=" + ids["0"], "session=" + other_id});
    CHECK(by_name.exit_code == 0);
    CHECK(by_name.err.find("warning: different firmware") != std::string::npos);
    const std::string pair = "/api/v1/diff?a=session%3D" + ids["0"] + "&b=session%3D" + other_id;
    const auto refused_diff = d.call("GET", pair);
    CHECK(refused_diff.first == 409);
    const json refusal = json::parse(refused_diff.second);
    CHECK(refusal["error"]["code"] == "conflict");
    const std::string message = refusal["error"]["message"];
    const json info_a = json::parse(d.call("GET", "/api/v1/sessions/" + ids["0"]).second);
    const json info_b = json::parse(d.call("GET", "/api/v1/sessions/" + other_id).second);
    CHECK(message.find(info_a["build_id"].get<std::string>()) != std::string::npos);
    CHECK(message.find(info_b["build_id"].get<std::string>()) != std::string::npos);
    CHECK(d.call("GET", pair + "&merge=by_name").first == 200);
    CHECK(d.call("GET", pair + "&merge=by_size").first == 400);
    const auto within =
        testing::rackprof({"diff", "--db", db, "session=" + ids["0"], "session=" + ids["125"]});
    CHECK(within.exit_code == 0);
    CHECK(within.err.find("different firmware") == std::string::npos);
}

TEST_CASE("API: firmware upload, attach, and imports of a capture and of a gmon.out") {
    ApiDaemon d;
    const auto elf = d.dir() / "model.elf";
    const auto put = d.call("PUT", "/api/v1/firmware", {"--data-binary", "@" + elf.string()});
    REQUIRE(put.first == 201);
    const auto firmware = json::parse(put.second);
    const std::string fw = firmware["id"];
    CHECK(firmware["functions"].get<int>() > 5);
    CHECK(put.second.find(d.dir().path().string()) == std::string::npos);  // no internal paths
    CHECK(d.call("PUT", "/api/v1/firmware", {"--data-binary", "@" + elf.string()}).first ==
          200);  // stored once
    std::ofstream(d.dir() / "junk") << "not an elf";
    CHECK(d.call("PUT", "/api/v1/firmware", {"--data-binary", "@" + (d.dir() / "junk").string()})
              .first == 422);

    // A capture made elsewhere, imported: the same gmon.out as `rackprof convert`.
    const auto capture = d.dir() / "capture.bin";
    REQUIRE(testing::rackprof({"simulate", "--model", "deterministic", "--iterations", "40", "-o",
                               capture.string()})
                .exit_code == 0);
    REQUIRE(testing::rackprof({"convert", capture.string(), "--elf", elf.string(), "-o",
                               (d.dir() / "cli.gmon").string(), "--report", "none"})
                .exit_code == 0);
    const auto imported =
        d.call("POST", "/api/v1/sessions/import?format=bin&board=bench&firmware=" + fw,
               {"--data-binary", "@" + capture.string()});
    REQUIRE(imported.first == 201);
    const auto session = json::parse(imported.second);
    CHECK(session["state"] == "completed");
    CHECK(session["board"] == "bench");
    const auto sid = std::to_string(session["id"].get<std::int64_t>());
    CHECK(d.call("GET", "/api/v1/sessions/" + sid + "/gmon.out").second ==
          testing::read_text(d.dir() / "cli.gmon"));
    CHECK(d.call("GET", "/api/v1/sessions/" + sid + "/profile").first == 200);

    // The gmon.out itself, imported: the session gives the same file back.
    const auto again = d.call("POST", "/api/v1/sessions/import?format=gmon&firmware=" + fw,
                              {"--data-binary", "@" + (d.dir() / "cli.gmon").string()});
    REQUIRE(again.first == 201);
    const auto gid = std::to_string(json::parse(again.second)["id"].get<std::int64_t>());
    CHECK(d.call("GET", "/api/v1/sessions/" + gid + "/gmon.out").second ==
          testing::read_text(d.dir() / "cli.gmon"));

    // A 5 Hz gmon.out with 4-byte bins keeps its rate and histogram: gprof prints the same
    // times from the session's gmon.out as from the original (not 200x too small).
    REQUIRE(testing::rackprof({"convert", capture.string(), "--elf", elf.string(), "--rate", "5",
                               "--bin-bytes", "4", "-o", (d.dir() / "five.gmon").string(),
                               "--report", "none"})
                .exit_code == 0);
    const auto five = d.call("POST", "/api/v1/sessions/import?format=gmon&firmware=" + fw,
                             {"--data-binary", "@" + (d.dir() / "five.gmon").string()});
    REQUIRE(five.first == 201);
    const auto five_id = std::to_string(json::parse(five.second)["id"].get<std::int64_t>());
    const auto exported = d.call("GET", "/api/v1/sessions/" + five_id + "/export/gmon");
    REQUIRE(exported.first == 200);
    CHECK(exported.second == testing::read_text(d.dir() / "five.gmon"));
    std::ofstream(d.dir() / "five-back.gmon", std::ios::binary) << exported.second;
    CHECK(testing::gprof_brief(elf, d.dir() / "five-back.gmon") ==
          testing::gprof_brief(elf, d.dir() / "five.gmon"));
    const json five_profile =
        json::parse(d.call("GET", "/api/v1/sessions/" + five_id + "/profile").second);
    CHECK(five_profile["prof_rate"] == 5);
    const auto text = d.call("GET", "/api/v1/sessions/" + five_id + "/export/text");
    CHECK(text.second == testing::gprof_brief(elf, d.dir() / "five.gmon"));

    // Without firmware there are no names; attaching it later brings them.
    const auto bare = d.call("POST", "/api/v1/sessions/import?format=bin",
                             {"--data-binary", "@" + capture.string()});
    REQUIRE(bare.first == 201);
    const auto bid = std::to_string(json::parse(bare.second)["id"].get<std::int64_t>());
    CHECK(d.call("GET", "/api/v1/sessions/" + bid + "/profile").first == 422);
    CHECK(d.call("PUT", "/api/v1/sessions/" + bid + "/firmware",
                 {"--data", "{\"id\":\"" + fw + "\"}"})
              .first == 415);
    CHECK(d.call("PUT", "/api/v1/sessions/" + bid + "/firmware",
                 {"-H", "Content-Type: application/json", "--data", "{\"id\":\"" + fw + "\"}"})
              .first == 200);
    CHECK(d.call("GET", "/api/v1/sessions/" + bid + "/profile").first == 200);
    CHECK(d.call("POST", "/api/v1/sessions/import?format=bin",
                 {"--data-binary", "@" + (d.dir() / "junk").string()})
              .first == 422);

    // A framed capture, imported with its protocol: the same gmon.out as `rackprof convert`,
    // the frames it lost on the way counted on the session.
    const auto framed = d.dir() / "framed.bin";
    REQUIRE(
        testing::rackprof({"simulate", "--model", "deterministic", "--iterations", "40",
                           "--protocol", "framed", "--drop-frames", "0.05", "-o", framed.string()})
            .exit_code == 0);
    REQUIRE(testing::rackprof({"convert", framed.string(), "--protocol", "framed", "--elf",
                               elf.string(), "-o", (d.dir() / "framed.gmon").string(), "--report",
                               "none"})
                .exit_code == 0);
    const auto framed_import =
        d.call("POST", "/api/v1/sessions/import?format=bin&protocol=framed&firmware=" + fw,
               {"--data-binary", "@" + framed.string()});
    REQUIRE(framed_import.first == 201);
    const auto fs = json::parse(framed_import.second);
    CHECK(fs["protocol"] == "framed");
    CHECK(fs["counters"]["frames_lost"].get<std::uint64_t>() > 0);
    CHECK(d.call("GET",
                 "/api/v1/sessions/" + std::to_string(fs["id"].get<std::int64_t>()) + "/gmon.out")
              .second == testing::read_text(d.dir() / "framed.gmon"));
    // Settings a board could not have are refused, naming the key.
    const auto bad =
        d.call("POST", "/api/v1/sessions/import?format=bin&protocol=itm&console_port=300",
               {"--data-binary", "@" + framed.string()});
    CHECK(bad.first == 400);
    CHECK(bad.second.find("console_port") != std::string::npos);
}

// Waits for the daemon's TCP link to `listener`, and sends it a byte (its first bytes prove
// a TCP connection); the accepted client, or -1 after 15 s.
int accept_and_send(const testing::LoopbackListener& listener) {
    pollfd ready{listener.fd, POLLIN, 0};
    if (::poll(&ready, 1, 15000) != 1) return -1;
    const int client = ::accept(listener.fd, nullptr, nullptr);
    if (client >= 0 && ::send(client, "x", 1, MSG_NOSIGNAL) != 1) {
        ::close(client);
        return -1;
    }
    return client;
}

TEST_CASE("a board's reconnects count connections made again; a connected board has no error") {
    ApiDaemon d;
    int port = 0;
    {
        const auto probe = testing::listen_loopback();
        port = probe.port;
        ::close(probe.fd);  // nobody listens there now: every attempt is refused
    }
    const std::string body =
        R"({"name":"tcp1","link":"tcp://127.0.0.1:)" + std::to_string(port) + R"("})";
    REQUIRE(
        d.call("POST", "/api/v1/boards", {"-H", "Content-Type: application/json", "--data", body})
            .first == 201);
    const auto board = [&] { return json::parse(d.call("GET", "/api/v1/boards/tcp1").second); };
    CHECK(testing::eventually(
        [&] {
            const json b = board();
            return b["state"] == "disconnected" && !b["last_error"].get<std::string>().empty();
        },
        10s));
    std::this_thread::sleep_for(1500ms);  // more refused attempts (backoff from 100 ms)
    CHECK(board()["reconnects"] == 0);    // none of them connected

    const auto listener = testing::listen_loopback(port);
    int client = accept_and_send(listener);
    REQUIRE(client >= 0);
    CHECK(testing::eventually([&] { return board()["state"] == "connected"; }, 10s));
    CHECK(board()["last_error"] == "");
    CHECK(board()["reconnects"] == 0);  // the first connection

    ::close(client);  // the server drops it; the board comes back
    CHECK(testing::eventually([&] { return board()["state"] == "disconnected"; }, 10s));
    client = accept_and_send(listener);
    REQUIRE(client >= 0);
    CHECK(testing::eventually([&] { return board()["state"] == "connected"; }, 10s));
    const json again = board();
    CHECK(again["reconnects"] == 1);
    CHECK(again["last_error"] == "");
    ::close(client);
    ::close(listener.fd);
}

TEST_CASE("API: boards created, changed and deleted through the API, kept across restarts") {
    ApiDaemon d;
    const std::vector<std::string> json_type = {"-H", "Content-Type: application/json"};
    auto with = [&](std::vector<std::string> extra, const std::string& body) {
        extra.insert(extra.end(), json_type.begin(), json_type.end());
        extra.push_back("--data");
        extra.push_back(body);
        return extra;
    };
    const auto created =
        d.call("POST", "/api/v1/boards",
               with({}, R"({"name":"extra","link":"sim://blinky?rate=20000","tags":["lab-b"]})"));
    REQUIRE(created.first == 201);
    CHECK(json::parse(created.second)["name"] == "extra");
    CHECK(d.call("POST", "/api/v1/boards", with({}, R"({"name":"extra","link":"sim://blinky"})"))
              .first == 409);
    CHECK(d.call("POST", "/api/v1/boards", with({}, R"({"name":"bad","link":"usb://x"})")).first ==
          422);
    CHECK(d.call("POST", "/api/v1/boards",
                 with({}, R"({"name":"bad","link":"sim://blinky","addr_bytes":9})"))
              .first == 422);
    CHECK(d.call("POST", "/api/v1/boards", {"--data", "name=x"}).first == 415);
    CHECK(d.call("PUT", "/api/v1/boards/det", with({}, R"({"link":"sim://blinky"})")).first ==
          409);  // the file's board
    CHECK(d.call("DELETE", "/api/v1/boards/det").first == 409);
    REQUIRE(testing::eventually(
        [&] {
            return testing::read_text(d.dir() / "serve.log").find("[extra] session") !=
                   std::string::npos;
        },
        10s));
    const auto extra_session =
        json::parse(d.call("GET", "/api/v1/boards/extra").second)["session"].get<std::int64_t>();
    const auto tagged = json::parse(d.call("GET", "/api/v1/sessions?tag=lab-b").second);
    REQUIRE(tagged.size() == 1);
    CHECK(tagged[0]["id"] == extra_session);

    const auto changed = d.call("PUT", "/api/v1/boards/extra",
                                with({}, R"({"link":"sim://conflation?rate=20000"})"));
    CHECK(changed.first == 200);
    CHECK(json::parse(changed.second)["link"] == "sim://conflation?rate=20000");

    d.restart();  // the board is back from the database
    const auto after = d.call("GET", "/api/v1/boards/extra");
    REQUIRE(after.first == 200);
    CHECK(json::parse(after.second)["link"] == "sim://conflation?rate=20000");
    CHECK(d.call("DELETE", "/api/v1/boards/extra").first == 204);
    CHECK(d.call("GET", "/api/v1/boards/extra").first == 404);
    d.restart();  // and stays deleted
    CHECK(d.call("GET", "/api/v1/boards/extra").first == 404);
    CHECK(json::parse(d.call("GET", "/api/v1/boards").second).size() == 1);

    // A board can name an uploaded firmware image by its id.
    const auto fw = json::parse(
        d.call("PUT", "/api/v1/firmware", {"--data-binary", "@" + (d.dir() / "model.elf").string()})
            .second);
    const std::string body =
        R"({"name":"fw","link":"sim://deterministic?rate=20000","firmware":")" +
        fw["id"].get<std::string>() + "\"}";
    CHECK(d.call("POST", "/api/v1/boards", with({}, body)).first == 201);
    CHECK(d.call("POST", "/api/v1/boards",
                 with({}, R"({"name":"fw2","link":"sim://blinky","firmware":"../../etc"})"))
              .first == 422);
    REQUIRE(testing::eventually(
        [&] {
            return testing::read_text(d.dir() / "serve.log").find("[fw] session") !=
                   std::string::npos;
        },
        10s));
    const auto fw_session =
        json::parse(d.call("GET", "/api/v1/boards/fw").second)["session"].get<std::int64_t>();
    CHECK(json::parse(d.call("GET", "/api/v1/sessions/" + std::to_string(fw_session))
                          .second)["elf"]["sha256"] == fw["sha256"]);
}

TEST_CASE("API: malformed HTTP, oversized bodies") {
    ApiDaemon d;
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(d.port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    const std::string garbage = "\x01\x02 NOT HTTP AT ALL\r\n\r\n";
    REQUIRE(::send(fd, garbage.data(), garbage.size(), 0) > 0);
    char buffer[512] = {};
    const ssize_t n = ::recv(fd, buffer, sizeof buffer - 1, 0);
    ::close(fd);
    REQUIRE(n > 0);
    CHECK(std::string(buffer).find("400 Bad Request") != std::string::npos);

    std::ofstream(d.dir() / "big.bin") << std::string(3 << 20, 'x');
    const auto big = d.call("POST", "/api/v1/boards/det/sessions",
                            {"--data-binary", "@" + (d.dir() / "big.bin").string()});
    CHECK(big.first == 413);
    CHECK(d.call("GET", "/healthz").first == 200);  // and the server is fine
}

TEST_CASE("API off loopback: mutating requests need the bearer token") {
    ApiDaemon d("0.0.0.0:0", {"RACKPROF_API_TOKEN=s3cret"});
    const auto boards = json::parse(d.call("GET", "/api/v1/boards").second);  // reading is open
    const auto id = std::to_string(boards[0]["session"].get<std::int64_t>());
    CHECK(d.call("POST", "/api/v1/sessions/" + id + "/stop").first == 401);
    CHECK(d.call("POST", "/api/v1/sessions/" + id + "/stop", {"-H", "Authorization: Bearer wrong"})
              .first == 401);
    CHECK(d.call("POST", "/api/v1/sessions/" + id + "/stop", {"-H", "Authorization: Bearer s3cret"})
              .first == 200);
    CHECK(testing::read_text(d.dir() / "serve.log").find("s3cret") ==
          std::string::npos);  // never logged
}

TEST_CASE("API security: links, firmware paths and names a board created over HTTP may use") {
    ApiDaemon d;
    auto post = [&](const std::string& body) {
        return d.call("POST", "/api/v1/boards",
                      {"-H", "Content-Type: application/json", "--data", body});
    };
    // A file link would read any file the daemon can and serve it back as raw bytes.
    const auto passwd = post(R"({"name":"p","link":"file:///etc/passwd?pace=fast"})");
    CHECK(passwd.first == 403);
    CHECK(passwd.second.find("server.api_links") != std::string::npos);
    CHECK(post(R"({"name":"t","link":"tcp://10.1.2.3:4000"})").first == 403);  // off loopback
    CHECK(post(R"({"name":"s","link":"serial:///dev/rackprof/../../etc/passwd"})").first == 422);
    // Firmware only from the store, never a path.
    const auto shadow = post(R"({"name":"e","link":"sim://blinky","elf":"/etc/shadow"})");
    CHECK(shadow.first == 403);
    CHECK(shadow.second.find("/api/v1/firmware") != std::string::npos);
    // Bounds: a rate of 0 divided by zero (SIGFPE), a huge one grew memory by 115 MB/s.
    CHECK(post(R"({"name":"z","link":"sim://blinky?rate=0"})").first == 422);
    CHECK(post(R"({"name":"h","link":"sim://blinky?rate=999999999999"})").first == 422);
    CHECK(post(R"({"name":"w","link":"sim://blinky","addr_bytes":4294967299})").first == 422);
    // Names reach headers and log lines: CR, LF and NUL are refused.
    CHECK(post("{\"name\":\"x\\r\\nSet-Cookie: a=b\",\"link\":\"sim://blinky\"}").first == 422);
    CHECK(post("{\"name\":\"x\\u0000y\",\"link\":\"sim://blinky\"}").first == 422);
    CHECK(d.call("POST", "/api/v1/sessions/import?format=bin&board=a%22b",
                 {"--data-binary", "@" + (d.dir() / "model.elf").string()})
              .first == 400);
    CHECK(d.call("GET", "/healthz").first == 200);
    const auto boards = json::parse(d.call("GET", "/api/v1/boards").second);
    CHECK(boards.size() == 1);  // none of them was created
}

TEST_CASE("API security: an allowed file link with rate 0 is refused, not a crash loop") {
    ApiDaemon d("127.0.0.1:0", {}, "api_links = [\"file:///*\", \"sim://*\"]\n");
    auto post = [&](const std::string& body) {
        return d.call("POST", "/api/v1/boards",
                      {"-H", "Content-Type: application/json", "--data", body});
    };
    const std::string capture = (d.dir() / "model.elf").string();
    CHECK(post(R"({"name":"f0","link":"file://)" + capture + R"(?pace=realtime&rate=0"})").first ==
          422);
    CHECK(
        post(R"({"name":"f1","link":"file://)" + capture + R"(?pace=realtime&rate=1000"})").first ==
        201);
    CHECK(d.call("GET", "/healthz").first == 200);
}

TEST_CASE("API security: a stored board an older rackprof accepted is skipped at start") {
    ApiDaemon d;
    d.stop();
    // What an older rackprof stored for `POST {"link":"file:///etc/passwd..."}`.
    storage::Database(d.dir() / "rack.db")
        .exec(
            "INSERT INTO boards(name, config, updated_ns) VALUES('old', "
            "'{\"name\":\"old\",\"link\":\"file:///etc/passwd?pace=realtime&rate=0\"}', 0)");
    d.launch();
    CHECK(d.call("GET", "/api/v1/boards/old").first == 404);
    CHECK(testing::read_text(d.dir() / "serve.log").find("[old] stored board is unusable") !=
          std::string::npos);
}

TEST_CASE(
    "API security: a stored session whose board an older rackprof accepted downloads "
    "under a safe name") {
    ApiDaemon d;
    const auto boards = json::parse(d.call("GET", "/api/v1/boards").second);
    const auto sid = std::to_string(boards[0]["session"].get<std::int64_t>());
    d.stop();
    // What an older rackprof stored for a board named "x\r\nSet-Cookie: a=b".
    const std::string update =
        "UPDATE sessions SET board = 'x' || char(13, 10) || 'Set-Cookie: a=b' WHERE id = " + sid;
    storage::Database(d.dir() / "rack.db").exec(update.c_str());
    d.launch();
    const auto raw = d.call("GET", "/api/v1/sessions/" + sid + "/export/raw",
                            {"-D", (d.dir() / "headers").string()});
    CHECK(raw.first == 200);
    const std::string headers = testing::read_text(d.dir() / "headers");
    CHECK(headers.find("\nSet-Cookie") == std::string::npos);
    CHECK(headers.find("Content-Disposition: attachment; filename=\"x__Set-Cookie:_a_b-" + sid +
                       ".raw\"\r\n") != std::string::npos);
}

TEST_CASE("API on loopback: a configured token guards every mutation") {
    ApiDaemon d("127.0.0.1:0", {"RACKPROF_API_TOKEN=s3cret"});
    const auto boards = json::parse(d.call("GET", "/api/v1/boards").second);
    const auto id = std::to_string(boards[0]["session"].get<std::int64_t>());
    CHECK(d.call("POST", "/api/v1/sessions/" + id + "/stop").first == 401);
    CHECK(d.call("POST", "/api/v1/sessions/" + id + "/stop", {"-H", "Authorization: Bearer s3cret"})
              .first == 200);
}

TEST_CASE("serve: a token file that cannot be read is an error, not an open bench") {
    testing::TempDir dir;
    std::ofstream(dir / "rack.toml")
        << "[server]\nlisten = \"127.0.0.1:0\"\ntoken_file = \"" << (dir / "missing").string()
        << "\"\n[storage]\npath = \"" << (dir / "rack.db").string() << "\"\n";
    const auto r = testing::rackprof({"serve", "--config", (dir / "rack.toml").string()});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("server.token_file") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dir / "rack.db"));
}

TEST_CASE("serve: a bad listen address is refused before storage is opened") {
    testing::TempDir dir;
    std::ofstream(dir / "rack.toml")
        << "[server]\nlisten = \"localhost:99999\"\n[storage]\npath = \""
        << (dir / "rack.db").string() << "\"\n";
    const auto r = testing::rackprof({"serve", "--config", (dir / "rack.toml").string()});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("server.listen") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dir / "rack.db"));
}

TEST_CASE("/metrics of a real daemon passes promtool check metrics") {
    ApiDaemon d;
    d.call("GET", "/api/v1/boards");
    const auto metrics = d.call("GET", "/metrics");
    REQUIRE(metrics.first == 200);
    CHECK(metrics.second.find("rackprof_boards{state=\"connected\"} 1") != std::string::npos);
    CHECK(metrics.second.find("rackprof_session_bytes_in_total{board=\"det\"}") !=
          std::string::npos);
    CHECK(metrics.second.find("rackprof_http_requests_total{route=\"/api/v1/boards\"") !=
          std::string::npos);
    CHECK(metrics.second.find("rackprof_feed_clients{feed=\"live\"} 0") != std::string::npos);
    if (testing::run({"sh", "-c", "command -v promtool"}).exit_code != 0) {
        MESSAGE("SKIP promtool check metrics: promtool (Debian's prometheus) is not installed");
        return;
    }
    std::ofstream(d.dir() / "metrics.txt") << metrics.second;
    const auto check = testing::run(
        {"sh", "-c", "promtool check metrics < " + (d.dir() / "metrics.txt").string()});
    INFO(check.out << check.err);
    CHECK(check.exit_code == 0);
}

TEST_CASE("the token: any case of the scheme (RFC 7235); /healthz and /readyz never need it") {
    ApiDaemon d("127.0.0.1:0", {"RACKPROF_API_TOKEN=s3cret"}, "token_for_reads = true\n");
    CHECK(d.call("GET", "/api/v1/boards").first == 401);
    CHECK(d.call("GET", "/api/v1/boards", {"-H", "Authorization: Bearer wrong"}).first == 401);
    CHECK(d.call("GET", "/api/v1/boards", {"-H", "Authorization: Bearer s3cre"}).first == 401);
    CHECK(d.call("GET", "/api/v1/boards", {"-H", "Authorization: Bearer s3cret!"}).first == 401);
    for (const char* scheme : {"Bearer", "bearer", "BEARER", "bEaReR"}) {
        CAPTURE(scheme);
        CHECK(d.call("GET", "/api/v1/boards",
                     {"-H", std::string("Authorization: ") + scheme + " s3cret"})
                  .first == 200);
    }
    CHECK(d.call("GET", "/api/v1/boards", {"-H", "Authorization: Basic s3cret"}).first == 401);
    CHECK(d.call("GET", "/healthz").first == 200);
    CHECK(d.call("HEAD", "/healthz", {"-I"}).first == 200);
    CHECK(d.call("GET", "/healthz", {"-H", "Authorization: Bearer wrong"}).first == 200);
    CHECK(d.call("GET", "/readyz").first == 200);
}

TEST_CASE("query values are percent-decoded; a bad escape is a 400") {
    ApiDaemon d;
    auto ids = [&](const std::string& query) {  // the counters of a capturing session move
        std::vector<std::int64_t> out;
        for (const auto& s : json::parse(d.call("GET", "/api/v1/sessions" + query).second))
            out.push_back(s["id"]);
        return out;
    };
    const auto plain = ids("?board=det");
    REQUIRE_FALSE(plain.empty());
    CHECK(ids("?board=d%65t") == plain);
    CHECK(ids("?bo%61rd=det") == plain);
    CHECK(json::parse(d.call("GET", "/api/v1/sessions?board=d+et").second).empty());
    const auto bad = d.call("GET", "/api/v1/sessions?board=de%zzt");
    CHECK(bad.first == 400);
    CHECK(json::parse(bad.second)["error"]["code"] == "bad_query");
    CHECK(d.call("GET", "/api/v1/sessions?board=det%").first == 400);
}

// A bench of 10^5 sessions made every listing a gigabyte of JSON (the soak found it): a listing
// is a page, the newest first from the store, and older pages are asked for by id.
TEST_CASE("the session listing comes in pages: the newest `limit`, then before= the oldest") {
    ApiDaemon d;
    std::vector<std::int64_t> seeded;
    {
        storage::SessionStore store(d.dir() / "rack.db");
        storage::Transaction t(store.db());
        storage::NewSession spec;
        spec.board = "seeded";
        spec.link = "sim://blinky";
        for (int i = 0; i < 2500; ++i) {
            spec.started_ns = 1'700'000'000'000'000'000 + i;
            seeded.push_back(store.create_session(spec));
            store.end_session(seeded.back(), "completed", spec.started_ns + 1);
        }
        t.commit();
    }
    const auto ids = [&](const std::string& query) {
        const auto reply = d.call("GET", "/api/v1/sessions?board=seeded" + query);
        std::vector<std::int64_t> out;
        for (const auto& s : json::parse(reply.second)) out.push_back(s["id"]);
        return out;
    };
    const auto first = ids("");
    REQUIRE(first.size() == 1000);  // the default page
    CHECK(std::vector<std::int64_t>(seeded.end() - 1000, seeded.end()) == first);  // id order
    const auto second = ids("&before=" + std::to_string(first.front()));
    CHECK(std::vector<std::int64_t>(seeded.end() - 2000, seeded.end() - 1000) == second);
    const auto last = ids("&limit=600&before=" + std::to_string(second.front()));
    CHECK(std::vector<std::int64_t>(seeded.begin(), seeded.begin() + 500) ==
          last);  // short: the end
    CHECK(ids("&limit=10000").size() == 2500);
    CHECK(ids("&state=capturing").empty());
    for (const char* bad : {"&limit=0", "&limit=10001", "&before=x", "&limit=-1"}) {
        CAPTURE(bad);
        CHECK(d.call("GET", std::string("/api/v1/sessions?board=seeded") + bad).first == 400);
    }
}

TEST_CASE("uploads above 1 MiB sent with Content-Length are taken; above 64 MiB, 413") {
    ApiDaemon d;
    const auto capture = d.dir() / "big.bin";
    REQUIRE(testing::rackprof(
                {"simulate", "--model", "deterministic", "--bytes", "3M", "-o", capture.string()})
                .exit_code == 0);
    REQUIRE(std::filesystem::file_size(capture) > (2u << 20));
    const auto length = d.call("POST", "/api/v1/sessions/import?format=bin",
                               {"--data-binary", "@" + capture.string()});  // Content-Length
    CHECK(length.first == 201);
    const auto put = d.call("PUT", "/api/v1/firmware", {"-T", capture.string()});
    CHECK(put.first == 422);  // read whole, then found not to be an ELF
    CHECK(d.upload_chunked("POST", "/api/v1/sessions/import?format=bin", capture).first == 201);
    // Above the upload limit: refused from the header alone, with a message naming the limit.
    std::filesystem::resize_file(capture, (64u << 20) + 1);
    const auto huge = d.call("POST", "/api/v1/sessions/import?format=bin",
                             {"--data-binary", "@" + capture.string()});
    CHECK(huge.first == 413);
    CHECK(huge.second.find(std::to_string(64u << 20)) != std::string::npos);
    // Other requests keep the small limit.
    std::filesystem::resize_file(capture, (1u << 20) + 1);
    CHECK(d.call("POST", "/api/v1/boards",
                 {"-H", "Content-Type: application/json", "--data-binary", "@" + capture.string()})
              .first == 413);
    // Chunked above the limit: refused on the way, its file removed like every other upload's.
    std::filesystem::resize_file(capture, (64u << 20) + 1);
    CHECK(d.upload_chunked("PUT", "/api/v1/firmware", capture).first == 413);
    CHECK(d.call("GET", "/healthz").first == 200);
    for (const auto& entry : std::filesystem::recursive_directory_iterator(d.dir().path()))
        CHECK(entry.path().filename().string().find(".upload") == std::string::npos);
}

}  // namespace
}  // namespace rackprof
