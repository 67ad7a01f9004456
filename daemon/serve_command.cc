// `rackprof serve`: the capture daemon. Runs until SIGTERM or SIGINT, then stops reading,
// hands everything to storage, marks sessions completed and exits 0.
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "daemon/capture_service.h"
#include "daemon/command_line.h"
#include "daemon/commands.h"

namespace rackprof::daemon {

namespace {

constexpr const char* kUsage = R"(usage: rackprof serve [--config FILE] [--log-level LEVEL]

Runs the capture daemon: opens every board's link, captures sessions into SQLite, and keeps
going through unplugs and reconnects. Without --config it runs on the embedded default: a
database under ./var and a small simulated rack. SIGTERM or SIGINT stops it cleanly.
)";

std::shared_ptr<spdlog::logger> make_logger(const std::string& level) {
    auto log = spdlog::stderr_color_mt("rackprof");
    // Under journald the journal adds its own timestamps.
    log->set_pattern(std::getenv("JOURNAL_STREAM") ? "<%^%l%$> %v"
                                                   : "%Y-%m-%d %H:%M:%S.%e %^%l%$ %v");
    log->set_level(spdlog::level::from_str(level));
    log->flush_on(spdlog::level::info);
    return log;
}

}  // namespace

int run_serve(const std::vector<std::string>& args) {
    const CommandLine cl(args, {"--config", "--log-level"}, {"--help", "-h"});
    if (cl.has("--help") || cl.has("-h")) {
        std::cout << kUsage;
        return 0;
    }
    if (!cl.positionals().empty())
        throw UsageError("unexpected argument '" + cl.positionals()[0] + "'");
    DaemonConfig config;
    try {
        config =
            cl.has("--config") ? load_config(cl.get("--config", "")) : embedded_default_config();
    } catch (const ConfigError& e) {
        std::cerr << "rackprof serve: invalid configuration: " << e.what() << "\n";
        return 2;
    }
    const std::string level = cl.get("--log-level", config.log_level);
    auto log = make_logger(level);

    // Signals are taken by this thread alone, with sigwait: block them before any thread starts.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);

    log->info("rackprof serve {}: configuration {}, storage {}, {} board(s)", RACKPROF_VERSION,
              config.source, config.storage_path.string(), config.boards.size());
    CaptureService service(config, log);
    service.start();

    int signal = 0;
    sigwait(&signals, &signal);
    log->info("{}: stopping", signal == SIGTERM ? "SIGTERM" : "SIGINT");
    service.shutdown();
    log->info("stopped; everything captured is committed");
    return 0;
}

}  // namespace rackprof::daemon
