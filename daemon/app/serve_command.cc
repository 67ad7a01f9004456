// `rackprof serve`: the capture daemon. Runs until SIGTERM or SIGINT, then stops reading,
// hands everything to storage, marks sessions completed and exits 0.
#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "daemon/app/commands.h"
#include "daemon/app/systemd_notifier.h"
#include "daemon/capture/capture_service.h"
#include "daemon/config/link_uri.h"
#include "daemon/fleet/fleet_pusher.h"
#include "daemon/service/local_rack.h"
#include "daemon/sim/board_simulator.h"
#include "storage/database_lock.h"
#include "storage/fleet/fleet_url.h"
#include "web/api/api.h"
#include "web/feeds/live_feeds.h"
#include "web/server/http_server.h"
#include "web/server/static_site.h"

#include <nlohmann/json.hpp>

namespace rackprof::daemon::app {

namespace {

constexpr const char* kServeAbout =
    R"(Runs the capture daemon: opens every board's link, captures sessions into SQLite, and keeps
going through unplugs and reconnects. Without --config it runs on the embedded default: a
database under ./var and a small simulated rack. SIGTERM or SIGINT stops it cleanly; SIGHUP
reloads the configuration file (boards added, removed or changed; the others keep running).
Under systemd it speaks the notify protocol (Type=notify, WatchdogSec=).
)";

struct ServeArgs {
    std::optional<std::string> config;
    std::optional<std::string> listen;
    std::optional<std::string> log_level;
};

std::shared_ptr<spdlog::logger> make_logger(const std::string& level) {
    auto log = spdlog::stderr_color_mt("rackprof");
    // Under journald the journal adds its own timestamps.
    log->set_pattern(std::getenv("JOURNAL_STREAM") ? "<%^%l%$> %v"
                                                   : "%Y-%m-%d %H:%M:%S.%e %^%l%$ %v");
    log->set_level(spdlog::level::from_str(level));
    log->flush_on(spdlog::level::info);
    return log;
}

// The API token: the file named in the config, else $RACKPROF_API_TOKEN; trailing space dropped.
// A token file that cannot be read (or is empty) is an error, not an open bench.
std::string api_token(const config::DaemonConfig& config) {
    std::string token;
    if (!config.token_file.empty()) {
        std::ifstream f(config.token_file);
        if (!f)
            throw config::ConfigError("server.token_file: cannot read " +
                                      config.token_file.string());
        std::getline(f, token);
    } else if (const char* env = std::getenv("RACKPROF_API_TOKEN")) {
        token = env;
    }
    while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back())))
        token.pop_back();
    if (!config.token_file.empty() && token.empty())
        throw config::ConfigError("server.token_file: " + config.token_file.string() + " is empty");
    return token;
}

// The embedded default's simulated boards get their models' ELFs (written next to the
// database), so profiles and live views name functions out of the box.
void give_simulated_boards_firmware(config::DaemonConfig& config) {
    const auto dir = config.storage_path.parent_path() / "firmware";
    for (config::BoardConfig& b : config.boards) {
        const config::LinkUri uri = config::parse_link_uri(b.link);
        if (uri.scheme != "sim" || !b.elf.empty()) continue;
        sim::SimulatorOptions model;
        model.model = uri.path;
        const sim::GroundTruth truth =
            sim::simulate_board(model, [](const std::uint8_t*, std::size_t) {});
        std::filesystem::create_directories(dir);
        const auto path = dir / (uri.path + ".elf");
        sim::write_model_elf(path, truth);
        b.elf = path.string();
    }
}

// Where a browser on this machine finds the dashboard: a wildcard address is reached through
// loopback; IPv6 addresses go in brackets.
std::string dashboard_url(const boost::asio::ip::tcp::endpoint& bound) {
    auto address = bound.address();
    if (address.is_unspecified()) {
        address = address.is_v6()
                      ? boost::asio::ip::address(boost::asio::ip::address_v6::loopback())
                      : boost::asio::ip::address(boost::asio::ip::address_v4::loopback());
    }
    const std::string host =
        address.is_v6() ? "[" + address.to_string() + "]" : address.to_string();
    return "http://" + host + ":" + std::to_string(bound.port()) + "/";
}

// The last line: everything committed, or what storage failures cost this run.
void log_what_was_committed(spdlog::logger& log, const storage::StorageLossTotals& losses) {
    if (losses.all_committed()) {
        log.info("stopped; everything captured is committed");
        return;
    }
    std::string sessions;
    for (const auto id : losses.sessions)
        sessions += (sessions.empty() ? "" : ", ") + std::to_string(id);
    log.error(
        "stopped; NOT everything captured was committed: {} records ({} bytes) lost to storage "
        "failures, {} operation(s) never written; session(s) {}",
        losses.records, losses.bytes, losses.operations_uncommitted, sessions);
}

