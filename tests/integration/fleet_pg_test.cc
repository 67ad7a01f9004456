// The fleet store on a real PostgreSQL server that the test starts itself (initdb + pg_ctl in a
// temporary folder, a Unix socket there and no TCP; as root, the server runs as `nobody`, since
// postgres refuses root). Several benches, each a real daemon with its own SQLite database and
// configuration, push concurrently; the server stops and comes back while a bench has sessions
// to push; a fleet-only daemon (no boards) and `rackprof fleet` serve the merged profile. Every
// count is compared with the sum of the simulator's exact truths: nothing lost, nothing doubled.
#include <signal.h>

#include <doctest/doctest.h>

#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "gmon/function_index.h"
#include "gmon/gmon_reader.h"
#include "storage/fleet/fleet_store.h"
#include "storage/fleet/pg.h"
#include "storage/session_store.h"
#include "tests/integration/test_support.h"
#include "tests/integration/truth_counts.h"
#include "tests/support/pg_server.h"

namespace rackprof {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

using testing::add_truth;
using testing::Counts;
using testing::counts_in;

void add(Counts& to, const Counts& from) {
    for (const auto& [arc, n] : from.arcs) to.arcs[arc] += n;
    to.samples += from.samples;
}

// A bench: its own folder, database and configuration, two boards of the one build (the
// deterministic model, its iterations its own) replayed from capture files.
struct Bench {
    std::string name;
    std::filesystem::path dir;
    Counts truth;
    std::unique_ptr<testing::Process> daemon;
    std::string port;
};

void make_bench(Bench& b, const std::filesystem::path& root, const std::string& url, int seed) {
    b.dir = root / b.name;
    std::filesystem::create_directories(b.dir);
    std::ostringstream common;
    common << "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\npath = \""
           << (b.dir / "rack.db").string() << "\"\n[fleet]\nurl = \"" << url << "\"\nbench = \""
           << b.name << "\"\npush_interval_ms = 100\nretry_max_ms = 400\n";
    // The same bench started again without boards (its captures are not replayed anew).
    std::ofstream(b.dir / "restart.toml") << common.str();
    std::ofstream config(b.dir / "rack.toml");
    config << common.str();
    for (int i = 0; i < 2; ++i) {
        const auto n = std::to_string(i);
        REQUIRE(testing::rackprof({"simulate", "--model", "deterministic", "--iterations",
                                   std::to_string(2 + seed * 2 + i), "-o",
                                   (b.dir / ("det" + n + ".bin")).string(), "--truth",
                                   (b.dir / ("det" + n + ".json")).string(), "--write-elf",
                                   (b.dir / "det.elf").string()})
                    .exit_code == 0);
        add_truth(b.truth, b.dir / ("det" + n + ".json"));
        config << "[[boards]]\nname = \"det-" << i << "\"\nlink = \"file://"
               << (b.dir / ("det" + n + ".bin")).string() << "?pace=fast\"\nelf = \""
               << (b.dir / "det.elf").string() << "\"\ntags = [\"nightly\"]\n";
    }
}

void start(Bench& b, const std::string& config = "rack.toml") {
    b.daemon = std::make_unique<testing::Process>(
        testing::rackprof_argv({"serve", "--config", (b.dir / config).string()}),
        b.dir / "serve.log");
    b.port = testing::wait_for_api_port(b.dir / "serve.log");
}

json readiness(const Bench& b) {
    const auto reply = testing::http_get(b.port, "/readyz");
    return reply.status == 200 ? json::parse(reply.body) : json();
}

// Both sessions captured and pushed (the pusher says so, with nothing pending).
bool pushed_all(const Bench& b) {
    const json r = readiness(b);
    return r.is_object() && r.contains("fleet") && r["fleet"]["pushed"] == 2 &&
           r["fleet"]["pending"] == 0 && r["fleet"]["state"] == "ok";
}

std::string build_id_of(const Bench& b) {
    const json sessions = json::parse(testing::http_get(b.port, "/api/v1/sessions").body);
    return sessions.at(0)["build_id"].get<std::string>();
}

TEST_CASE("fleet store on PostgreSQL: benches push concurrently, survive an outage, fleet serves") {
    testing::TempDir dir;
    const auto server = testing::PgServer::start_or_skip(dir.path(), "fleet store tests");
    if (!server) return;
    auto& pg = *server;
    const std::string url = pg.url();

    // Three benches capture and push at the same time.
    std::vector<Bench> benches(4);
    for (int i = 0; i < 4; ++i) {
        benches[i].name = "bench-" + std::to_string(i);
        make_bench(benches[i], dir.path(), url, i);
    }
    for (int i = 0; i < 3; ++i) start(benches[i]);
    for (int i = 0; i < 3; ++i) {
        CAPTURE(benches[i].name);
        CHECK(testing::eventually([&] { return pushed_all(benches[i]); }, 30s));
    }
    const std::string build_id = build_id_of(benches[0]);
    for (int i = 1; i < 3; ++i) REQUIRE(build_id_of(benches[i]) == build_id);

    // The server goes away; a fourth bench captures meanwhile and cannot push: it says so and
    // retries with backoff. The server comes back: it catches up.
    REQUIRE(pg.stop());
    start(benches[3]);
    CHECK(testing::eventually(
        [&] {
            const json r = readiness(benches[3]);
            return r.is_object() && r["fleet"]["state"] == "retrying" &&
                   r["fleet"]["last_error"].is_string() && r["fleet"]["failures"] >= 2;
        },
        20s));
    // It never reached the fleet: how many of its sessions the fleet lacks is unknown, not 0
    // (a 0 would silence the alert pending exists for). Bench 1 reached it: its count stands,
    // counted in its own database.
    CHECK(readiness(benches[3])["fleet"]["pending"].is_null());
    CHECK(testing::eventually(
        [&] {
            const json r = readiness(benches[1]);
            return r.is_object() && r["fleet"]["state"] == "retrying" &&
                   r["fleet"]["pending"] == 0;
        },
        30s));
    // Bench 0 restarts while the server is down: what it pushed before stays pushed, once.
    benches[0].daemon->signal(SIGTERM);
    CHECK(benches[0].daemon->wait(10s) == 0);
    start(benches[0], "restart.toml");
    REQUIRE(pg.start());
    CHECK(testing::eventually([&] { return pushed_all(benches[3]); }, 30s));
    CHECK(testing::eventually(
        [&] {
            const json r = readiness(benches[0]);
            return r.is_object() && r["fleet"]["state"] == "ok" && r["fleet"]["pending"] == 0;
        },
        30s));
    CHECK(readiness(benches[0])["fleet"]["pushed"] == 0);  // all there already: none again

    Counts fleet_truth;
    for (const auto& b : benches) add(fleet_truth, b.truth);

    // The store itself: eight sessions, no more, each bench's two; the figures of a push.
    {
        storage::fleet::FleetConnection connection;
        connection.url = url;
        storage::fleet::FleetStore store(connection);
        CHECK(store.count("sessions") == 8);
        for (const auto& b : benches) CHECK(store.pushed(b.name).size() == 2);
        // The build sums kept at push time add up to the sessions' own rows: for the whole
        // build (every bench's group covered), and for every other session (none covered).
        std::vector<std::int64_t> all, some;
        for (const auto& s : store.sessions({})) {
            all.push_back(s.id);
            if (s.id % 2) some.push_back(s.id);
        }
        CHECK(store.sum(all) == store.sum_of_session_rows(all));
        CHECK(store.sum(some) == store.sum_of_session_rows(some));
        CHECK(store.sum(all).total_samples() == fleet_truth.samples);
        std::cout << "fleet store: " << store.session_bytes() / 8
                  << " bytes of PostgreSQL per session; bench-3's last push took "
                  << readiness(benches[3])["fleet"]["last_push_ms"].get<double>() << " ms\n";
    }

    // `rackprof fleet`: eight sessions, no more; the merged gmon.out is exactly the sum.
    const auto listed =
        testing::rackprof({"fleet", "sessions", "--url", url, "--select", "build_id=" + build_id});
    REQUIRE(listed.exit_code == 0);
    CHECK(json::parse(listed.out).size() == 8);
    const auto cli_gmon = dir / "cli.gmon.out";
    const auto exported =
        testing::rackprof({"fleet", "profile", "--url", url, "--select", "build_id=" + build_id,
                           "--export", "gmon", "-o", cli_gmon.string()});
    REQUIRE(exported.exit_code == 0);
    CHECK(counts_in(cli_gmon) == fleet_truth);

    // A fleet-only daemon: no boards, the URL from the environment. It has no ELF of its own:
    // functions are named from the firmware the benches pushed.
    {
        std::ofstream config(dir / "fleet.toml");
        config << "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\npath = \""
               << (dir / "fleet.db").string() << "\"\n";
    }
    testing::Process fleet(
        testing::rackprof_argv({"serve", "--config", (dir / "fleet.toml").string()}),
        dir / "fleet.log", {}, {"RACKPROF_FLEET_URL=" + url});
    const std::string port = testing::wait_for_api_port(dir / "fleet.log");
    const auto reply = testing::http_get(port, "/api/v1/profile?build_id=" + build_id);
    REQUIRE(reply.status == 200);
    const json profile = json::parse(reply.body);
    CHECK(profile["selection"]["sessions"].size() == 8);
    CHECK(profile["selection"]["boards"].size() == 8);  // bench/board
    CHECK(profile["total_samples"] == fleet_truth.samples);
    // The spread, from the board sums kept at push time: each bench's boards add up to its
    // truth, and every function with samples is there.
    const json& spread = profile["spread"];
    REQUIRE(spread["boards"].size() == 8);
    std::map<std::string, std::uint64_t> bench_samples;
    for (const auto& b : spread["boards"]) {
        const std::string board = b["board"];
        bench_samples[board.substr(0, board.find('/'))] += b["samples"].get<std::uint64_t>();
    }
    for (const auto& b : benches) CHECK(bench_samples[b.name] == b.truth.samples);
    CHECK(spread["functions_omitted"] == 0);
    CHECK_FALSE(spread["functions"].empty());
    for (const auto& f : spread["functions"]) {
        std::uint64_t k = 0;
        for (const auto& row : f["boards"]) k += row["samples"].get<std::uint64_t>();
        CHECK(k > 0);
    }
    const auto served = dir / "fleet.gmon.out";
    REQUIRE(testing::http_get(port, "/api/v1/profile/export/gmon?build_id=" + build_id, served)
                .status == 200);
    CHECK(counts_in(served) == fleet_truth);
    // bench= narrows to one bench's sessions: its own truth.
    const auto one = dir / "bench1.gmon.out";
    REQUIRE(testing::http_get(port, "/api/v1/profile/export/gmon?bench=bench-1&tag=nightly", one)
                .status == 200);
    CHECK(counts_in(one) == benches[1].truth);
    // Diff of two benches over HTTP: the same build, different iteration counts.
    CHECK(testing::http_get(port, "/api/v1/diff?a=bench%3Dbench-0&b=bench%3Dbench-3").status ==
          200);
    CHECK(testing::http_get(port, "/api/v1/profile?bench=nobody").status == 404);

    // The URL is logged without secrets; a password in the URL is refused, and not echoed.
    CHECK(testing::read_text(dir / "fleet.log").find("fleet: selections are served from") !=
          std::string::npos);
    const auto with_password = testing::rackprof({"fleet", "sessions", "--url",
                                                  "postgresql://rackprof:s3cret@localhost/postgres",
                                                  "--select", "build_id=" + build_id});
    CHECK(with_password.exit_code == 2);
    CHECK(with_password.err.find("password") != std::string::npos);
    CHECK(with_password.err.find("s3cret") == std::string::npos);
}

// Fleet retention: `rackprof fleet prune` against the real server. A month wholly older than
// the cutoff loses its partitions; in a month that also holds a session that ended later, the
// old one goes row by row; young sessions and their sums stay exact; a bench's push of a pruned
// session is refused from then on.
TEST_CASE("fleet store on PostgreSQL: fleet prune drops old months and rows, keeps the young") {
    testing::TempDir dir;
    const auto server = testing::PgServer::start_or_skip(dir.path(), "fleet retention test");
    if (!server) return;
    auto& pg = *server;
    const std::string url = pg.url();
    storage::fleet::FleetConnection connection;
    connection.url = url;
    storage::fleet::FleetStore store(connection);

    constexpr std::int64_t kDay = 86'400'000'000'000;
    const std::int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
    // id, started and ended (days ago), and a distinct aggregate for each.
    struct Old {
        std::int64_t id;
        std::int64_t started_days;
        std::int64_t ended_days;
    };
    const Old plan[] = {
        {1, 400, 400},  // its month is wholly old: dropped as partitions
        {2, 35, 35},    // old, but its month also holds 3: deleted as rows
        {3, 35, 1},     // started with 2, ended yesterday: kept
        {4, 2, 2},      // young: kept
    };
    std::map<std::int64_t, gmon::Aggregate> sums;
    std::map<std::int64_t, storage::SessionInfo> infos;
    for (const auto& p : plan) {
        storage::fleet::PushedSession s;
        s.bench = "retention";
        s.info.id = p.id;
        s.info.spec.board = "b" + std::to_string(p.id);
        s.info.spec.link = "sim://x";
        s.info.spec.started_ns = now - p.started_days * kDay;
        s.info.ended_ns = now - p.ended_days * kDay + 1;
        s.info.state = "completed";
        s.build_id = "0123retention";  // so the build sums (one group per month) take them too
        gmon::Aggregate a;
        a.add_arc(0x1000, 0x2000 + 4 * static_cast<std::uint64_t>(p.id), 10 * p.id);
        a.add_pc(0x3000 + 2 * static_cast<std::uint64_t>(p.id), 100 * p.id);
        a.add_pc(0x3000, 7);
        REQUIRE(store.push_session(s, a, nullptr));
        sums[p.id] = a;
        infos[p.id] = s.info;
    }
    REQUIRE(store.count("sessions") == 4);
    std::string old_month;
    {
        // The partition suffix of session 1's month, as the store names it.
        const auto listed =
            testing::rackprof({"fleet", "sessions", "--url", url, "--select", "bench=retention"});
        REQUIRE(listed.exit_code == 0);
        REQUIRE(json::parse(listed.out).size() == 4);
    }

    const auto pruned =
        testing::rackprof({"fleet", "prune", "--url", url, "--keep-sessions-days", "30"});
    REQUIRE(pruned.exit_code == 0);
    INFO(pruned.err);
    const json report = json::parse(pruned.out);
    CHECK(report["sessions_deleted"] == 2);
    REQUIRE(report["months_dropped"].size() >= 1);
    old_month = report["months_dropped"].at(0).get<std::string>();
    CHECK(pruned.err.find("2 session(s) that ended more than 30 day(s) ago removed") !=
          std::string::npos);

    // What is left: 3 and 4, their sums exact; none of 1's or 2's counts anywhere.
    const auto left = store.sessions({});
    REQUIRE(left.size() == 2);
    std::set<std::string> boards;
    for (const auto& s : left) boards.insert(s.spec.board);
    CHECK(boards == std::set<std::string>{"retention/b3", "retention/b4"});
    gmon::Aggregate expected = sums[3];
    expected.merge(sums[4]);
    CHECK(store.sum({left[0].id, left[1].id}) == expected);
    CHECK(store.sum({left[0].id, left[1].id}) ==
          store.sum_of_session_rows({left[0].id, left[1].id}));
    // The build sums: 1's month dropped with its partitions, the group that lost 2 (3's month)
    // deleted (read from its rows from now on), 4's kept.
    CHECK(store.count("build_groups") == 1);
    // The board sums are per board: 1's dropped with its month, 2's deleted, 3's and 4's kept.
    CHECK(store.count("board_groups") == 2);
    CHECK(store.count("sessions") == 2);
    CHECK(store.count("arcs") == 2);
    CHECK(store.count("pc_samples") == 4);
    // Session 1's month: its three partitions are gone; the selection of its board is empty.
    CHECK(old_month.size() == 8);
    {
        storage::fleet::PgConnection sql(storage::fleet::connection_parameters(connection));
        for (const char* table : {"sessions_", "arcs_", "pc_samples_", "build_groups_",
                                  "build_arcs_", "build_pcs_", "board_groups_", "board_functions_"})
            CHECK(sql.query("SELECT to_regclass($1)", {table + old_month}).is_null(0, 0));
    }
    CHECK(testing::rackprof(
              {"fleet", "sessions", "--url", url, "--select", "bench=retention&board=retention/b1"})
              .exit_code == 2);  // an empty selection

    // A bench pushing 1 or 2 again (its own copies stay) is refused; young pushes still go in.
    CHECK(store.retained_from() > 0);
    storage::fleet::PushedSession again{"retention", infos[2], {}, ""};
    CHECK_FALSE(store.push_session(again, sums[2], nullptr));
    storage::fleet::PushedSession fresh{"retention", infos[4], {}, ""};
    fresh.info.id = 5;
    CHECK(store.push_session(fresh, sums[4], nullptr));
    CHECK(store.count("sessions") == 3);

    // A second prune finds nothing; a bad rule is a usage error.
    const auto second =
        testing::rackprof({"fleet", "prune", "--url", url, "--keep-sessions-days", "30"});
    REQUIRE(second.exit_code == 0);
    CHECK(json::parse(second.out)["sessions_deleted"] == 0);
    CHECK(testing::rackprof({"fleet", "prune", "--url", url, "--keep-sessions-days", "-3"})
              .exit_code == 2);
}

}  // namespace
}  // namespace rackprof

