// Benchmark of the fleet store (not a pass/fail test), on a PostgreSQL 15 server it starts
// itself (tests/support/pg_server.h; a visible SKIP and exit 0 when it cannot):
//  1. pushing: B benches x N boards, each bench a thread with its own FleetStore connection,
//     push completed sessions of one firmware build (a synthetic ELF of 2000 functions) until
//     the store holds S sessions; each session a few hundred to a few thousand distinct arcs
//     and PCs (--arcs / --pcs: the most of each, the least a tenth of it). Push latency per
//     session (p50, p99, max) under that concurrency, sessions/s, PostgreSQL bytes per session
//     (FleetStore::session_bytes) against what the same sessions take in a local SQLite file;
//  2. the build's fleet profile over all S sessions: the SQL itself (FleetStore::sessions and
//     ::sum, with EXPLAIN ANALYZE of the arcs' SUM … GROUP BY), a real `rackprof serve` with the
//     fleet URL and no boards answering `GET /api/v1/profile?build_id=…` over loopback (the
//     first request after start, then p50/p99), and `rackprof fleet profile` (best of three).
//     The goal is under 1 s. TABLE| rows feed run.sh's summary (tests/bench/table.h).
//
//   fleet_bench RACKPROF [--benches 20] [--boards 5] [--sessions 1000] [--arcs 2000]
//               [--pcs 3000] [--dir DIR] [--url postgresql://…]
// --url: a PostgreSQL of the caller's instead of one of its own, kept afterwards; sessions are
// pushed only while it holds fewer than --sessions (to time the reads again without pushing).
// The defaults keep `run.sh all` short (the whole spread grows with boards x functions); the
// issue's sizes are --benches 20 --boards 50 --sessions 10000 (about 15 minutes on 2 cores).
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gmon/board_spread.h"
#include "gmon/function_index.h"
#include "storage/fleet/fleet_store.h"
#include "storage/session_store.h"
#include "tests/bench/loopback_http.h"
#include "tests/bench/synthetic_profile.h"
#include "tests/bench/table.h"
#include "tests/bench/timing.h"
#include "tests/support/pg_server.h"
#include "tests/support/process.h"

using namespace rackprof;
using namespace rackprof::bench;
using namespace std::chrono_literals;

