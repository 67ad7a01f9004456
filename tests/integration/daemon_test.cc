// The capture daemon as it runs on a bench: a real `rackprof serve` process, boards on real
// pseudo-terminals (driven by `rackprof simulate --pty`), a real SQLite file. Everything the
// boards sent must be stored exactly, through unplugs, SIGTERM and kill -9.
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "gmon/aggregate.h"
#include "gmon/report.h"
#include "gmon/symbolizer.h"
#include "storage/session_store.h"
#include "tests/integration/feed.h"
#include "tests/integration/sim_rack.h"
#include "tests/integration/test_support.h"

namespace rackprof {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

using testing::aggregate_of;
using testing::Rack;
using testing::SimBoard;

const storage::SessionInfo& only_session_of(const std::vector<storage::SessionInfo>& sessions,
                                            const std::string& board) {
    const storage::SessionInfo* found = nullptr;
    for (const auto& s : sessions) {
        if (s.spec.board == board) {
            REQUIRE_MESSAGE(!found, "more than one session for " << board);
            found = &s;
        }
    }
    REQUIRE_MESSAGE(found, "no session for " << board);
    return *found;
}

TEST_CASE(
    "a rack of simulated boards: every stored record, aggregate and raw byte equals what was "
    "sent") {
    const std::vector<SimBoard> boards = {
        {"blinky", {"--model", "blinky", "--iterations", "150", "--rate", "60000"}, "bin", 3},
        {"conflation",
         {"--model", "conflation", "--iterations", "400", "--rate", "60000"},
         "hex",
         3},
        {"deterministic",
         {"--model", "deterministic", "--iterations", "200", "--rate", "60000"},
         "bin",
         4},
        {"deterministic-hex",
         {"--model", "deterministic", "--iterations", "100", "--seed", "5", "--rate", "60000"},
         "hex",
         4},
    };
    Rack rack(boards);
    rack.capture_all();

    storage::SessionStore store(rack.db(), storage::Database::Mode::kReadOnly);
    const auto sessions = store.sessions();
    for (const auto& b : boards) {
        CAPTURE(b.name);
        const auto& s = only_session_of(sessions, b.name);
        const json truth = rack.truth(b.name);
        CHECK(s.state == "completed");
        CHECK(s.counters.arcs == truth["arcs_sent"].get<std::uint64_t>());
        CHECK(s.counters.pc_samples == truth["pc_samples_sent"].get<std::uint64_t>());
        CHECK(s.counters.bytes_in == truth["wire_bytes"].get<std::uint64_t>());
        CHECK(s.counters.bytes_discarded == 0);
        CHECK(s.counters.records_lost == 0);
        CHECK(store.aggregate(s.id) == aggregate_of(truth));
        // Record batches hold exactly the records.
        gmon::Aggregate from_batches;
        store.for_each_record_batch(
            s.id, [&](std::int64_t, std::span<const protocol::Record> r) { from_batches.add(r); });
        CHECK(from_batches == aggregate_of(truth));
        // Raw bytes, in order, are the bytes sent.
        std::string raw;
        std::int64_t last = 0;
        store.for_each_chunk(s.id, [&](std::int64_t t, std::span<const std::uint8_t> bytes) {
            CHECK(t >= last);
            last = t;
            raw.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
        });
        CHECK(raw == rack.expected_bytes(b));
    }
    // A re-decode of the stored raw bytes equals the live result.
    const auto& first = only_session_of(sessions, "deterministic");
    const auto live = testing::rackprof({"convert", "--db", rack.db().string(), "--session",
                                         std::to_string(first.id), "--report", "json", "-o",
                                         rack.path("live.gmon").string()});
    const auto again = testing::rackprof({"convert", "--db", rack.db().string(), "--session",
                                          std::to_string(first.id), "--redecode", "--report",
                                          "json", "-o", rack.path("again.gmon").string()});
    REQUIRE(live.exit_code == 0);
    REQUIRE(again.exit_code == 0);
    CHECK(json::parse(live.out)["raw"] == json::parse(again.out)["raw"]);
    CHECK(testing::read_text(rack.path("live.gmon")) ==
          testing::read_text(rack.path("again.gmon")));
}

TEST_CASE(
    "unplug and replug 20 times: one session, gaps recorded, nothing lost, no descriptor leak") {
    const std::vector<SimBoard> boards = {
        testing::unplugging_board("flaky"),
        {"steady", {"--model", "blinky", "--iterations", "100", "--rate", "30000"}},
    };
    Rack rack(boards);
    rack.start_connected("flaky");
    const int fds_before = rack.daemon().open_fds();
    rack.wait_boards_settled();
    const json truth = rack.truth("flaky");
    CHECK(truth["unplugs"] == 20);
    const int fds_after = rack.daemon().open_fds();
    CHECK(fds_after <= fds_before);
    std::cout << "FIGURE unplug_loop.descriptors = " << fds_before << " -> " << fds_after
              << " over 20 unplugs\n";
    rack.stop_daemon();

    storage::SessionStore store(rack.db(), storage::Database::Mode::kReadOnly);
    const auto sessions = store.sessions();
    const auto& s = only_session_of(sessions, "flaky");
    CHECK(s.counters.gaps >= 20);
    CHECK(store.gaps(s.id).size() == s.counters.gaps);
    for (const auto& gap : store.gaps(s.id)) {
        CHECK(gap.ended_ns >= gap.started_ns);
        CHECK_FALSE(gap.reason.empty());
    }
    CHECK(s.counters.bytes_in == truth["wire_bytes"].get<std::uint64_t>());
    CHECK(s.counters.bytes_discarded == 0);
    CHECK(store.aggregate(s.id) == aggregate_of(truth));
    const auto& steady = only_session_of(sessions, "steady");
    CHECK(store.aggregate(steady.id) == aggregate_of(rack.truth("steady")));
    CHECK(steady.counters.gaps <= 1);  // only the end of the simulation
}

// A small file system of its own (tmpfs), unmounted at scope exit; not mounted when this
// process may not mount (not root, no CAP_SYS_ADMIN).
class Tmpfs {
  public:
    Tmpfs(const std::filesystem::path& dir, const std::string& size) : dir_(dir) {
        std::filesystem::create_directories(dir);
        mounted_ = ::geteuid() == 0 && testing::run({"mount", "-t", "tmpfs", "-o", "size=" + size,
                                                     "tmpfs", dir.string()})
                                               .exit_code == 0;
    }
    ~Tmpfs() {
        if (mounted_) testing::run({"umount", "-l", dir_.string()});
    }
    bool mounted() const { return mounted_; }

