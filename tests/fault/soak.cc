// The soak: a real `rackprof serve` with many simulated boards, many WebSocket clients and a
// steady HTTP load, for a bounded time. It fails (exit 1) on any loss (any counter
// storage/counters.h marks as a loss, in any session), when RSS grows by 5 % or more and by
// 4 MiB or more over the run's second half (the first half is warm-up; the 4 MiB because the
// allocator keeps a busy moment's queue), on descriptors that do not stay flat, on a feed
// client dropped; it prints
// the figures (p50/p99 latency by route, RSS, descriptors, bytes captured) either way.
//
//   rackprof_soak [--boards 64] [--ws 100] [--seconds 45] [--rps 50] [--fleet-sessions 100000]
//
// CI runs it for under a minute; `rackprof_soak --seconds 3600` is the hour-long run.
#include <signal.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "storage/counters.h"
#include "storage/fleet/fleet_store.h"
#include "storage/session_store.h"
#include "tests/support/pg_server.h"
#include "tests/support/process.h"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using nlohmann::json;
using rackprof::testing::Process;
using rackprof::testing::TempDir;

struct Options {
    int boards = 64;
    int ws = 100;
    int seconds = 45;
    int rps = 50;
    // Sessions the bench pushed to its fleet store before the soak (0: no fleet).
    int fleet_sessions = 100000;
};

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string key = argv[i];
        const int value = std::stoi(argv[i + 1]);
        if (key == "--boards")
            o.boards = value;
        else if (key == "--ws")
            o.ws = value;
        else if (key == "--seconds")
            o.seconds = value;
        else if (key == "--rps")
            o.rps = value;
        else if (key == "--fleet-sessions")
            o.fleet_sessions = value;
        else
            throw std::invalid_argument("unknown option " + key);
    }
    return o;
}

// One keep-alive HTTP connection; reconnects after an error.
class HttpClient {
  public:
    explicit HttpClient(std::string port) : port_(std::move(port)) {}

    std::pair<int, std::string> get(const std::string& target) {
        for (int attempt = 0; attempt < 2; ++attempt) {
            try {
                if (!stream_) connect();
                http::request<http::empty_body> req{http::verb::get, target, 11};
                req.set(http::field::host, "127.0.0.1");
                http::write(*stream_, req);
                beast::flat_buffer buffer;
                http::response_parser<http::string_body> parser;
                parser.body_limit(256u << 20);
                http::read(*stream_, buffer, parser);
                auto res = parser.release();
                if (!res.keep_alive()) stream_.reset();
                return {res.result_int(), std::move(res.body())};
            } catch (const std::exception&) {
                stream_.reset();
            }
        }
        return {0, ""};
    }

  private:
    void connect() {
        tcp::resolver resolver(io_);
        stream_ = std::make_unique<beast::tcp_stream>(io_);
        stream_->connect(resolver.resolve("127.0.0.1", port_));
    }
    asio::io_context io_;
    std::string port_;
    std::unique_ptr<beast::tcp_stream> stream_;
};

// A live-feed client reading every message until told to stop.
class FeedClient : public std::enable_shared_from_this<FeedClient> {
  public:
    // `steady`: a feed that sends all the time (a session's live view, not the events feed).
    FeedClient(asio::io_context& io, std::string port, std::string path, bool steady)
        : steady_(steady), ws_(io), port_(std::move(port)), path_(std::move(path)) {}

    // From its own loopback address (127.0.1.N): like dashboards on many hosts, each within the
    // server's per-client connection limit.
    void start(int n) {
        auto& socket = ws_.next_layer();
        socket.open(tcp::v4());
        socket.bind({asio::ip::make_address_v4("127.0.1." + std::to_string(1 + n % 250)), 0});
        socket.connect({asio::ip::make_address_v4("127.0.0.1"),
                        static_cast<unsigned short>(std::stoi(port_))});
        ws_.handshake("127.0.0.1", path_);
        read();
    }
    void close() {
        beast::error_code ignored;
        ws_.next_layer().shutdown(tcp::socket::shutdown_both, ignored);
    }
    std::uint64_t messages() const { return messages_; }
    const bool steady_;
    bool failed() const { return failed_; }