namespace {

constexpr std::int64_t kStartNs = 1'790'000'000'000'000'000;  // 2026-09-22, one month
// The fleet's key for the build: any lowercase hex names a build.
const std::string kBuildId = "f1ee7be9c4a0000000000000000000000000b1d0";

struct Sizes {
    std::size_t benches = 20, boards = 5, sessions = 1000, arcs = 2000, pcs = 3000;
    std::string url;  // --url: a server of the caller's, kept (and pushed to only if short)
};

// One session's aggregate: a run of the build's arcs and PCs (from a random place, of a
// random length between a tenth of the most and the most), with counts of its own.
gmon::Aggregate session_aggregate(const gmon::Aggregate& build, const Sizes& sizes,
                                  std::mt19937_64& rng) {
    const auto& arcs = build.arcs();
    const auto& pcs = build.pc_samples();
    gmon::Aggregate a;
    const std::size_t n_arcs = sizes.arcs / 10 + rng() % (sizes.arcs - sizes.arcs / 10 + 1);
    const std::size_t n_pcs = sizes.pcs / 10 + rng() % (sizes.pcs - sizes.pcs / 10 + 1);
    for (std::size_t i = 0, at = rng() % arcs.size(); i < n_arcs; ++i)
        a.add_arc(arcs[(at + i) % arcs.size()].from_pc, arcs[(at + i) % arcs.size()].self_pc,
                  1 + rng() % 1000);
    for (std::size_t i = 0, at = rng() % pcs.size(); i < n_pcs; ++i)
        a.add_pc(pcs[(at + i) % pcs.size()].pc, 1 + rng() % 50);
    return a;
}

storage::fleet::PushedSession pushed_session(const std::string& bench, std::int64_t local_id,
                                             const std::string& board, const gmon::Aggregate& a) {
    storage::fleet::PushedSession s;
    s.bench = bench;
    s.build_id = kBuildId;
    s.tags = {"nightly"};
    s.info.id = local_id;
    s.info.spec.board = board;
    s.info.spec.link = "file:///bench";
    s.info.spec.elf_build_id = kBuildId;
    s.info.spec.started_ns = kStartNs + local_id * 1'000'000'000;
    s.info.ended_ns = s.info.spec.started_ns + 60'000'000'000;
    s.info.state = "completed";
    s.info.counters.arcs = a.distinct_arcs();
    s.info.counters.pc_samples = a.total_samples();
    return s;
}

double percentile(const std::vector<double>& sorted, double p) {
    if (sorted.empty()) return -1;
    return sorted[std::min(sorted.size() - 1, static_cast<std::size_t>(p * sorted.size()))];
}

std::string latency_cell(const std::vector<double>& ms) {
    return cell("p50 %.1f ms, p99 %.1f ms, max %.1f ms", percentile(ms, 0.5), percentile(ms, 0.99),
                ms.empty() ? -1 : ms.back());
}

std::uintmax_t file_size_or_0(const std::filesystem::path& p) {
    std::error_code ec;
    const auto n = std::filesystem::file_size(p, ec);
    return ec ? 0 : n;
}

// What `sessions` of the same shapes take in a local SQLite database (bytes per session).
double sqlite_bytes_per_session(const std::filesystem::path& dir, const gmon::Aggregate& build,
                                const Sizes& sizes, const std::filesystem::path& elf,
                                std::size_t sessions) {
    const auto db = dir / "local.db";
    std::uintmax_t empty = 0;
    {
        storage::SessionStore store(db);
        empty = file_size_or_0(db) + file_size_or_0(dir / "local.db-wal");
    }
    {
        storage::SessionStore store(db);
        std::mt19937_64 rng(7);
        std::optional<storage::Transaction> batch;
        for (std::size_t i = 0; i < sessions; ++i) {
            if (i % 50 == 0) {
                if (batch) batch->commit();
                batch.emplace(store.db());
            }
            storage::NewSession spec;
            spec.board = "board-" + std::to_string(i % sizes.boards);
            spec.link = "file:///bench";
            spec.elf_path = elf.string();
            spec.started_ns = kStartNs + static_cast<std::int64_t>(i);
            const auto id = store.create_session(spec);
            store.add_to_aggregate(id, session_aggregate(build, sizes, rng));
            store.end_session(id, "completed", spec.started_ns + 60'000'000'000);
            store.seal_sums(id);  // as the storage writer leaves a session it closes
        }
        if (batch) batch->commit();
    }
    const auto full = file_size_or_0(db) + file_size_or_0(dir / "local.db-wal");
    return static_cast<double>(full - empty) / static_cast<double>(sessions);
}

void measure(const std::string& binary, const Sizes& sizes, const std::filesystem::path& dir);

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr,
                     "usage: fleet_bench RACKPROF [--benches N] [--boards N] [--sessions N] "
                     "[--arcs N] [--pcs N] [--dir DIR] [--url URL]\n");
        return 2;
    }
    const std::string binary = argv[1];
    Sizes sizes;
    std::filesystem::path dir = std::filesystem::temp_directory_path() / "rackprof-fleet-bench";
    for (int i = 2; i + 1 < argc; i += 2) {
        const std::string arg = argv[i];
        const auto n = [&] { return std::max<std::size_t>(1, std::stoull(argv[i + 1])); };
        if (arg == "--benches") sizes.benches = n();
        if (arg == "--boards") sizes.boards = n();
        if (arg == "--sessions") sizes.sessions = n();
        if (arg == "--arcs") sizes.arcs = std::max<std::size_t>(10, n());
        if (arg == "--pcs") sizes.pcs = std::max<std::size_t>(10, n());
        if (arg == "--dir") dir = argv[i + 1];
        if (arg == "--url") sizes.url = argv[i + 1];
    }
    if (!testing::PgServer::installed()) {
        std::printf("SKIP: fleet_bench: PostgreSQL 15 is not installed (%s)\n",
                    testing::PgServer::bin_dir().c_str());
        return 0;
    }
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    measure(binary, sizes, dir);
    std::filesystem::remove_all(dir);  // the server has stopped
    return 0;
}