  private:
    std::filesystem::path dir_;
    bool mounted_ = false;
};

// Writes a file until its file system is full (ENOSPC); returns the bytes written.
std::uint64_t fill_file_system(const std::filesystem::path& file) {
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(fd >= 0);
    const std::vector<char> block(1 << 16, 'f');
    std::uint64_t written = 0;
    while (true) {
        const ssize_t n = ::write(fd, block.data(), block.size());
        if (n <= 0) break;
        written += static_cast<std::uint64_t>(n);
    }
    ::close(fd);
    return written;
}

json get_json(const std::string& port, const std::string& path) {
    const auto r = testing::run({"curl", "-sS", "http://127.0.0.1:" + port + path});
    return json::parse(r.out, nullptr, false);
}

std::size_t count_lines(const std::string& text, const std::string& containing) {
    std::size_t n = 0;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);)
        n += line.find(containing) != std::string::npos;
    return n;
}

// The board "filling" of the disk-full tests: a deterministic run of `iterations` at 30 kB/s.
std::vector<SimBoard> filling_board(const char* iterations) {
    return {
        {"filling", {"--model", "deterministic", "--iterations", iterations, "--rate", "30000"}}};
}

// Starts the rack's board and daemon; the daemon's API port.
std::string start_filling(Rack& rack) {
    rack.start_boards();
    rack.start_daemon();
    return testing::wait_for_api_port(rack.path("serve.log"));
}

// The id of board "filling"'s session once it holds arcs, and some of it is committed.
std::string session_with_arcs(const std::string& port) {
    json board;
    REQUIRE(testing::eventually(
        [&] {
            board = get_json(port, "/api/v1/boards/filling");
            return board.is_object() && board["session"].is_number() &&
                   board["counters"]["arcs"].get<std::uint64_t>() > 0;
        },
        10s));
    std::this_thread::sleep_for(300ms);  // some of it committed
    return std::to_string(board["session"].get<std::int64_t>());
}