// Large answers are built in buffers of tens of MB (a gmon.out of 10^6 arcs sorts 16 MB of
// arcs). By default glibc maps each such buffer afresh and unmaps it after the answer, so every
// request faults its pages in again, zeroed: most of such a request's time. Kept in the heap
// and not given back below 128 MiB, the pages stay mapped from one answer to the next, at the
// cost of holding up to that much more memory after the largest answers.
void keep_answer_buffers_mapped() {
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest allowed value on 64-bit
    mallopt(M_TRIM_THRESHOLD, 128 << 20);
#endif
}

// The configuration serve runs on, --listen over it; nullopt (said on stderr) when invalid.
std::optional<config::DaemonConfig> serve_config(const ServeArgs& cl) {
    config::DaemonConfig config;
    try {
        config = cl.config ? config::load_config(*cl.config) : config::embedded_default_config();
    } catch (const config::ConfigError& e) {
        std::cerr << "rackprof serve: invalid configuration: " << e.what() << "\n";
        return std::nullopt;
    }
    if (cl.listen) config.listen = *cl.listen;
    if (const char* url = std::getenv("RACKPROF_FLEET_URL"); url && *url) config.fleet.url = url;
    if (!config.fleet.url.empty()) {
        try {
            storage::fleet::check_fleet_url(config.fleet.url);
        } catch (const std::invalid_argument& e) {
            std::cerr << "rackprof serve: invalid configuration: fleet.url: " << e.what() << "\n";
            return std::nullopt;
        }
    }
    config::make_paths_absolute(config);
    return config;
}

// [fleet]: completed sessions pushed to PostgreSQL in the background; selections served
// from it (every bench's sessions). Null without a fleet store.
std::unique_ptr<fleet::FleetPusher> start_fleet(const config::DaemonConfig& config,
                                                capture::CaptureService& service,
                                                rackprof::daemon::service::LocalRack& rack,
                                                web::api::ApiOptions& api_options,
                                                const std::shared_ptr<spdlog::logger>& log) {
    if (config.fleet.url.empty()) return nullptr;
    auto pusher = std::make_unique<fleet::FleetPusher>(
        config.fleet, config.storage_path,
        [&service] {
            std::map<std::string, std::vector<std::string>> tags;
            for (const auto& b : service.board_configs()) tags[b.name] = b.tags;
            return tags;
        },
        log);
    fleet::FleetPusher* p = pusher.get();
    rack.use_fleet(std::make_shared<rackprof::daemon::service::FleetSource>(
                       fleet::fleet_connection(config.fleet),
                       config.storage_path.parent_path() / "fleet-firmware"),
                   [p] { return p->status_json(); });
    log->info("fleet: selections are served from {}",
              storage::fleet::redacted_url(config.fleet.url));
    api_options.metrics_sources.push_back([p](web::api::MetricsText& out) {
        const auto s = p->status();
        out.family(
            "rackprof_fleet_pending_sessions", "gauge",
            "Completed sessions not yet in the fleet store (absent until it answered once).");
        if (s.pending) {
            out.sample("rackprof_fleet_pending_sessions", {}, static_cast<double>(*s.pending));
        }
        out.family("rackprof_fleet_pushed_sessions_total", "counter",
                   "Sessions pushed to the fleet store by this process.");
        out.sample("rackprof_fleet_pushed_sessions_total", {}, static_cast<double>(s.pushed));
        out.family("rackprof_fleet_push_failures_total", "counter",
                   "Push rounds that failed (and were retried).");
        out.sample("rackprof_fleet_push_failures_total", {}, static_cast<double>(s.failures));
    });
    return pusher;
}

// Who may do what over HTTP, and where the dashboard is.
void configure_api(web::api::ApiOptions& api_options, const config::DaemonConfig& config,
                   const boost::asio::ip::tcp::endpoint& endpoint,
                   const std::shared_ptr<spdlog::logger>& log) {
    // A configured token guards every mutation, loopback included (a local user who is not the
    // operator is a client too); off loopback one is needed even when none is configured.
    api_options.require_token =
        !api_options.token.empty() || !endpoint.address().is_loopback() || config.token_for_reads;
    api_options.token_for_reads = config.token_for_reads;
    // Escaped: a failure's text may quote a client or a PostgreSQL server.
    api_options.log_error = [log](const std::string& what) {
        log->error("http: {}", config::printable(what));
    };
    std::error_code no_exe;
    api_options.web_root = web::server::find_web_root(
        config.web_root, std::filesystem::read_symlink("/proc/self/exe", no_exe),
        RACKPROF_SOURCE_WEB_DIST);
    if (std::filesystem::is_regular_file(api_options.web_root / "index.html", no_exe)) {
        log->info("dashboard: serving {}", api_options.web_root.string());
    } else {
        log->warn("dashboard: {} holds no built dashboard (run ./setup.sh or set server.web_root)",
                  api_options.web_root.string());
    }
    if (!api_options.require_token) {
        log->warn(
            "no API token configured: any local user can change boards and sessions "
            "(set server.token_file; the package creates one)");
    }
    if (api_options.require_token && api_options.token.empty()) {
        log->warn("listening on {} without a token: every mutating request will be refused (401)",
                  config.listen);
    }
}