  private:
    void read() {
        ws_.async_read(buffer_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
            if (ec) {
                if (!self->stopping_) self->failed_ = true;
                return;
            }
            ++self->messages_;
            self->buffer_.consume(self->buffer_.size());
            self->read();
        });
    }

  public:
    std::atomic<bool> stopping_{false};

  private:
    websocket::stream<tcp::socket> ws_;
    beast::flat_buffer buffer_;
    std::string port_, path_;
    std::atomic<std::uint64_t> messages_{0};
    std::atomic<bool> failed_{false};
};

struct Latencies {
    std::mutex mutex;
    std::map<std::string, std::vector<double>> ms_by_route;
    std::map<std::string, int> errors_by_route;
};

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

std::string wait_for_port(const std::filesystem::path& log) {
    const std::regex listening("HTTP API listening on [0-9.]+:([0-9]+)");
    std::smatch m;
    for (int i = 0; i < 1000; ++i) {
        const std::string text = rackprof::testing::read_text(log);
        if (std::regex_search(text, m, listening)) return m[1].str();
        std::this_thread::sleep_for(20ms);
    }
    throw std::runtime_error("the daemon never announced its port:\n" +
                             rackprof::testing::read_text(log));
}

// A PostgreSQL of the soak's own holding `n` sessions this bench ("soak") pushed before, and
// the local database holding the same `n`, so the pusher has them all to know about and
// nothing to push. Null (with a visible SKIP) without PostgreSQL.
std::unique_ptr<rackprof::testing::PgServer> seed_fleet(const TempDir& dir, int n) {
    auto server = rackprof::testing::PgServer::start_or_skip(dir.path(), "soak's fleet pusher");
    if (!server) return nullptr;
    namespace fleet = rackprof::storage::fleet;
    rackprof::storage::NewSession spec;
    spec.board = "earlier";
    spec.link = "sim://blinky";
    spec.started_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count() -
                      3'600'000'000'000;  // an hour ago: the same month, a nanosecond apart
    {
        rackprof::storage::SessionStore local(dir / "rack.db");
        rackprof::storage::Transaction t(local.db());
        for (int i = 0; i < n; ++i) {
            rackprof::storage::NewSession s = spec;
            s.started_ns += i;
            const auto id = local.create_session(s);
            local.end_session(id, "completed", s.started_ns + 1000);
            local.seal_sums(id);  // as the storage writer leaves a session it closes
        }
        t.commit();
    }
    fleet::FleetConnection connection;
    connection.url = server->url();
    fleet::FleetStore store(connection);
    fleet::PushedSession first;
    first.bench = "soak";
    first.info.id = 1;
    first.info.spec = spec;
    first.info.ended_ns = spec.started_ns + 1000;
    first.info.state = "completed";
    if (!store.push_session(first, rackprof::gmon::Aggregate{}, nullptr))
        throw std::runtime_error("soak: the first fleet session was not pushed");
    fleet::PgConnection sql(fleet::connection_parameters(connection));
    sql.query(
        "INSERT INTO sessions (bench, local_id, board, tags, build_id, started_ns, ended_ns, "
        "state, spec, counters) SELECT bench, local_id + g, board, tags, build_id, "
        "started_ns + g, ended_ns + g, state, spec, counters FROM sessions, "
        "generate_series(1, $1) g",
        {std::to_string(n - 1)});
    return server;
}