TEST_CASE(
    "disk full under a real daemon: every record stored or counted lost, a gap, storage_error "
    "shown, capture resumes, a few log lines") {
    testing::TempDir mounts;
    Tmpfs fs(mounts / "fs", "32m");
    if (!fs.mounted()) {
        std::cout << "SKIP: disk full under a real daemon: cannot mount a tmpfs here (needs root "
                     "with CAP_SYS_ADMIN); storage_writer_test's max_page_count test covers the "
                     "writer\n";
        return;
    }
    Rack rack(filling_board("300"), "", mounts / "fs" / "rack.db");
    const std::string port = start_filling(rack);
    const std::string id = session_with_arcs(port);
    CHECK(get_json(port, "/api/v1/boards/filling")["storage_state"] == "ok");

    // The disk fills: the API says so, on the board, its session, its live feed and /readyz.
    const auto filler = mounts / "fs" / "filler";
    CHECK(fill_file_system(filler) > 0);
    REQUIRE(testing::eventually(
        [&] {
            return get_json(port, "/api/v1/boards/filling")["storage_state"] == "storage_error";
        },
        10s));
    const json failing_board = get_json(port, "/api/v1/boards/filling");
    CHECK(failing_board["storage_error"].get<std::string>().find("full") != std::string::npos);
    CHECK(get_json(port, "/api/v1/sessions/" + id)["storage_state"] == "storage_error");
    CHECK(get_json(port, "/readyz")["storage_state"] == "storage_error");
    {
        // The feed's first message may be the state published just before the failure (the
        // capture thread publishes on its own beat): a later one says so.
        testing::Feed live(port, "/api/v1/sessions/" + id + "/live");
        bool shown = false;
        for (int i = 0; i < 30 && !shown; ++i)
            shown = live.next()["storage_state"] == "storage_error";
        CHECK(shown);
    }
    std::this_thread::sleep_for(1500ms);  // an episode of some 15 failed commits
    CHECK(get_json(port, "/api/v1/boards/filling")["counters"]["records_lost_storage"]
              .get<std::uint64_t>() > 0);
    const std::size_t lines_while_full = count_lines(rack.log(), "storage:");

    // Space returns: capture goes on storing.
    std::filesystem::remove(filler);
    REQUIRE(testing::eventually(
        [&] { return get_json(port, "/api/v1/boards/filling")["storage_state"] == "ok"; }, 10s));
    rack.wait_boards();
    json api_storage_gap;  // the session's storage gap as the API lists it
    json last_session;
    INFO(last_session.dump());
    REQUIRE(testing::eventually(
        [&] {
            last_session = get_json(port, "/api/v1/sessions/" + id);
            for (const auto& g : last_session["gaps"]) {
                if (g["reason"].get<std::string>().rfind("storage: ", 0) == 0) api_storage_gap = g;
            }
            return !api_storage_gap.is_null();
        },
        20s));
    rack.stop_daemon();

    storage::SessionStore store(rack.db(), storage::Database::Mode::kReadOnly);
    const auto sessions = store.sessions();
    const auto& s = only_session_of(sessions, "filling");
    CHECK(std::to_string(s.id) == id);
    const json truth = rack.truth("filling");
    const std::uint64_t sent =
        truth["arcs_sent"].get<std::uint64_t>() + truth["pc_samples_sent"].get<std::uint64_t>();
    std::uint64_t stored = 0;
    std::int64_t last_batch_ns = 0;
    store.for_each_record_batch(s.id, [&](std::int64_t t, std::span<const protocol::Record> r) {
        stored += r.size();
        last_batch_ns = t;
    });
    std::uint64_t stored_bytes = 0;
    store.for_each_chunk(
        s.id, [&](std::int64_t, std::span<const std::uint8_t> raw) { stored_bytes += raw.size(); });
    CHECK(s.state == "completed");
    CHECK(s.counters.records_lost == 0);  // the queue never overflowed: these are storage's
    CHECK(s.counters.records_lost_storage > 0);
    CHECK(stored + s.counters.records_lost_storage == sent);
    CHECK(stored_bytes + s.counters.bytes_lost_storage == truth["wire_bytes"].get<std::uint64_t>());
    CHECK(s.counters.arcs + s.counters.pc_samples == sent);
    // One gap for the episode; records stored after it: capture resumed.
    std::vector<storage::Gap> storage_gaps;
    for (const auto& g : store.gaps(s.id)) {
        if (g.reason.rfind("storage: ", 0) == 0) storage_gaps.push_back(g);
    }
    REQUIRE(storage_gaps.size() == 1);
    CHECK(storage_gaps[0].reason.find("full") != std::string::npos);
    // The gap says what it lost: all the session lost to storage, since it is its only one.
    CHECK(storage_gaps[0].records_lost == s.counters.records_lost_storage);
    CHECK(storage_gaps[0].bytes_lost == s.counters.bytes_lost_storage);
    CHECK(api_storage_gap["records_lost"] == s.counters.records_lost_storage);
    CHECK(api_storage_gap["bytes_lost"] == s.counters.bytes_lost_storage);
    CHECK(api_storage_gap["started_ns"] == storage_gaps[0].started_ns);
    for (const auto& g : store.gaps(s.id)) {
        if (g.reason.rfind("storage: ", 0) != 0) CHECK_FALSE(g.records_lost);  // a link's: unknown
    }
    CHECK(storage_gaps[0].ended_ns > storage_gaps[0].started_ns);
    CHECK(last_batch_ns > storage_gaps[0].ended_ns);
    CHECK(store.gaps(s.id).size() == s.counters.gaps);

    // Said once, with the database and its free space; a few lines, not one per commit.
    const std::string log = rack.log();
    INFO(log);
    CHECK(count_lines(log, "storage: commits fail") == 1);
    CHECK(log.find("database " + rack.db().string()) != std::string::npos);
    CHECK(log.find(" free of ") != std::string::npos);
    CHECK(lines_while_full <= 2);
    CHECK(count_lines(log, "storage:") <= 4);  // fail, recovered, the session's losses
    CHECK(log.find("NOT everything captured was committed") != std::string::npos);
    CHECK(log.find("everything captured is committed") == std::string::npos);
}