// What runs: the configuration, the storage and the boards.
void log_start(const config::DaemonConfig& config, bool embedded_default, spdlog::logger& log) {
    log.info("rackprof serve {}: configuration {}, storage {}, {} board(s)", RACKPROF_VERSION,
             config.source, config.storage_path.string(), config.boards.size());
    if (embedded_default && !config.boards.empty()) {
        log.info("embedded default: simulated boards' firmware written to {}",
                 std::filesystem::path(config.boards.front().elf).parent_path().string());
    }
}

// Signals are taken by the main thread alone, with sigwait: blocked before any thread starts.
sigset_t block_signals() {
    sigset_t signals;
    sigemptyset(&signals);
    for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&signals, sig);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    return signals;
}

// Every board event to the events feed's clients.
void publish_board_events(capture::CaptureService& service, web::feeds::LiveFeeds& feeds) {
    service.on_event([&feeds](const capture::BoardEvent& e, std::int64_t session_id) {
        nlohmann::json event = {
            {"board", e.board},
            {"kind", e.kind},
            {"state", e.state},
            {"reason", e.reason},
            {"session", session_id ? nlohmann::json(session_id) : nlohmann::json(nullptr)},
            {"at_ns", capture::unix_now_ns()}};
        feeds.publish_event(event.dump());
    });
}

// Until SIGTERM or SIGINT; SIGHUP reloads the configuration file.
void serve_until_stopped(const ServeArgs& cl, const sigset_t& signals,
                         capture::CaptureService& service, SystemdNotifier& systemd,
                         spdlog::logger& log) {
    while (true) {
        int signal = 0;
        sigwait(&signals, &signal);
        if (signal != SIGHUP) {
            log.info("{}: stopping", signal == SIGTERM ? "SIGTERM" : "SIGINT");
            return;
        }
        if (!cl.config) {
            log.info("SIGHUP: running on the embedded default, there is no file to reload");
            continue;
        }
        systemd.reloading();
        try {
            config::DaemonConfig next = config::load_config(*cl.config);
            config::make_paths_absolute(next);
            service.reload(next);
            log.info("SIGHUP: configuration reloaded, {} board(s)", next.boards.size());
        } catch (const config::ConfigError& e) {
            log.error("SIGHUP: invalid configuration, keeping the running one: {}", e.what());
        }
        systemd.ready("capturing from " + std::to_string(service.boards().size()) + " board(s)");
    }
}

// The API's address, and its token into `api_options`; nullopt (said in the log) when either
// is wrong.
std::optional<boost::asio::ip::tcp::endpoint> listen_endpoint(const ServeArgs& cl,
                                                              const config::DaemonConfig& config,
                                                              web::api::ApiOptions& api_options,
                                                              spdlog::logger& log) {
    try {
        const auto endpoint = web::server::parse_listen_address(config.listen);
        api_options.token = api_token(config);
        return endpoint;
    } catch (const std::invalid_argument& e) {
        log.error("{}: {}", cl.listen ? "--listen" : "server.listen", e.what());
    } catch (const config::ConfigError& e) {
        log.error("{}", e.what());
    }
    return std::nullopt;
}

// The live feeds' clients on /metrics, once `feeds` is set (the feeds need the server's
// io_context, which comes after the API's options).
web::api::MetricsSource feed_client_metrics(web::feeds::LiveFeeds* const& feeds) {
    return [&feeds](web::api::MetricsText& out) {
        if (!feeds) return;
        const auto clients = feeds->clients();
        out.family("rackprof_feed_clients", "gauge", "Connected WebSocket clients, by feed.");
        out.sample("rackprof_feed_clients", {{"feed", "live"}}, static_cast<double>(clients.live));
        out.sample("rackprof_feed_clients", {{"feed", "events"}},
                   static_cast<double>(clients.events));
    };
}

// systemd's watchdog, pinged from the capture loop itself: a stuck loop stops the pings and
// systemd acts.
void start_watchdog(capture::CaptureService& service, SystemdNotifier& systemd,
                    spdlog::logger& log) {
    if (const auto interval = systemd.watchdog_interval()) {
        service.set_heartbeat(*interval / 2, [&systemd] { systemd.watchdog(); });
        log.info("systemd watchdog: pinging every {} ms", (*interval / 2).count() / 1000);
    }
}