namespace {

void measure(const std::string& binary, const Sizes& sizes, const std::filesystem::path& dir) {
    std::optional<testing::PgServer> own_server;
    std::string url = sizes.url;
    if (url.empty()) {
        own_server.emplace(dir);
        if (!own_server->ok()) {
            std::printf("SKIP: fleet_bench: PostgreSQL could not be started: %s\n",
                        own_server->why().c_str());
            return;
        }
        url = own_server->url();
    }
    storage::fleet::FleetConnection connection;
    connection.url = url;

    // The build: 2000 functions; its arcs and PCs are what sessions take runs of.
    const SyntheticProfile build = synthetic_profile(sizes.arcs, sizes.pcs);
    const auto elf_path = dir / "build.elf";
    build.write_elf(elf_path);
    const auto elf = gmon::Symbolizer::load(elf_path);
    const std::string shape =
        cell("%zu benches x %zu boards, sessions of %zu-%zu arcs and %zu-%zu PCs", sizes.benches,
             sizes.boards, sizes.arcs / 10, sizes.arcs, sizes.pcs / 10, sizes.pcs);

    // 1. Every bench a thread with its own connection, pushing its share of the sessions.
    std::vector<double> latencies;
    std::mutex mutex;
    std::atomic<std::size_t> failures{0};
    std::string first_failure;
    const auto push_start = Clock::now();
    const bool push = storage::fleet::FleetStore(connection).count("sessions") <
                      static_cast<std::int64_t>(sizes.sessions);
    if (!push) std::printf("push: skipped, the server at --url holds the sessions already\n");
    if (push) {
        std::vector<std::thread> benches;
        for (std::size_t b = 0; b < sizes.benches; ++b) {
            benches.emplace_back([&, b] {
                const std::size_t share =
                    sizes.sessions / sizes.benches + (b < sizes.sessions % sizes.benches ? 1 : 0);
                std::vector<double> mine;
                try {
                    storage::fleet::FleetStore store(connection);
                    std::mt19937_64 rng(100 + b);
                    const std::string bench = "bench-" + std::to_string(b);
                    for (std::size_t i = 0; i < share; ++i) {
                        const auto a = session_aggregate(build.aggregate, sizes, rng);
                        const auto s =
                            pushed_session(bench, static_cast<std::int64_t>(i + 1),
                                           "board-" + std::to_string(i % sizes.boards), a);
                        const auto t0 = Clock::now();
                        if (!store.push_session(s, a, elf)) ++failures;
                        mine.push_back(seconds_since(t0) * 1e3);
                    }
                } catch (const std::exception& e) {
                    ++failures;
                    const std::lock_guard lock(mutex);
                    if (first_failure.empty()) first_failure = e.what();
                }
                const std::lock_guard lock(mutex);
                latencies.insert(latencies.end(), mine.begin(), mine.end());
            });
        }
        for (auto& t : benches) t.join();
    }
    const double push_seconds = seconds_since(push_start);
    std::sort(latencies.begin(), latencies.end());
    if (failures > 0)
        std::printf("push: %zu failures; first: %s\n", failures.load(), first_failure.c_str());

    storage::fleet::FleetStore store(connection);
    const auto stored = store.count("sessions");
    const double pg_per_session = static_cast<double>(store.session_bytes()) /
                                  static_cast<double>(std::max<std::int64_t>(1, stored));
    const double arcs_per = static_cast<double>(store.count("arcs")) / static_cast<double>(stored);
    const double pcs_per =
        static_cast<double>(store.count("pc_samples")) / static_cast<double>(stored);
    std::printf(
        "push: %lld sessions (%.0f arc rows, %.0f PC rows each on average) by %zu benches "
        "in %.1f s: %.0f sessions/s; latency %s\n",
        static_cast<long long>(stored), arcs_per, pcs_per, sizes.benches, push_seconds,
        static_cast<double>(latencies.size()) / push_seconds, latency_cell(latencies).c_str());
    const std::size_t sqlite_sessions = std::min<std::size_t>(200, sizes.sessions);
    const double sqlite_per_session =
        sqlite_bytes_per_session(dir, build.aggregate, sizes, elf_path, sqlite_sessions);
    std::printf(
        "size: %.0f bytes of PostgreSQL per session (tables and indexes); the same "
        "shapes in a local SQLite file: %.0f bytes per session (%zu sessions)\n",
        pg_per_session, sqlite_per_session, sqlite_sessions);
    table_row("fleet push latency (own connection per bench)", shape, latency_cell(latencies));
    table_row("fleet push throughput", shape,
              cell("%.0f sessions/s", static_cast<double>(latencies.size()) / push_seconds));
    table_row("fleet PostgreSQL size per session",
              cell("%.0f arc + %.0f PC rows", arcs_per, pcs_per),
              cell("%.0f KB", pg_per_session / 1e3),
              cell("local SQLite %.0f KB", sqlite_per_session / 1e3),
              pg_per_session / sqlite_per_session);

    // 2. The build's profile over every session: the SQL alone first.
    const std::string input = cell("%lld sessions of one build, %zu boards",
                                   static_cast<long long>(stored), sizes.benches * sizes.boards);
    {
        storage::fleet::FleetFilter filter;
        filter.build_ids = {kBuildId};
        auto t0 = Clock::now();
        const auto sessions = store.sessions(filter);
        const double select_ms = seconds_since(t0) * 1e3;
        std::vector<std::int64_t> ids;
        for (const auto& s : sessions) ids.push_back(s.id);
        // Baseline, same run, same sessions: the sum from every session's own rows (schema 1's
        // only way); then from the build sums kept at push time. Each twice: the first reads
        // from disk what the other has not yet brought into the page cache.
        t0 = Clock::now();
        const auto rows = store.sum_of_session_rows(ids);
        const double rows_first_ms = seconds_since(t0) * 1e3;
        t0 = Clock::now();
        store.sum_of_session_rows(ids);
        const double rows_ms = seconds_since(t0) * 1e3;
        t0 = Clock::now();
        const auto sum = store.sum(ids);
        const double sum_first_ms = seconds_since(t0) * 1e3;
        t0 = Clock::now();
        store.sum(ids);
        const double sum_ms = seconds_since(t0) * 1e3;
        std::printf(
            "sql: sessions(build_id) %.0f ms for %zu rows; sum from the sessions' rows "
            "%.0f ms (again %.0f ms); sum from the build sums %.0f ms (again %.0f ms); "
            "%zu arcs and %zu PCs, the two sums %s\n",
            select_ms, sessions.size(), rows_first_ms, rows_ms, sum_first_ms, sum_ms,
            sum.distinct_arcs(), sum.pc_samples().size(), sum == rows ? "equal" : "DIFFER");
        table_row("fleet SQL: SUM … GROUP BY of a build (FleetStore::sum)", input,
                  cell("%.0f ms (first %.0f ms)", sum_ms, sum_first_ms),
                  cell("sessions' rows %.0f ms (first %.0f ms)", rows_ms, rows_first_ms),
                  sum_ms / rows_ms);
        table_row("fleet SQL: the sessions of a build (FleetStore::sessions)", input,
                  cell("%.0f ms", select_ms));
        // What a fleet server's profile asks besides: every board's own sum, for the spread
        // (daemon/service/local_rack.cc, LocalRack::merge), one FleetStore::sum per board.
        std::map<std::string, std::vector<std::int64_t>> by_board;
        for (const auto& s : sessions) by_board[s.spec.board].push_back(s.id);
        t0 = Clock::now();
        for (const auto& [board, own] : by_board) store.sum(own);
        const double boards_ms = seconds_since(t0) * 1e3;
        t0 = Clock::now();
        for (const auto& [board, own] : by_board) store.sum_of_session_rows(own);
        const double boards_rows_ms = seconds_since(t0) * 1e3;
        // Since schema 4 the spread reads the board sums kept at push time instead, for the
        // functions it shows (the default limit for this many boards, the busiest first).
        const gmon::FunctionIndex index(*elf);
        const auto shown = std::min<std::size_t>(gmon::default_spread_limit(by_board.size()),
                                                 index.symbols().size());
        std::vector<std::pair<std::uint64_t, std::uint64_t>> busiest;  // samples, address
        {
            std::map<std::uint64_t, std::uint64_t> by_function;
            for (const auto& pc : sum.pc_samples()) {
                if (const auto* f = index.holding(pc.pc)) by_function[f->addr] += pc.count;
            }
            for (const auto& [address, n] : by_function) busiest.emplace_back(n, address);
            std::sort(busiest.rbegin(), busiest.rend());
        }
        std::vector<std::uint64_t> functions;
        for (std::size_t i = 0; i < std::min(shown, busiest.size()); ++i)
            functions.push_back(busiest[i].second);
        t0 = Clock::now();
        const auto board_sums = store.board_sums(ids, index, functions);
        const double board_sums_ms = seconds_since(t0) * 1e3;
        t0 = Clock::now();
        store.board_sums(ids, index, functions);
        const double board_sums_again_ms = seconds_since(t0) * 1e3;
        std::printf(
            "sql: one sum per board (%zu boards): %.0f ms; from the sessions' rows only "
            "%.0f ms; the board sums of schema 4 for %zu functions: %.0f ms (again %.0f ms, "
            "%zu boards)\n",
            by_board.size(), boards_ms, boards_rows_ms, functions.size(), board_sums_ms,
            board_sums_again_ms, board_sums.size());
        table_row("fleet SQL: every board's sum (the spread's, before schema 4)", input,
                  cell("%.0f ms", boards_ms), cell("sessions' rows %.0f ms", boards_rows_ms),
                  boards_ms / boards_rows_ms);
        table_row(cell("fleet SQL: board sums for the spread's %zu functions (schema 4)",
                       functions.size()),
                  input, cell("%.0f ms (first %.0f ms)", board_sums_again_ms, board_sums_ms),
                  cell("one sum per board %.0f ms", boards_ms), board_sums_again_ms / boards_ms);
        storage::fleet::PgConnection db(storage::fleet::connection_parameters(connection));
        const auto plan = db.query(
            "EXPLAIN (ANALYZE, BUFFERS) SELECT from_pc, self_pc, sum(count)::bigint FROM arcs "
            "WHERE session_id = ANY($1::bigint[]) GROUP BY from_pc, self_pc",
            {storage::fleet::pg_array(ids)});
        std::printf("EXPLAIN ANALYZE of the arcs' sum from the sessions' rows:\n");
        for (int i = 0; i < plan.rows(); ++i)  // a Filter line holds every id: cut
            std::printf("  %.150s\n", plan.text(i, 0).c_str());
    }

    // A fleet server: the URL, no boards; its own (empty) SQLite file.
    {
        std::ofstream(dir / "fleet.toml")
            << "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\npath = \""
            << (dir / "fleet.db").string() << "\"\n";
    }
    // What the dashboard's fleet page asks (the profile and every board's spread), and the
    // same trimmed to the top 50 functions; each from a daemon of its own, so that its first
    // request finds nothing merged yet (merged selections are kept in memory).
    for (const std::string query : {"", "&top=50"}) {
        testing::Process serve({binary, "serve", "--config", (dir / "fleet.toml").string()},
                               dir / "serve.log", {}, {"RACKPROF_FLEET_URL=" + url});
        int port = 0;
        testing::eventually([&] { return (port = listening_port(dir / "serve.log")) > 0; }, 30s);
        const std::string path = "/api/v1/profile?build_id=" + kBuildId + query;
        std::size_t bytes = 0;
        const double first = port > 0 ? http_get_seconds(port, path, &bytes) : -1;
        if (first < 0) {
            std::printf("serve: GET %s failed; the daemon's log:\n%s\n", path.c_str(),
                        testing::read_text(dir / "serve.log").c_str());
            continue;
        }
        const int n = first > 1 ? 3 : 50;
        const auto again = latencies_ms(port, path, n);
        std::printf(
            "serve: GET /api/v1/profile?build_id=…%s: first %.0f ms (%zu bytes), then %s "
            "(%d requests)\n",
            query.c_str(), first * 1e3, bytes, latency_cell(again).c_str(), n);
        const std::string what =
            std::string("fleet profile over HTTP") + (query.empty() ? "" : " ?top=50");
        table_row(what + ", first request", input,
                  cell("%.0f ms, %.1f MB (goal < 1000 ms)", first * 1e3,
                       static_cast<double>(bytes) / 1e6));
        table_row(what + ", again", input, latency_cell(again));
        serve.signal(SIGTERM);
        serve.wait(10s);
        std::filesystem::remove(dir / "serve.log");
    }
    const auto cli =
        command_time(binary + " fleet profile --url '" + url + "' --select build_id=" + kBuildId +
                     " --report json > /dev/null 2>&1");
    if (cli) {
        std::printf(
            "cli: rackprof fleet profile --select build_id=… --report json: %.0f ms wall, "
            "%.0f ms CPU (best of 3)\n",
            cli->wall * 1e3, cli->cpu * 1e3);
        table_row("rackprof fleet profile (CLI, best of 3)", input,
                  cell("%.0f ms (goal < 1000 ms)", cli->wall * 1e3));
    } else {
        std::printf("cli: rackprof fleet profile failed\n");
    }
}

}  // namespace