namespace rackprof {
namespace {

// What the board sums must equal: each board's calls, samples and samples by function from its
// selected sessions' own rows.
void check_board_sums(storage::fleet::FleetStore& store, const std::vector<std::int64_t>& ids,
                      const gmon::FunctionIndex& index) {
    std::vector<std::uint64_t> functions;
    for (const auto& f : index.symbols()) functions.push_back(f.addr);
    std::map<std::string, std::vector<std::int64_t>> by_board;
    storage::fleet::FleetFilter filter;
    filter.sessions = ids;
    for (const auto& s : store.sessions(filter)) by_board[s.spec.board].push_back(s.id);
    const auto sums = store.board_sums(ids, index, functions);
    REQUIRE(sums.size() == by_board.size());
    for (const auto& b : sums) {
        CAPTURE(b.board);
        REQUIRE(by_board.count(b.board));
        const auto rows = store.sum_of_session_rows(by_board.at(b.board));
        CHECK(b.calls == rows.total_calls());
        CHECK(b.samples == rows.total_samples());
        std::map<std::uint64_t, std::uint64_t> expected;
        for (const auto& pc : rows.pc_samples()) {
            if (const auto* f = index.holding(pc.pc)) expected[f->addr] += pc.count;
        }
        CHECK(b.function_samples == expected);
        CHECK_FALSE(expected.empty());
    }
}

}  // namespace

// The per-board sums kept at push time (fleet schema 4), which a fleet profile's spread reads:
// exact against the sessions' own rows whether a board's group is read whole (every session of
// it selected, all pushed with the ELF), from rows (some selected), or not whole (a session
// pushed without the ELF), and only the functions asked for come back.
TEST_CASE("fleet store on PostgreSQL: per-board sums for the spread match the sessions' rows") {
    testing::TempDir dir;
    const auto server = testing::PgServer::start_or_skip(dir.path(), "fleet board sums test");
    if (!server) return;
    auto& pg = *server;
    storage::fleet::FleetConnection connection;
    connection.url = pg.url();
    storage::fleet::FleetStore store(connection);
    const auto elf_path = dir.path() / "det.elf";
    REQUIRE(testing::rackprof({"simulate", "--model", "deterministic", "--iterations", "2", "-o",
                               (dir.path() / "det.bin").string(), "--write-elf", elf_path.string()})
                .exit_code == 0);
    const auto elf = gmon::Symbolizer::load(elf_path);
    const gmon::FunctionIndex index(*elf);
    REQUIRE(index.symbols().size() >= 3);

    // Three boards on two benches, three sessions each; board c's second session is pushed
    // without its ELF. PCs inside functions and a few outside any.
    std::mt19937_64 rng(42);
    std::int64_t local = 0;
    std::vector<std::int64_t> firsts;
    for (const auto& [bench, board] :
         {std::pair{"bench-a", "a"}, std::pair{"bench-a", "b"}, std::pair{"bench-b", "c"}}) {
        for (int i = 0; i < 3; ++i) {
            storage::fleet::PushedSession s;
            s.bench = bench;
            s.info.id = ++local;
            s.info.spec.board = board;
            s.info.spec.link = "sim://x";
            s.info.spec.started_ns = 1'790'000'000'000'000'000 + local * 1'000'000'000;
            s.info.ended_ns = s.info.spec.started_ns + 1'000'000'000;
            s.info.state = "completed";
            s.build_id = "0123b0a4d5";
            gmon::Aggregate a;
            for (const auto& f : index.symbols()) {
                a.add_pc(f.addr + 2 * (rng() % ((f.end_addr - f.addr) / 2 + 1)), 1 + rng() % 90);
                a.add_arc(f.addr, index.symbols().front().addr + 4, 1 + rng() % 40);
            }
            a.add_pc(0x10, 5 + rng() % 5);  // in no function
            const bool with_elf = !(std::string(board) == "c" && i == 1);
            REQUIRE(store.push_session(s, a, with_elf ? elf : nullptr));
        }
    }
    std::vector<std::int64_t> all;
    for (const auto& s : store.sessions({})) all.push_back(s.id);
    REQUIRE(all.size() == 9);
    CHECK(store.count("board_groups") == 3);
    SUBCASE("whole groups, and board c's from its rows") {
        check_board_sums(store, all, index);
    }
    SUBCASE("one session of each board: every board from its rows") {
        check_board_sums(store, {all[0], all[3], all[6]}, index);
    }
    SUBCASE("only the functions asked for") {
        const std::uint64_t first = index.symbols().front().addr;
        for (const auto& b : store.board_sums(all, index, {first})) {
            CHECK(b.function_samples.size() == 1);
            CHECK(b.function_samples.count(first) == 1);
        }
    }
}

// An idle bench that has pushed many sessions: a round reads what changed since the last, not
// every session on both sides (which cost an idle daemon a tenth of a core at 10^5 sessions,
// and PostgreSQL the same).
TEST_CASE("fleet store on PostgreSQL: an idle bench's rounds read neither database whole") {
    testing::TempDir dir;
    const auto server = testing::PgServer::start_or_skip(dir.path(), "fleet idle test");
    if (!server) return;
    const std::string url = server->url();
    constexpr int kSessions = 2000;
    const std::int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
    {
        storage::SessionStore local(dir.path() / "rack.db");
        storage::Transaction t(local.db());
        storage::NewSession spec;
        spec.board = "b";
        spec.link = "sim://blinky";
        for (int i = 0; i < kSessions; ++i) {
            spec.started_ns = now - (kSessions - i) * 1'000'000'000LL;
            const auto id = local.create_session(spec);
            local.end_session(id, "completed", spec.started_ns + 1000);
            local.seal_sums(id);  // as the storage writer leaves a session it closes
        }
        t.commit();
    }
    std::ofstream(dir.path() / "rack.toml")
        << "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\npath = \""
        << (dir.path() / "rack.db").string() << "\"\n[fleet]\nurl = \"" << url
        << "\"\nbench = \"idle\"\npush_interval_ms = 100\n";
    testing::Process daemon(
        testing::rackprof_argv({"serve", "--config", (dir.path() / "rack.toml").string()}),
        dir.path() / "serve.log");
    const std::string port = testing::wait_for_api_port(dir.path() / "serve.log");
    const auto fleet = [&] {
        const auto reply = testing::http_get(port, "/readyz");
        return reply.status == 200 ? json::parse(reply.body)["fleet"] : json();
    };
    REQUIRE(testing::eventually(
        [&] { return fleet().is_object() && fleet()["pushed"] == kSessions; }, 120s, 100ms));
    CHECK(fleet()["pending"] == 0);

    // Rows PostgreSQL read from the sessions table's partitions, and the daemon's CPU, over
    // three idle seconds: about 30 rounds.
    storage::fleet::FleetConnection connection;
    connection.url = url;
    storage::fleet::PgConnection sql(storage::fleet::connection_parameters(connection));
    const auto rows_read = [&] {
        return sql
            .query("SELECT COALESCE(sum(seq_tup_read + COALESCE(idx_tup_fetch, 0)), 0)::bigint "
                   "FROM pg_stat_user_tables WHERE relname LIKE 'sessions%'")
            .integer(0, 0);
    };
    std::this_thread::sleep_for(2s);  // the pushes' own reads reach the statistics
    const std::int64_t rows_before = rows_read();
    const double cpu_before = daemon.cpu_seconds();
    std::this_thread::sleep_for(3s);
    const double cpu = daemon.cpu_seconds() - cpu_before;
    const std::int64_t rows = rows_read() - rows_before;
    std::cout << "FIGURE fleet_pusher_idle.rows_read = " << rows << " in 3 s with " << kSessions
              << " sessions pushed, 100 ms rounds\n"
              << "FIGURE fleet_pusher_idle.cpu = " << cpu * 1000 << " ms in 3 s\n";
    // Less than one whole read of the bench's sessions in 30 rounds.
    CHECK(rows < kSessions);
    CHECK(cpu < 0.3);  // 10 % of a core (idle, it is a few ms a round even under ASan)
    CHECK(fleet()["pending"] == 0);

    // A session that ends now is still pushed at once.
    {
        storage::SessionStore local(dir.path() / "rack.db");
        storage::NewSession spec;
        spec.board = "b";
        spec.link = "sim://blinky";
        spec.started_ns = now;
        local.end_session(local.create_session(spec), "completed", now + 1000);
    }
    CHECK(testing::eventually([&] { return fleet()["pushed"] == kSessions + 1; }, 10s));
}

// A selection wider than the limit is refused after one count, before its sessions are
// loaded, and nothing refused is kept: four such requests left the fleet server holding a
// copy of every session each named.
TEST_CASE("fleet store on PostgreSQL: a selection too wide is counted and refused, not loaded") {
    testing::TempDir dir;
    const auto server = testing::PgServer::start_or_skip(dir.path(), "fleet selection test");
    if (!server) return;
    const std::string url = server->url();
    storage::fleet::FleetConnection connection;
    connection.url = url;
    {
        storage::fleet::FleetStore store(connection);
        storage::fleet::PushedSession s;
        s.bench = "wide";
        s.info.id = 1;
        s.info.spec.board = "b";
        s.info.spec.link = "sim://x";
        s.info.spec.started_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::system_clock::now().time_since_epoch())
                                     .count() -
                                 86'400'000'000'000;
        s.info.ended_ns = s.info.spec.started_ns + 1000;
        s.info.state = "completed";
        gmon::Aggregate a;
        a.add_pc(0x1000, 5);
        REQUIRE(store.push_session(s, a, nullptr));
        // 40 000 more sessions of the same bench, a nanosecond apart (so in the same month).
        storage::fleet::PgConnection sql(storage::fleet::connection_parameters(connection));
        sql.query(
            "INSERT INTO sessions (bench, local_id, board, tags, build_id, started_ns, ended_ns, "
            "state, spec, counters) SELECT bench, local_id + g, board, tags, build_id, "
            "started_ns + g, ended_ns + g, state, spec, counters FROM sessions, "
            "generate_series(1, 40000) g");
        REQUIRE(store.count("sessions") == 40001);
    }
    std::ofstream(dir / "fleet.toml") << "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\npath = \""
                                      << (dir / "fleet.db").string() << "\"\n";
    testing::Process fleet(
        testing::rackprof_argv({"serve", "--config", (dir / "fleet.toml").string()}),
        dir / "fleet.log", {}, {"RACKPROF_FLEET_URL=" + url});
    const std::string port = testing::wait_for_api_port(dir / "fleet.log");
    // No firmware was pushed: the profile cannot name functions (422), its gmon.out can be had.
    const std::string one = "/api/v1/profile/export/gmon?session=1";
    REQUIRE(testing::http_get(port, one).status == 200);
    const long before = fleet.rss_kib();
    for (int i = 0; i < 4; ++i) {  // four different selections: each its own cache entry
        const auto reply =
            testing::http_get(port, "/api/v1/profile?bench=wide&from=" + std::to_string(i + 1));
        CHECK(reply.status == 400);
        CHECK(reply.body.find("40001 sessions, more than 10000") != std::string::npos);
    }
    const long grown_kib = fleet.rss_kib() - before;
    std::cout << "FIGURE fleet_selection_too_wide.rss_growth = +" << grown_kib / 1024
              << " MiB for 4 refused selections of 40001 sessions\n";
    CHECK(grown_kib < 16 * 1024);  // loaded and kept, they took over 100 MiB
    CHECK(testing::http_get(port, one).status == 200);