// A full disk is not a damaged database: a daemon killed while capturing, its disk then full;
// `check --db` gives no "damaged" verdict, and serve starts (it exited 1 and, under systemd,
// restart-looped), counts what it cannot store, and finishes the killed run's session (sums,
// 'interrupted') once space returns.
TEST_CASE("a full disk at start: serve starts, counts its losses, finishes the earlier run later") {
    testing::TempDir mounts;
    Tmpfs fs(mounts / "fs", "32m");
    if (!fs.mounted()) {
        std::cout << "SKIP: a full disk at start: cannot mount a tmpfs here (needs root with "
                     "CAP_SYS_ADMIN)\n";
        return;
    }
    Rack rack(filling_board("1500"), "", mounts / "fs" / "rack.db");
    std::string port = start_filling(rack);
    const std::string killed = session_with_arcs(port);
    json board;
    rack.daemon().signal(SIGKILL);
    REQUIRE(rack.daemon().wait(5s) >= 0);

    const auto filler = mounts / "fs" / "filler";
    CHECK(fill_file_system(filler) > 0);
    const auto while_full = testing::rackprof({"check", "--db", rack.db().string()});
    INFO(while_full.out, while_full.err);
    CHECK(while_full.exit_code != 1);
    CHECK(while_full.out.find("damaged") == std::string::npos);

    rack.start_daemon();
    port = testing::wait_for_api_port(rack.path("serve.log"));
    REQUIRE(testing::eventually(
        [&] {
            board = get_json(port, "/api/v1/boards/filling");
            return board.is_object() && board["storage_state"] == "storage_error" &&
                   board["counters"]["records_lost_storage"].get<std::uint64_t>() > 0;
        },
        15s));
    CHECK(rack.daemon().running());
    CHECK(rack.log().find("cannot finish the earlier run's sessions") != std::string::npos);

    std::filesystem::remove(filler);
    REQUIRE(testing::eventually(
        [&] { return get_json(port, "/api/v1/sessions/" + killed)["state"] == "interrupted"; },
        20s));
    CHECK(rack.log().find("the earlier run's sessions are finished now") != std::string::npos);
    CHECK(testing::eventually(
        [&] { return get_json(port, "/api/v1/boards/filling")["storage_state"] == "ok"; }, 10s));
    rack.wait_boards();
    rack.stop_daemon();

    const auto after = testing::rackprof({"check", "--db", rack.db().string()});
    CHECK(after.exit_code == 0);
    // The killed session's sums were completed: they equal its stored records.
    storage::SessionStore store(rack.db(), storage::Database::Mode::kReadOnly);
    gmon::Aggregate records;
    store.for_each_record_batch(
        std::stoll(killed),
        [&](std::int64_t, std::span<const protocol::Record> batch) { records.add(batch); });
    CHECK(store.aggregate(std::stoll(killed)) == records);
    CHECK(store.session(std::stoll(killed))->state == "interrupted");
}