int run(const Options& o) {
    TempDir dir;
    const auto fleet_server = o.fleet_sessions > 0 ? seed_fleet(dir, o.fleet_sessions) : nullptr;
    {
        std::ofstream config(dir / "rack.toml");
        config << "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\npath = \""
               << (dir / "rack.db").string() << "\"\n";
        if (fleet_server)
            config << "[fleet]\nurl = \"" << fleet_server->url() << "\"\nbench = \"soak\"\n";
        const char* models[] = {"blinky", "conflation", "deterministic"};
        for (const char* model : models) {  // each model's ELF, so profiles name functions
            const auto made = rackprof::testing::run(
                {RACKPROF_BINARY, "simulate", "--model", model, "--iterations", "1", "--write-elf",
                 (dir / (std::string(model) + ".elf")).string(), "-o", "/dev/null"});
            if (made.exit_code != 0) throw std::runtime_error("simulate: " + made.err);
        }
        for (int i = 0; i < o.boards; ++i) {
            const char* model = models[i % 3];
            config << "[[boards]]\nname = \"b" << i << "\"\nlink = \"sim://" << model
                   << "?rate=20000&seed=" << i + 1 << "\"\nelf = \""
                   << (dir / (std::string(model) + ".elf")).string() << "\"\n";
        }
    }
    Process daemon({RACKPROF_BINARY, "serve", "--config", (dir / "rack.toml").string()},
                   dir / "serve.log");
    const std::string port = wait_for_port(dir / "serve.log");
    HttpClient control(port);
    std::vector<std::int64_t> sessions;
    for (int i = 0; i < 500 && static_cast<int>(sessions.size()) < o.boards; ++i) {
        sessions.clear();
        const auto boards = json::parse(control.get("/api/v1/boards").second);
        for (const auto& b : boards) {
            if (b.contains("session") && b["session"].is_number())
                sessions.push_back(b["session"].get<std::int64_t>());
        }
        std::this_thread::sleep_for(20ms);
    }
    if (static_cast<int>(sessions.size()) < o.boards) {
        std::cerr << "soak: only " << sessions.size() << " of " << o.boards
                  << " boards started a session\n";
        return 1;
    }

    asio::io_context feeds_io;
    std::vector<std::shared_ptr<FeedClient>> feeds;
    for (int i = 0; i < o.ws; ++i) {
        const std::string path =
            i % 10 == 9
                ? "/api/v1/events"
                : "/api/v1/sessions/" +
                      std::to_string(sessions[static_cast<std::size_t>(i) % sessions.size()]) +
                      "/live";
        feeds.push_back(std::make_shared<FeedClient>(feeds_io, port, path, i % 10 != 9));
        feeds.back()->start(i);
    }
    auto feeds_work = asio::make_work_guard(feeds_io);
    std::thread feeds_thread([&] { feeds_io.run(); });

    const std::vector<std::string> routes = {"/healthz",
                                             "/api/v1/boards",
                                             "/api/v1/sessions",
                                             "/api/v1/sessions/{id}",
                                             "/api/v1/sessions/{id}/profile?top=10",
                                             "/api/v1/sessions/{id}/gmon.out"};
    Latencies latencies;
    std::atomic<bool> stop{false};
    std::vector<std::thread> load;
    for (int t = 0; t < 2; ++t) {
        load.emplace_back([&, t] {
            HttpClient client(port);
            const auto period = std::chrono::microseconds(2'000'000 / std::max(1, o.rps));
            std::size_t n = static_cast<std::size_t>(t);
            while (!stop) {
                const auto start = Clock::now();
                const std::string& route = routes[n % routes.size()];
                const std::string target = std::regex_replace(
                    route, std::regex("\\{id\\}"), std::to_string(sessions[n % sessions.size()]));
                const auto [status, body] = client.get(target);
                const double ms =
                    std::chrono::duration<double, std::milli>(Clock::now() - start).count();
                {
                    std::lock_guard lock(latencies.mutex);
                    latencies.ms_by_route[route].push_back(ms);
                    if (status != 200) ++latencies.errors_by_route[route];
                }
                ++n;
                std::this_thread::sleep_until(start + period);
            }
        });
    }

    // A leak keeps growing; queues and tables sized by a busy host's moment do not. Half the run
    // is warm-up, so a short CI run judges the steady half.
    const auto warmup = std::chrono::seconds(std::max(10, o.seconds / 2));
    const auto began = Clock::now();
    long rss_warm = 0, rss_peak = 0;
    int fds_warm = 0, fds_max = 0;
    double pusher_cpu_warm = -1, pusher_cpu_end = -1;
    while (Clock::now() - began < std::chrono::seconds(o.seconds)) {
        std::this_thread::sleep_for(1s);
        if (!daemon.running()) break;
        const long rss = daemon.rss_kib();
        const int fds = daemon.open_fds();
        if (Clock::now() - began >= warmup) {
            if (!rss_warm) {
                rss_warm = rss, fds_warm = fds;
                pusher_cpu_warm = daemon.thread_cpu_seconds("fleet-push");
            }
            rss_peak = std::max(rss_peak, rss);
            fds_max = std::max(fds_max, fds);
        }
    }
    const long rss_end = daemon.running() ? daemon.rss_kib() : 0;
    const double steady_seconds =
        std::chrono::duration<double>(Clock::now() - began - warmup).count();
    pusher_cpu_end = daemon.thread_cpu_seconds("fleet-push");
    const json fleet_state = json::parse(control.get("/readyz").second, nullptr, false)["fleet"];
    const int fds_end = daemon.running() ? daemon.open_fds() : 0;
    stop = true;
    for (auto& t : load) t.join();
    int feeds_failed = 0;
    std::uint64_t feed_messages = 0;
    int feeds_silent = 0;
    for (auto& f : feeds) {
        feeds_failed += f->failed();
        feeds_silent += f->steady_ && f->messages() == 0;
        feed_messages += f->messages();
        f->stopping_ = true;
    }
    const bool alive = daemon.running();
    daemon.signal(SIGTERM);
    const int exit_code = daemon.wait(10s);
    for (auto& f : feeds) f->close();
    feeds_work.reset();
    feeds_io.stop();
    feeds_thread.join();

    // Loss, from what the daemon stored.
    rackprof::storage::SessionStore store(dir / "rack.db",
                                          rackprof::storage::Database::Mode::kReadOnly);
    // Every counter the table marks as a loss (storage/counters.h), so a new kind of loss is
    // judged here without touching the soak.
    std::uint64_t bytes_in = 0, records = 0, lost = 0;
    std::map<std::string, std::uint64_t> lost_by_counter;
    for (const auto& s : store.sessions()) {
        const auto& c = s.counters;
        bytes_in += c.bytes_in;
        records += c.arcs + c.pc_samples;
        rackprof::storage::for_each_counter(
            c, [&](const rackprof::storage::SessionCounter& counter, std::uint64_t value) {
                if (!counter.is_loss || value == 0) return;
                lost += value;
                lost_by_counter[std::string(counter.name)] += value;
            });
    }

    const double seconds = std::chrono::duration<double>(Clock::now() - began).count();
    std::printf("soak: %d boards, %d WebSocket clients, %d req/s target, %.0f s\n", o.boards, o.ws,
                o.rps, seconds);
    std::printf("  captured: %llu bytes, %llu records, loss counters total %llu\n",
                static_cast<unsigned long long>(bytes_in), static_cast<unsigned long long>(records),
                static_cast<unsigned long long>(lost));
    for (const auto& [name, value] : lost_by_counter)
        std::printf("    %s %llu\n", name.c_str(), static_cast<unsigned long long>(value));
    std::printf("  feeds: %llu messages, %d failed, %d silent\n",
                static_cast<unsigned long long>(feed_messages), feeds_failed, feeds_silent);
    const double growth =
        rss_warm ? 100.0 * static_cast<double>(rss_end - rss_warm) / static_cast<double>(rss_warm)
                 : 0;
    std::printf("  RSS after warm-up %ld KiB, peak %ld KiB, end %ld KiB (growth %.1f %%)\n",
                rss_warm, rss_peak, rss_end, growth);
    std::printf("  descriptors after warm-up %d, max %d, end %d\n", fds_warm, fds_max, fds_end);
    const double pusher_share =
        100.0 * (pusher_cpu_end - pusher_cpu_warm) / std::max(1.0, steady_seconds);
    if (fleet_server) {
        std::printf(
            "  fleet pusher with %d sessions pushed before: %.0f ms of CPU over the second "
            "half (%.2f %% of a core), pending %s\n",
            o.fleet_sessions, 1000 * (pusher_cpu_end - pusher_cpu_warm), pusher_share,
            fleet_state.is_object() ? fleet_state["pending"].dump().c_str() : "?");
    }
    std::printf("  %-40s %8s %8s %8s %8s %7s\n", "route", "requests", "p50 ms", "p99 ms", "max ms",
                "errors");
    int http_errors = 0;
    for (const auto& route : routes) {
        const auto& v = latencies.ms_by_route[route];
        const int errors = latencies.errors_by_route[route];
        http_errors += errors;
        std::printf("  %-40s %8zu %8.1f %8.1f %8.1f %7d\n", route.c_str(), v.size(),
                    percentile(v, 0.5), percentile(v, 0.99),
                    v.empty() ? 0 : *std::max_element(v.begin(), v.end()), errors);
    }

    std::vector<std::string> failures;
    if (!alive) failures.push_back("the daemon died");
    if (exit_code != 0) failures.push_back("the daemon exited " + std::to_string(exit_code));
    if (lost) failures.push_back("loss counters are not zero");
    if (growth >= 5.0 && rss_end - rss_warm >= 4096)
        failures.push_back("RSS grew by 5 % or more and by 4 MiB or more over the second half");
    if (fds_end > fds_warm + 2) failures.push_back("descriptors grew after warm-up");
    if (feeds_failed || feeds_silent) failures.push_back("feed clients failed or got nothing");
    if (http_errors) failures.push_back("HTTP requests failed");
    if (fleet_server) {
        if (pusher_cpu_warm < 0 || pusher_cpu_end < 0)
            failures.push_back("no fleet-push thread in the daemon");
        // Each round reads what changed; re-reading every session took 9 % of a core here.
        if (pusher_share >= 1.0) failures.push_back("the fleet pusher took 1 % of a core or more");
        if (!fleet_state.is_object() || fleet_state["pending"] != 0)
            failures.push_back("the fleet pusher has sessions pending");
    }
    double worst_p99 = 0;
    for (const auto& route : routes)
        worst_p99 = std::max(worst_p99, percentile(latencies.ms_by_route[route], 0.99));
    std::printf("FIGURE soak.run = %d boards, %d WebSocket clients, %d req/s, %.0f s\n", o.boards,
                o.ws, o.rps, seconds);
    std::printf("FIGURE soak.loss_counters = %llu of %llu records\n",
                static_cast<unsigned long long>(lost), static_cast<unsigned long long>(records));
    std::printf("FIGURE soak.rss_second_half = %ld -> %ld KiB (%+.1f %%)\n", rss_warm, rss_end,
                growth);
    std::printf("FIGURE soak.descriptors_second_half = %d -> %d\n", fds_warm, fds_end);
    std::printf("FIGURE soak.worst_route_p99_ms = %.1f ms\n", worst_p99);
    if (fleet_server) {
        std::printf(
            "FIGURE soak.fleet_pusher_cpu = %.2f %% of a core, %d sessions pushed before, "
            "pending %s\n",
            pusher_share, o.fleet_sessions,
            fleet_state.is_object() ? fleet_state["pending"].dump().c_str() : "?");
    }
    for (const auto& f : failures) std::printf("soak: FAILED: %s\n", f.c_str());
    if (failures.empty()) std::printf("soak: ok\n");
    return failures.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return run(parse(argc, argv));
    } catch (const std::exception& e) {
        std::cerr << "soak: " << e.what() << "\n";
        return 2;
    }
}