    // A NUL in a selection value: the request's fault (400), not an outage (503, and two
    // fresh logins to PostgreSQL per request).
    CHECK(testing::http_get(port, "/api/v1/profile?bench=wide%00x").status == 400);
    // Rows rackprof cannot use answer 502 bad_upstream (the fleet store was reached; the data
    // is wrong), and only the selections that hold them: a malformed stored spec (it answered
    // 503 not_ready) and PC counts whose sum leaves PostgreSQL's bigint (it answered 500).
    {
        storage::fleet::PgConnection sql(storage::fleet::connection_parameters(connection));
        sql.query("UPDATE sessions SET spec = jsonb_set(spec, '{histograms}', '\"[{]\"') "
                  "WHERE local_id = 2");
        sql.query("INSERT INTO pc_samples (session_id, started_ns, pc, count) SELECT id, "
                  "started_ns, 4096, 9223372036854775807 FROM sessions WHERE local_id = 3");
        sql.query("INSERT INTO pc_samples (session_id, started_ns, pc, count) SELECT id, "
                  "started_ns, 4096, 9223372036854775807 FROM sessions WHERE local_id = 4");
    }
    const auto id_of = [&](int local_id) {
        storage::fleet::PgConnection sql(storage::fleet::connection_parameters(connection));
        return sql
            .query("SELECT id FROM sessions WHERE local_id = $1", {std::to_string(local_id)})
            .text(0, 0);
    };
    const auto malformed =
        testing::http_get(port, "/api/v1/profile/export/gmon?session=1," + id_of(2));
    CHECK(malformed.status == 502);
    CHECK(malformed.body.find("bad_upstream") != std::string::npos);
    const auto too_large = testing::http_get(
        port, "/api/v1/profile/export/gmon?session=" + id_of(3) + "," + id_of(4));
    CHECK(too_large.status == 502);
    CHECK(too_large.body.find("bad_upstream") != std::string::npos);
    CHECK(testing::http_get(port, one).status == 200);
}

}  // namespace rackprof