TEST_CASE("simulate --boards: one process feeds a rack of ptys; each board stored exactly") {
    testing::TempDir dir;
    const int count = 4;
    {
        std::ofstream config(dir / "rack.toml");
        config << "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\npath = \""
               << (dir / "rack.db").string()
               << "\"\n[links]\nreconnect_min_ms = 20\nreconnect_max_ms = 100\n";
        for (int i = 0; i < count; ++i) {
            config << "[[boards]]\nname = \"b" << i << "\"\nlink = \"serial://"
                   << (dir / "ptys" / ("b" + std::to_string(i))).string() << "\"\n";
        }
    }
    testing::Process feeder(
        testing::rackprof_argv({"simulate", "--boards", std::to_string(count), "--pty-dir",
                                (dir / "ptys").string(), "--model", "blinky,deterministic",
                                "--bytes", "40000", "--rate", "60000", "--truth",
                                (dir / "truth.json").string()}),
        dir / "feeder.log");
    REQUIRE_MESSAGE(
        testing::eventually([&] { return std::filesystem::exists(dir / "ptys" / "b3"); }, 10s),
        testing::read_text(dir / "feeder.log"));
    testing::Process daemon(
        testing::rackprof_argv({"serve", "--config", (dir / "rack.toml").string()}),
        dir / "serve.log");
    REQUIRE(feeder.wait(60s) == 0);
    daemon.signal(SIGTERM);
    REQUIRE(daemon.wait(5s) == 0);
    CHECK(testing::read_text(dir / "feeder.log").find("rack summary boards=4") !=
          std::string::npos);

    const json truth = json::parse(testing::read_text(dir / "truth.json"));
    REQUIRE(truth["boards"].size() == count);
    storage::SessionStore store(dir / "rack.db", storage::Database::Mode::kReadOnly);
    const auto sessions = store.sessions();
    for (int i = 0; i < count; ++i) {
        CAPTURE(i);
        const json& t = truth["boards"][static_cast<std::size_t>(i)];
        CHECK(t["model"] == (i % 2 ? "deterministic" : "blinky"));
        CHECK(t["seed"] == 1 + i);
        const auto& s = only_session_of(sessions, "b" + std::to_string(i));
        CHECK(s.counters.bytes_in == t["wire_bytes"].get<std::uint64_t>());
        CHECK(s.counters.bytes_discarded == 0);
        CHECK(s.counters.records_lost == 0);
        CHECK(store.aggregate(s.id) == aggregate_of(t));
    }
}

TEST_CASE("kill -9: on restart the session is interrupted, what was committed is intact") {
    const std::vector<SimBoard> boards = {
        {"victim", {"--model", "deterministic", "--iterations", "100000", "--rate", "40000"}}};
    Rack rack(boards);
    rack.start_boards();
    rack.start_daemon();
    REQUIRE(testing::eventually(
        [&] { return rack.log().find("[victim] session") != std::string::npos; }, 10s));
    std::this_thread::sleep_for(1500ms);
    rack.daemon().signal(SIGKILL);
    CHECK(rack.daemon().wait(5s) == 128 + SIGKILL);

    // Restarted, the daemon repairs the state (the simulator is still sending) and stops cleanly.
    rack.start_daemon();
    REQUIRE(testing::eventually(
        [&] { return rack.log().find("now marked interrupted") != std::string::npos; }, 10s));
    std::this_thread::sleep_for(300ms);
    rack.stop_daemon();

    storage::SessionStore store(rack.db(), storage::Database::Mode::kReadOnly);
    {
        storage::Statement check = store.db().prepare("PRAGMA integrity_check");
        REQUIRE(check.step());
        CHECK(check.column_text(0) == "ok");
    }
    const auto sessions = store.sessions();
    REQUIRE(sessions.size() == 2);
    const auto& killed = sessions[0];
    CHECK(killed.state == "interrupted");
    CHECK(killed.ended_ns >= killed.spec.started_ns);
    CHECK(sessions[1].state == "completed");
    // About 1.5 s at 40 kB/s was captured; at most the last commit interval is at risk.
    CHECK(killed.counters.bytes_in > 20000);
    // Aggregates, record batches and raw bytes agree with each other.
    gmon::Aggregate from_batches;
    store.for_each_record_batch(
        killed.id, [&](std::int64_t, std::span<const protocol::Record> r) { from_batches.add(r); });
    CHECK(store.aggregate(killed.id) == from_batches);
    std::uint64_t raw = 0;
    store.for_each_chunk(killed.id,
                         [&](std::int64_t, std::span<const std::uint8_t> b) { raw += b.size(); });
    CHECK(raw == killed.counters.bytes_in);
    CHECK(from_batches.total_calls() == killed.counters.arcs);
}

