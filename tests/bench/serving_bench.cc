// Benchmark of serving (not a pass/fail test): how long a real `rackprof serve` takes to answer
// profile, gmon.out and time-window requests over loopback, against stored sessions of 10^4 to
// 10^6 distinct arcs and one of 10^7 records; and fleet requests: the merged profile (with its
// per-board spread) of 1000 sessions of 10^4 distinct arcs each, and a diff of two halves. Each
// request is timed from connect to the last byte; the first request after the daemon starts
// (nothing in memory yet) is reported apart from the p50/p99 of the next 100 (10 where one takes
// over a second). With --baseline OLD_RACKPROF the same database is served by OLD_RACKPROF in the
// same run (the database must be of a schema it reads). Figures only, and TABLE| rows for run.sh's
// summary (tests/bench/table.h). With --keep the database stays in DIR after the run, and a later
// run with --keep and the same options serves it again instead of storing it anew (minutes at
// 10^7 records).
//
//   serving_bench RACKPROF [--arcs 10000,100000,1000000] [--records 10000000] [--dir DIR]
//                 [--fleet-sessions 1000] [--fleet-boards 50] [--baseline OLD_RACKPROF] [--keep]
#include <signal.h>

#include <cstdio>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "storage/session_store.h"
#include "tests/bench/loopback_http.h"
#include "tests/bench/synthetic_profile.h"
#include "tests/bench/table.h"
#include "tests/bench/timing.h"
#include "tests/support/process.h"

using namespace rackprof;
using namespace rackprof::bench;
using namespace std::chrono_literals;

