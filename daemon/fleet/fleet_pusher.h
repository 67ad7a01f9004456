// The bench's side of the fleet store: a background thread that pushes every completed session
// of the local SQLite database to PostgreSQL. Capture never waits on it (it reads the database
// through its own read-only connection, as any reader does); a push is one transaction keyed by
// (bench, local id, start time), so retrying after an outage never doubles a session. Failures
// back off exponentially (push_interval doubling up to retry_max); a bench offline for a day
// catches up on its next successful round.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/logger.h>
#include <nlohmann/json.hpp>

#include "daemon/config/config.h"
#include "storage/fleet/fleet_url.h"
#include "storage/session_store.h"

namespace rackprof::storage::fleet {
class FleetStore;
}

namespace rackprof::daemon::fleet {

// The host name: a bench's name in the fleet when [fleet] bench names none.
std::string host_name();
// The configuration's TLS and password settings as the fleet store takes them.
storage::fleet::FleetConnection fleet_connection(const config::FleetConfig& config);

class FleetPusher {
  public:
    // A round reads what changed, not the whole database on either side: idle, the pusher's
    // cost does not grow with the sessions pushed. Now and then it looks at everything.
    static constexpr std::chrono::minutes kFullLookInterval{5};
    struct Status {
        std::string bench;
        // Completed local sessions not in the fleet: counted in the local database against what
        // the fleet last said it holds; nullopt until the fleet has answered once.
        std::optional<std::uint64_t> pending;
        std::uint64_t pushed = 0;  // pushed by this process
        std::uint64_t failures = 0;
        std::string last_error;            // "" after a successful round
        std::int64_t next_attempt_ns = 0;  // Unix ns
        std::int64_t last_success_ns = 0;  // Unix ns; 0: none yet
        double last_push_seconds = 0;      // the latest session's push
    };
    // `tags_of`: the boards' tags now (board name -> tags), labels pushed with each session.
    FleetPusher(config::FleetConfig config, std::filesystem::path storage_path,
                std::function<std::map<std::string, std::vector<std::string>>()> tags_of,
                std::shared_ptr<spdlog::logger> log);
    ~FleetPusher();  // stops
    FleetPusher(const FleetPusher&) = delete;
    FleetPusher& operator=(const FleetPusher&) = delete;

    void start();
    void stop();
    // Look for completed sessions now (a session just ended).
    void wake();
    Status status() const;
    nlohmann::json status_json() const;

  private:
    void run();
    void push_round();  // throws on any failure
    // The local sessions completed since the last look that the fleet does not hold: the
    // sessions created since, and those that were still capturing then. Every
    // kFullLookInterval (and on each new connection) all of them, so a session that became
    // visible out of id order is found too.
    std::vector<storage::SessionInfo> newly_waiting(storage::SessionStore& local);
    // During an outage: pending counted in the local database against the fleet's last answer.
    void recount_pending();
    // A completed local session the fleet does not hold (in_fleet_ set).
    bool waits(const storage::SessionInfo& s) const;

    config::FleetConfig config_;
    std::filesystem::path storage_path_;
    std::function<std::map<std::string, std::vector<std::string>>()> tags_of_;
    std::shared_ptr<spdlog::logger> log_;
    std::unique_ptr<storage::fleet::FleetStore>
        store_;  // the thread's own; null while disconnected
    // The pusher thread's own: the (id, start) pairs the fleet held at its last answer, plus
    // those pushed since, and its retention bound then.
    std::optional<std::set<std::pair<std::int64_t, std::int64_t>>> in_fleet_;
    std::int64_t retained_from_ = 0;
    // The pusher thread's own: the local sessions looked at up to this id; of those, the ones
    // that were still capturing; when all of them were last looked at.
    std::int64_t seen_to_id_ = 0;
    std::set<std::int64_t> open_;
    std::chrono::steady_clock::time_point full_look_at_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    bool stopping_ = false;
    bool woken_ = false;
    Status status_;
    std::thread thread_;
};

}  // namespace rackprof::daemon::fleet