TEST_CASE("framed boards: stored counts equal exactly what was sent, with and without arc cache") {
    const std::vector<SimBoard> boards = {
        {"framed",
         {"--model", "deterministic", "--iterations", "200", "--rate", "60000"},
         "bin",
         4,
         "framed"},
        {"framed-cache",
         {"--model", "blinky", "--iterations", "300", "--rate", "60000", "--arc-cache", "16",
          "--cache-flush", "7"},
         "bin",
         3,
         "framed"},
    };
    Rack rack(boards);
    rack.capture_all();

    storage::SessionStore store(rack.db(), storage::Database::Mode::kReadOnly);
    const auto sessions = store.sessions();
    for (const auto& b : boards) {
        CAPTURE(b.name);
        const auto& s = only_session_of(sessions, b.name);
        const json truth = rack.truth(b.name);
        CHECK(s.state == "completed");
        CHECK(s.spec.protocol == "framed");
        CHECK(store.aggregate(s.id) == aggregate_of(truth));
        CHECK(s.counters.arcs == truth["arcs_sent"].get<std::uint64_t>());
        CHECK(s.counters.pc_samples == truth["pc_samples_sent"].get<std::uint64_t>());
        CHECK(s.counters.bytes_in == truth["wire_bytes"].get<std::uint64_t>());
        CHECK(s.counters.frames == truth["frames_sent"].get<std::uint64_t>());
        CHECK(s.counters.frames_lost == 0);
        CHECK(s.counters.frames_bad == 0);
        CHECK(s.counters.bytes_discarded == 0);
        // The HELLO's text range is kept with the session.
        CHECK(gmon::hex_address(s.target.text_lo) == truth["code_range"]["low"]);
        CHECK(gmon::hex_address(s.target.text_hi) == truth["code_range"]["high"]);
        std::string raw;
        store.for_each_chunk(s.id, [&](std::int64_t, std::span<const std::uint8_t> bytes) {
            raw.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
        });
        CHECK(raw == rack.expected_bytes(b));
    }
    // The arc cache really sent repeats as counts: fewer arc records than calls.
    const json cached = rack.truth("framed-cache");
    CHECK(cached["arcs_sent"].get<std::uint64_t>() * 10 < cached["calls"].get<std::uint64_t>());
    CHECK(aggregate_of(cached).total_calls() == cached["calls"].get<std::uint64_t>());
    // Re-decoding the stored bytes gives the same profile as the live decode.
    const auto& first = only_session_of(sessions, "framed-cache");
    const auto live = testing::rackprof({"convert", "--db", rack.db().string(), "--session",
                                         std::to_string(first.id), "--report", "json", "-o",
                                         rack.path("live.gmon").string()});
    const auto again = testing::rackprof({"convert", "--db", rack.db().string(), "--session",
                                          std::to_string(first.id), "--redecode", "--report",
                                          "json", "-o", rack.path("again.gmon").string()});
    REQUIRE(live.exit_code == 0);
    REQUIRE(again.exit_code == 0);
    CHECK(json::parse(live.out)["raw"] == json::parse(again.out)["raw"]);
    CHECK(json::parse(again.out)["source"]["decoder"]["frames"] == first.counters.frames);
    // No ELF: the histogram spans the text range the target announced.
    const auto histograms = json::parse(live.out)["raw"]["histograms"];
    REQUIRE(histograms.size() == 1);
    CHECK(histograms[0]["low_pc"] == cached["code_range"]["low"]);
    CHECK(histograms[0]["high_pc"] == cached["code_range"]["high"]);
}

TEST_CASE("framed board on a link losing whole frames: frames_lost equals the frames dropped") {
    const std::vector<SimBoard> boards = {
        {"lossy",
         {"--model", "deterministic", "--iterations", "400", "--rate", "60000", "--drop-frames",
          "0.05", "--seed", "11"},
         "bin",
         4,
         "framed"},
    };
    Rack rack(boards);
    rack.capture_all();

    storage::SessionStore store(rack.db(), storage::Database::Mode::kReadOnly);
    const auto sessions = store.sessions();
    const auto& s = only_session_of(sessions, "lossy");
    const json truth = rack.truth("lossy");
    const auto dropped = truth["faults"]["frames_dropped"].get<std::uint64_t>();
    CHECK(dropped > 5);
    CHECK(s.counters.frames_lost == dropped);
    CHECK(s.counters.frames == truth["frames_sent"].get<std::uint64_t>() - dropped);
    CHECK(s.counters.frames_bad == 0);
    CHECK(s.counters.bytes_discarded == 0);
    CHECK(s.counters.bytes_in == truth["wire_bytes"].get<std::uint64_t>());
    // Fewer records arrived than were sent, and every one that arrived was sent.
    const auto stored = store.aggregate(s.id);
    const auto sent = aggregate_of(truth);
    CHECK(stored.total_calls() < sent.total_calls());
    std::map<std::pair<std::uint64_t, std::uint64_t>, std::uint64_t> sent_counts;
    for (const auto& arc : sent.arcs()) sent_counts[{arc.from_pc, arc.self_pc}] = arc.count;
    for (const auto& arc : stored.arcs()) {
        CHECK(arc.count <= sent_counts[{arc.from_pc, arc.self_pc}]);
    }
    INFO(rack.log());
    CHECK(rack.log().find("[lossy] session 1 frames: " + std::to_string(s.counters.frames) +
                          " good, 0 bad, " + std::to_string(dropped) + " lost") !=
          std::string::npos);
}