// One daemon per database: taken before anything is changed (the database, the firmware
// folder); nullopt (said in the log) when another process holds it.
std::optional<storage::DatabaseLock> lock_database(const config::DaemonConfig& config,
                                                   spdlog::logger& log) {
    try {
        std::filesystem::create_directories(config.storage_path.parent_path());
        return std::optional<storage::DatabaseLock>(std::in_place, config.storage_path);
    } catch (const storage::DatabaseLocked& e) {
        log.error("{}", e.what());
    } catch (const std::exception& e) {
        log.error("cannot lock the database: {}", e.what());
    }
    return std::nullopt;
}

int run_serve(const ServeArgs& cl) {
    auto configured = serve_config(cl);
    if (!configured) return 2;
    config::DaemonConfig& config = *configured;
    const std::string level = cl.log_level.value_or(config.log_level);
    auto log = make_logger(level);
    keep_answer_buffers_mapped();

    const sigset_t signals = block_signals();

    // Checked before storage opens: a bad address or token must not leave a database behind.
    web::api::ApiOptions api_options;
    const auto endpoint = listen_endpoint(cl, config, api_options, *log);
    if (!endpoint) return 2;
    const std::optional<storage::DatabaseLock> lock = lock_database(config, *log);
    if (!lock) return 2;
    if (!cl.config) give_simulated_boards_firmware(config);
    log_start(config, !cl.config, *log);
    capture::CaptureService service(config, log);  // storage is open from here on

    daemon::service::LocalRack rack(service, config.storage_path);  // what web/ goes through
    rack.set_source_roots(config.source_roots);
    // [fleet]: completed sessions pushed to PostgreSQL in the background; selections served
    // from it (every bench's sessions).
    std::unique_ptr<fleet::FleetPusher> pusher =
        start_fleet(config, service, rack, api_options, log);

    configure_api(api_options, config, *endpoint, log);
    web::feeds::LiveFeeds* feeds_for_metrics = nullptr;  // the feeds need the server's io_context
    api_options.metrics_sources.push_back(feed_client_metrics(feeds_for_metrics));
    web::api::Api api(rack, api_options);
    web::server::HttpServer server(api, log);
    web::feeds::LiveFeeds feeds(
        server.io(), rack,
        {api_options.token, api_options.require_token, api_options.token_for_reads});
    feeds_for_metrics = &feeds;
    server.set_feeds(&feeds);
    server.set_upload_dir(config.storage_path.parent_path());  // uploads beside the database
    publish_board_events(service, feeds);
    service.start();
    if (pusher) pusher->start();
    try {
        const auto bound = server.start(config.listen);
        log->info("HTTP API listening on {}:{}", bound.address().to_string(), bound.port());
        log->info("open the dashboard at {}", dashboard_url(bound));
        feeds.start();
    } catch (const std::exception& e) {
        log->error("{}", e.what());
        service.shutdown();
        return 1;
    }
    SystemdNotifier systemd;
    start_watchdog(service, systemd, *log);
    systemd.ready("capturing from " + std::to_string(config.boards.size()) + " board(s)");

    serve_until_stopped(cl, signals, service, systemd, *log);
    systemd.stopping();
    if (pusher) pusher->stop();
    feeds.stop();
    server.stop();
    service.shutdown();
    log_what_was_committed(*log, service.storage_losses());
    return 0;
}

}  // namespace

CommandRun add_serve_command(CLI::App& root) {
    auto args = std::make_shared<ServeArgs>();
    CLI::App& app = add_command(
        root, "serve",
        "run the capture daemon (embedded default: a simulated rack, ./var/rackprof.db)",
        kServeAbout);
    app.add_option("--config", args->config,
                   "the configuration (TOML; `rackprof check --config FILE` validates one)")
        ->type_name("FILE");
    app.add_option(
           "--listen", args->listen,
           "the HTTP API's address, over server.listen (default: " + config::DaemonConfig{}.listen +
               "):\n127.0.0.1:8081, [::1]:8080, 0.0.0.0:8080; port 0 takes any free "
               "port (the log says which)")
        ->type_name("ADDR");
    app.add_option("--log-level", args->log_level, "over logging.level")
        ->type_name("LEVEL")
        ->check(CLI::Validator(
            [](std::string& level) {
                try {
                    config::check_log_level(level);
                } catch (const config::ConfigError& e) {
                    return std::string(e.what());
                }
                return std::string();
            },
            "trace|debug|info|warn|error"));
    return [args] { return run_serve(*args); };
}

}  // namespace rackprof::daemon::app