namespace {

constexpr std::int64_t kStartNs = 1'700'000'000'000'000'000;

struct Latency {
    double first_ms = -1;  // the first request after start
    double p50_ms = -1, p99_ms = -1;
    std::size_t bytes = 0;
    int requests = 0;  // timed after the first
};

// A new session of the benchmark's board, profiled with `elf`; its id.
std::int64_t new_session(storage::SessionStore& store, const std::string& board,
                         const std::filesystem::path& elf) {
    storage::NewSession spec;
    spec.board = board;
    spec.link = "file:///bench";
    spec.elf_path = elf.string();
    spec.started_ns = kStartNs;
    return store.create_session(spec);
}

// One completed session holding `aggregate`.
void store_session(storage::SessionStore& store, const gmon::Aggregate& aggregate,
                   const std::filesystem::path& elf, std::int64_t end_ns,
                   const std::string& board = "bench") {
    const auto id = new_session(store, board, elf);
    store.add_to_aggregate(id, aggregate);
    store.end_session(id, "completed", end_ns);
    store.seal_sums(id);  // as the storage writer does when a session closes
}

// A session of `records` records, 4096 per chunk, chunks 1 ms apart: arcs among the synthetic
// profile's 10^4 and PCs anywhere in its text, so a window's answer has 10^4 arcs at most.
void store_record_session(storage::SessionStore& store, const SyntheticProfile& synthetic,
                          const std::filesystem::path& elf, std::size_t records) {
    const auto arcs = synthetic.aggregate.arcs();
    std::mt19937_64 rng(2);
    auto random_record = [&] {
        if (rng() % 4 == 0) {
            const auto& a = arcs[rng() % arcs.size()];
            return protocol::Record::arc(static_cast<std::uint32_t>(a.from_pc),
                                         static_cast<std::uint32_t>(a.self_pc));
        }
        return protocol::Record::pc_sample(static_cast<std::uint32_t>(
            synthetic.low + 2 * (rng() % ((synthetic.high - synthetic.low) / 2))));
    };
    const auto id = new_session(store, "bench-records", elf);
    constexpr std::size_t kPerChunk = 4096;
    constexpr std::size_t kChunksPerTransaction = 64;
    std::int64_t seq = 0;
    for (std::size_t done = 0; done < records;) {
        storage::Transaction t(store.db());
        gmon::Aggregate delta;
        std::vector<std::vector<protocol::Record>> pending;
        std::vector<storage::SessionStore::ChunkToStore> chunks;
        pending.reserve(kChunksPerTransaction);  // the chunks' spans point into it
        for (std::size_t c = 0; c < kChunksPerTransaction && done < records; ++c, ++seq) {
            auto& recs = pending.emplace_back(std::min(kPerChunk, records - done));
            for (auto& r : recs) r = random_record();
            delta.add(recs);
            done += recs.size();
            chunks.push_back({seq, kStartNs + seq * 1'000'000, {}, recs});
        }
        store.append_chunks(id, chunks, &delta);
        store.add_to_aggregate(id, delta);
        t.commit();
    }
    storage::Transaction t(store.db());
    store.finish_slices(id);
    store.end_session(id, "completed", kStartNs + seq * 1'000'000);
    store.seal_sums(id);
    t.commit();
}

Latency measure(int port, const std::string& path) {
    Latency l;
    l.first_ms = http_get_seconds(port, path, &l.bytes) * 1e3;
    if (l.first_ms < 0) return l;
    // 100 requests, fewer where one takes seconds (p99 of 10 is their slowest).
    l.requests = l.first_ms > 1000 ? 10 : 100;
    const auto times = latencies_ms(port, path, l.requests);
    if (!times.empty()) {
        l.p50_ms = times[times.size() / 2];
        l.p99_ms = times[std::min(times.size() - 1, times.size() * 99 / 100)];
    }
    return l;
}

struct Request {
    std::string what;   // the table's benchmark column
    std::string input;  // the table's input column
    std::string path;
};

// Serves the database with `binary` (no boards) and times every request.
std::vector<Latency> serve_and_measure(const std::string& binary, const std::filesystem::path& dir,
                                       const std::filesystem::path& db,
                                       const std::vector<Request>& requests) {
    const auto config = dir / "serve.toml";
    std::ofstream(config) << "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\npath = \""
                          << db.string() << "\"\n[logging]\nlevel = \"info\"\n";
    const auto log = dir / "serve.log";
    std::filesystem::remove(log);
    testing::Process daemon({binary, "serve", "--config", config.string()}, log);
    testing::eventually([&] { return listening_port(log) != 0; }, 30s);
    std::vector<Latency> out;
    const int port = listening_port(log);
    for (const auto& r : requests) out.push_back(port ? measure(port, r.path) : Latency{});
    daemon.signal(SIGTERM);
    daemon.wait(60s);
    return out;
}

std::string latency_cell(const Latency& l) {
    if (l.p99_ms < 0) return "failed";
    return cell("p99 %.1f ms (p50 %.1f, first %.1f; %.1f MB; %d requests)", l.p99_ms, l.p50_ms,
                l.first_ms, static_cast<double>(l.bytes) / 1e6, l.requests);
}

void report(const std::vector<Request>& requests, const std::vector<Latency>& now,
            const std::vector<Latency>& before, const std::string& baseline) {
    for (std::size_t i = 0; i < requests.size(); ++i) {
        const Latency& l = now[i];
        std::printf("%s, %s: %s\n", requests[i].what.c_str(), requests[i].input.c_str(),
                    latency_cell(l).c_str());
        if (before.empty() || before[i].p99_ms <= 0 || l.p99_ms <= 0) {
            table_row(requests[i].what, requests[i].input, latency_cell(l));
        } else {
            std::printf("  %s: %s\n", baseline.c_str(), latency_cell(before[i]).c_str());
            table_row(requests[i].what, requests[i].input, latency_cell(l),
                      "--baseline " + latency_cell(before[i]), l.p99_ms / before[i].p99_ms);
        }
    }
}

// A kept database's requests (--keep), written beside it with the options it was made with:
// "options" then the options' lines, then a tab-separated line (what, input, path) per request.
void keep_requests(const std::filesystem::path& dir, const std::string& options,
                   const std::vector<Request>& requests) {
    std::ofstream out(dir / "requests.tsv");
    out << options << "requests\n";
    for (const auto& r : requests) out << r.what << '\t' << r.input << '\t' << r.path << '\n';
}

// The requests of a database kept by an earlier run with the same options; nullopt if none.
std::optional<std::vector<Request>> kept_requests(const std::filesystem::path& dir,
                                                  const std::string& options) {
    std::ifstream in(dir / "requests.tsv");
    if (!in || !std::filesystem::exists(dir / "serving.db")) return std::nullopt;
    std::string line, kept_options;
    while (std::getline(in, line) && line != "requests") kept_options += line + "\n";
    if (kept_options != options) return std::nullopt;
    std::vector<Request> requests;
    while (std::getline(in, line)) {
        const auto tab1 = line.find('\t');
        const auto tab2 = line.find('\t', tab1 + 1);
        if (tab2 == std::string::npos) return std::nullopt;
        requests.push_back(
            {line.substr(0, tab1), line.substr(tab1 + 1, tab2 - tab1 - 1), line.substr(tab2 + 1)});
    }
    if (requests.empty()) return std::nullopt;
    return requests;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(
            stderr,
            "usage: serving_bench RACKPROF [--arcs N,...] [--records N] [--dir DIR] "
            "[--fleet-sessions N] [--fleet-boards N] [--baseline OLD_RACKPROF] [--keep]\n");
        return 2;
    }
    const std::string binary = argv[1];
    std::vector<std::size_t> arc_counts = {10000, 100000, 1000000};
    std::size_t records = 10'000'000;
    std::filesystem::path dir = std::filesystem::temp_directory_path() / "rackprof-serving-bench";
    std::string baseline;
    std::size_t fleet_sessions = 1000, fleet_boards = 50;
    bool keep = false;
    std::string options;  // what the database is made of: a kept one is reused only for the same
    for (int i = 2; i < argc; ++i) {
        if (std::string(argv[i]) == "--keep") {
            keep = true;
            continue;
        }
        if (i + 1 >= argc) break;
        if (std::string(argv[i]) != "--baseline")
            options += std::string(argv[i]) + " " + argv[i + 1] + "\n";
        if (std::string(argv[i]) == "--fleet-sessions") fleet_sessions = std::stoull(argv[i + 1]);
        if (std::string(argv[i]) == "--fleet-boards")
            fleet_boards = std::max<std::size_t>(1, std::stoull(argv[i + 1]));
        const std::string arg = argv[i];
        if (arg == "--arcs") arc_counts = size_list(argv[i + 1]);
        if (arg == "--records") records = std::stoull(argv[i + 1]);
        if (arg == "--dir") dir = argv[i + 1];
        if (arg == "--baseline") baseline = argv[i + 1];
        ++i;
    }
    const auto db = dir / "serving.db";
    std::vector<Request> requests;
    if (keep) {
        if (auto kept = kept_requests(dir, options)) {
            std::printf("serving the database kept in %s\n", dir.c_str());
            requests = std::move(*kept);
            fleet_sessions = 0;
            records = 0;
            arc_counts.clear();
        }
    }
    if (requests.empty()) {
        std::filesystem::remove_all(dir);
        std::filesystem::create_directories(dir);
    }
    {
        storage::SessionStore store(db);
        std::int64_t id = 0;
        for (const std::size_t arcs : arc_counts) {
            const auto start = Clock::now();
            const SyntheticProfile synthetic = synthetic_profile(arcs);
            const auto elf = dir / ("arcs-" + std::to_string(arcs) + ".elf");
            synthetic.write_elf(elf);
            store_session(store, synthetic.aggregate, elf, kStartNs + 60'000'000'000);
            ++id;
            const std::string input = cell("%zu distinct arcs", arcs);
            const std::string base = "/api/v1/sessions/" + std::to_string(id);
            // What the dashboard asks (an older daemon ignores graph_top and answers the whole
            // call graph, as its dashboard asked), then the entry of a function selected there.
            requests.push_back({"profile as the dashboard asks (?graph_top=50)", input,
                                base + "/profile?graph_top=50"});
            requests.push_back({"a function's entry (?top=1&graph_function=)", input,
                                base + "/profile?top=1&graph_function=function_1000"});
            requests.push_back({"profile, whole call graph", input, base + "/profile"});
            requests.push_back({"profile ?top=50", input, base + "/profile?top=50"});
            requests.push_back({"gmon.out", input, base + "/gmon.out"});
            std::printf("session %lld: %zu distinct arcs stored in %.1f s\n",
                        static_cast<long long>(id), arcs, seconds_since(start));
        }
        if (records > 0) {
            const auto start = Clock::now();
            const SyntheticProfile synthetic = synthetic_profile(10000, 0);
            const auto elf = dir / "records.elf";
            synthetic.write_elf(elf);
            store_record_session(store, synthetic, elf, records);
            ++id;
            const std::int64_t span_ns = static_cast<std::int64_t>(records / 4096) * 1'000'000;
            const std::string input = cell("%zu records", records);
            const std::string base = "/api/v1/sessions/" + std::to_string(id) + "/profile";
            const auto window = [&](std::int64_t from, std::int64_t to) {
                return base + "?top=50&from=" + std::to_string(kStartNs + from) +
                       "&to=" + std::to_string(kStartNs + to);
            };
            requests.push_back({"profile ?top=50, whole session", input, base + "?top=50"});
            requests.push_back(
                {"window profile, middle half", input, window(span_ns / 4, 3 * span_ns / 4)});
            requests.push_back(
                {"window profile, 1 s", input, window(span_ns / 2, span_ns / 2 + 1'000'000'000)});
            std::printf("session %lld: %zu records stored in %.1f s\n", static_cast<long long>(id),
                        records, seconds_since(start));
        }
    }
    if (fleet_sessions > 0) {
        // One build on `fleet_boards` boards, `fleet_sessions` sessions in all, each of the
        // same 10^4 arcs with its own counts; started one after another (1 ns apart).
        const auto start = Clock::now();
        const SyntheticProfile synthetic = synthetic_profile(10000, 2000);
        const auto elf = dir / "fleet.elf";
        synthetic.write_elf(elf);
        storage::SessionStore store(db);
        const std::int64_t first_start = kStartNs + 1'000'000'000;
        std::mt19937_64 rng(3);
        std::optional<storage::Transaction> batch;  // 50 sessions a transaction: one fsync each
        for (std::size_t i = 0; i < fleet_sessions; ++i) {
            if (i % 50 == 0) {
                if (batch) batch->commit();
                batch.emplace(store.db());
            }
            gmon::Aggregate a;
            for (const auto& arc : synthetic.aggregate.arcs())
                a.add_arc(arc.from_pc, arc.self_pc, 1 + rng() % 1000);
            for (const auto& pc : synthetic.aggregate.pc_samples()) a.add_pc(pc.pc, 1 + rng() % 50);
            storage::NewSession spec;
            spec.board = "fleet-" + std::to_string(i % fleet_boards);
            spec.link = "file:///bench";
            spec.elf_path = elf.string();
            spec.started_ns = first_start + static_cast<std::int64_t>(i);
            const auto id = store.create_session(spec);
            store.add_to_aggregate(id, a);
            store.end_session(id, "completed", first_start + 60'000'000'000);
            store.seal_sums(id);
        }
        if (batch) batch->commit();
        const std::string input =
            cell("%zu sessions x 10^4 distinct arcs, %zu boards", fleet_sessions, fleet_boards);
        const std::string all = "from=" + std::to_string(first_start);
        const std::string half =
            std::to_string(first_start + static_cast<std::int64_t>(fleet_sessions / 2));
        requests.push_back(
            {"fleet profile ?top=50 (with spread)", input, "/api/v1/profile?top=50&" + all});
        requests.push_back({"fleet gmon.out", input, "/api/v1/profile/export/gmon?" + all});
        requests.push_back({"diff of two halves", input,
                            "/api/v1/diff?a=from%3D" + std::to_string(first_start) + "%26to%3D" +
                                half + "&b=from%3D" + half});
        std::printf("fleet: %zu sessions stored in %.1f s\n", fleet_sessions, seconds_since(start));
    }
    const auto now = serve_and_measure(binary, dir, db, requests);
    std::vector<Latency> before;
    if (!baseline.empty()) before = serve_and_measure(baseline, dir, db, requests);
    report(requests, now, before, baseline);
    if (keep) {
        keep_requests(dir, options, requests);
    } else {
        std::filesystem::remove_all(dir);
    }
    return 0;
}