// A host executable with a GNU build-id: the simulator's `elf` model sends its build-id in the
// HELLO, as firmware built with --build-id does. Returns "" without a C compiler.
std::filesystem::path build_firmware(const testing::TempDir& dir, const std::string& name,
                                     const std::string& flags) {
    std::ofstream(dir / "fw.c")
        << "__attribute__((noinline)) int leaf(int x) { return x * 3 + 1; }\n"
           "__attribute__((noinline)) int middle(int x) { return leaf(x) + leaf(x + 1); }\n"
           "int main(int argc, char** argv) { (void)argv; return middle(argc); }\n";
    const auto out = dir / name;
    const std::string cmd = "cc " + flags + " -no-pie -Wl,--build-id=sha1 -o " + out.string() +
                            " " + (dir / "fw.c").string() + " 2>/dev/null";
    return std::system(cmd.c_str()) == 0 ? out : std::filesystem::path();
}

TEST_CASE("a framed target's HELLO picks the uploaded ELF by build-id, or flags a wrong one") {
    testing::TempDir build;
    const auto firmware = build_firmware(build, "fw.elf", "-O1");
    const auto other = build_firmware(build, "other.elf", "-O0");
    if (firmware.empty() || other.empty()) {
        MESSAGE("SKIP: no C compiler (cc) to build an ELF with a build-id");
        return;
    }
    const std::string id = gmon::Symbolizer::load(firmware)->build_id();
    const std::string other_id = gmon::Symbolizer::load(other)->build_id();
    REQUIRE(!id.empty());
    REQUIRE(id != other_id);
    const std::vector<std::string> sim = {"--model",      "elf", "--elf",  firmware.string(),
                                          "--iterations", "200", "--rate", "60000"};
    SimBoard by_id{"by-id", sim, "bin", 4, "framed"};
    SimBoard wrong{"wrong", sim, "bin", 4, "framed", other.string()};
    Rack rack({by_id, wrong});
    std::filesystem::create_directories(rack.path("firmware"));
    std::filesystem::copy_file(firmware, rack.path("firmware") / (id + ".elf"));
    rack.capture_all();

    const std::string log = rack.log();
    INFO(log);
    CHECK(log.find("[by-id] firmware picked by build-id: " +
                   (rack.path("firmware") / (id + ".elf")).string()) != std::string::npos);
    CHECK(log.find("[wrong] the configured ELF " + other.string() + " has build-id " + other_id +
                   ", but the target runs " + id) != std::string::npos);
    storage::SessionStore store(rack.db(), storage::Database::Mode::kReadOnly);
    const auto sessions = store.sessions();
    const auto& picked = only_session_of(sessions, "by-id");
    CHECK(picked.target.build_id == id);
    CHECK(picked.spec.elf_build_id == id);
    CHECK(picked.spec.elf_path == (rack.path("firmware") / (id + ".elf")).string());
    CHECK(store.aggregate(picked.id) == aggregate_of(rack.truth("by-id")));
    const auto& kept = only_session_of(sessions, "wrong");
    CHECK(kept.target.build_id == id);
    CHECK(kept.spec.elf_path == other.string());  // the configured ELF stays, with the warning
}

// A target whose HELLO names another core family than the board's ELF (a RISC-V core, a host
// ELF here): the ELF is not used for it, and the session it was started with keeps none.
TEST_CASE("a framed target of another core than its ELF: the ELF refused, the session has none") {
    testing::TempDir build;
    const auto firmware = build_firmware(build, "fw.elf", "-O1");
    if (firmware.empty()) {
        MESSAGE("SKIP: no C compiler (cc) to build an ELF with a build-id");
        return;
    }
    const std::vector<std::string> sim = {"--model", "elf",      "--elf",        firmware.string(),
                                          "--arch",  "rv32imac", "--iterations", "200",
                                          "--rate",  "60000"};
    Rack rack({SimBoard{"rv", sim, "bin", 4, "framed", firmware.string()}});
    rack.capture_all();
    const std::string log = rack.log();
    INFO(log);
    CHECK(log.find("[rv] the target says it is rv32imac (riscv), but fw.elf is x86-64 code "
                   "(x86-64): not using that ELF for this target") != std::string::npos);
    storage::SessionStore store(rack.db(), storage::Database::Mode::kReadOnly);
    const auto sessions = store.sessions();
    const auto& session = only_session_of(sessions, "rv");
    CHECK(session.spec.elf_path.empty());
    CHECK(session.spec.elf_build_id.empty());
    CHECK(session.spec.arch == "rv32imac");  // the HELLO's, over the ELF's
    CHECK(session.counters.pc_samples == aggregate_of(rack.truth("rv")).total_samples());
}

TEST_CASE("bad configuration: exit 2 naming file, line and key; nothing started") {
    testing::TempDir dir;
    std::ofstream(dir / "bad.toml")
        << "[storage]\npath = \"" << (dir / "x.db").string()
        << "\"\n[[boards]]\nname = \"a\"\nlink = \"serial:///dev/null\"\naddr_bytes = 7\n";
    const auto r = testing::rackprof({"serve", "--config", (dir / "bad.toml").string()});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("bad.toml:6: boards[0].addr_bytes: must be 3 or 4") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dir / "x.db"));
    const auto missing = testing::rackprof({"serve", "--config", (dir / "none.toml").string()});
    CHECK(missing.exit_code == 2);
}

TEST_CASE(
    "a missing device and a non-serial device: clear errors, the other boards keep capturing") {
    const std::vector<SimBoard> boards = {
        {"good", {"--model", "blinky", "--iterations", "60", "--rate", "40000"}}};
    testing::TempDir other;
    std::ofstream(other / "not-a-tty") << "plain file";
    Rack rack(boards, "[[boards]]\nname = \"absent\"\nlink = \"serial://" +
                          (other / "ttyUSB9").string() +
                          "\"\n[[boards]]\nname = \"plain\"\nlink = \"serial://" +
                          (other / "not-a-tty").string() + "\"\n");
    rack.capture_all();
    const std::string log = rack.log();
    CHECK(log.find("[absent] cannot connect: " + (other / "ttyUSB9").string() +
                   ": No such file or directory") != std::string::npos);
    CHECK(log.find("[plain] cannot connect:") != std::string::npos);
    storage::SessionStore store(rack.db(), storage::Database::Mode::kReadOnly);
    const auto sessions = store.sessions();
    const auto& good = only_session_of(sessions, "good");
    CHECK(store.aggregate(good.id) == aggregate_of(rack.truth("good")));
    for (const auto& s : sessions) CHECK(s.spec.board == "good");
}

}  // namespace
}  // namespace rackprof

namespace rackprof {
namespace {

// A one-shot raw TCP server (what ser2net offers): sends `bytes` to the first client, closes.
class OneShotTcpServer {
  public:
    explicit OneShotTcpServer(std::string bytes) : bytes_(std::move(bytes)) {
        thread_ = std::thread([this] {
            const int client = ::accept(listener_.fd, nullptr, nullptr);
            ::close(listener_.fd);  // later reconnects are refused, as when the server went away
            std::size_t done = 0;
            while (client >= 0 && done < bytes_.size()) {
                const ssize_t n = ::send(client, bytes_.data() + done,
                                         std::min<std::size_t>(4096, bytes_.size() - done), 0);
                if (n <= 0) break;
                done += static_cast<std::size_t>(n);
            }
            if (client >= 0) ::close(client);
        });
    }
    ~OneShotTcpServer() {
        if (thread_.joinable()) thread_.join();
    }
    int port() const { return listener_.port; }

  private:
    std::string bytes_;
    testing::LoopbackListener listener_ = testing::listen_loopback();
    std::thread thread_;
};

TEST_CASE("TCP and file links: stored exactly; a finished file completes its session") {
    testing::TempDir dir;
    const auto capture = dir / "capture.bin";
    const auto truth_path = dir / "truth.json";
    REQUIRE(testing::rackprof({"simulate", "--model", "deterministic", "--iterations", "300", "-o",
                               capture.string(), "--truth", truth_path.string()})
                .exit_code == 0);
    const json truth = json::parse(testing::read_text(truth_path));
    OneShotTcpServer server(testing::read_text(capture));
    {
        std::ofstream config(dir / "rack.toml");
        config << "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\npath = \""
               << (dir / "rack.db").string() << "\"\n"
               << "[[boards]]\nname = \"tcp\"\nlink = \"tcp://127.0.0.1:" << server.port() << "\"\n"
               << "[[boards]]\nname = \"file\"\nlink = \"file://" << capture.string()
               << "?pace=fast\"\n";
    }
    testing::Process daemon(
        testing::rackprof_argv({"serve", "--config", (dir / "rack.toml").string()}),
        dir / "serve.log");
    const auto log = [&] { return testing::read_text(dir / "serve.log"); };
    REQUIRE(testing::eventually(
        [&] {
            return log().find("[file] session") != std::string::npos &&
                   log().find("completed") != std::string::npos &&
                   log().find("[tcp] disconnected") != std::string::npos;
        },
        20s));
    daemon.signal(SIGTERM);
    REQUIRE(daemon.wait(5s) == 0);
    INFO(log());
    CHECK(log().find("[file] link finished: end of file") != std::string::npos);

    storage::SessionStore store(dir / "rack.db", storage::Database::Mode::kReadOnly);
    const auto sessions = store.sessions();
    for (const char* board : {"tcp", "file"}) {
        CAPTURE(board);
        const auto& s = only_session_of(sessions, board);
        CHECK(s.state == "completed");
        CHECK(s.counters.bytes_in == truth["wire_bytes"].get<std::uint64_t>());
        CHECK(store.aggregate(s.id) == aggregate_of(truth));
    }
}

}  // namespace
}  // namespace rackprof
