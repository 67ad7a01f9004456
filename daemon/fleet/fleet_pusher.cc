#include "daemon/fleet/fleet_pusher.h"

#include <pthread.h>

#include <unistd.h>

#include <algorithm>

#include "daemon/service/selection.h"
#include "gmon/symbolizer.h"
#include "storage/fleet/fleet_store.h"
#include "storage/session_store.h"

namespace rackprof::daemon::fleet {
namespace {

std::int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

}  // namespace

std::string host_name() {
    char name[256] = {};
    if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "bench";
    return name;
}

storage::fleet::FleetConnection fleet_connection(const config::FleetConfig& c) {
    const storage::fleet::PgLimits limits{static_cast<std::size_t>(c.max_reply_mib) << 20,
                                          c.reply_timeout};
    return {c.url, c.password_file, c.sslmode, c.sslrootcert, c.sslcert, c.sslkey, limits};
}

FleetPusher::FleetPusher(config::FleetConfig config, std::filesystem::path storage_path,
                         std::function<std::map<std::string, std::vector<std::string>>()> tags_of,
                         std::shared_ptr<spdlog::logger> log)
    : config_(std::move(config)),
      storage_path_(std::move(storage_path)),
      tags_of_(std::move(tags_of)),
      log_(std::move(log)) {
    if (config_.bench.empty()) config_.bench = host_name();
    status_.bench = config_.bench;
}

FleetPusher::~FleetPusher() {
    stop();
}

void FleetPusher::start() {
    log_->info("fleet: pushing completed sessions as bench '{}' to {}", config_.bench,
               storage::fleet::redacted_url(config_.url));
    thread_ = std::thread([this] { run(); });
    // Named, so its own CPU can be read (/proc/PID/task/*/comm): the soak's idle bound.
    pthread_setname_np(thread_.native_handle(), "fleet-push");
}

void FleetPusher::stop() {
    {
        const std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void FleetPusher::wake() {
    {
        const std::lock_guard lock(mutex_);
        woken_ = true;
    }
    wake_.notify_all();
}

FleetPusher::Status FleetPusher::status() const {
    const std::lock_guard lock(mutex_);
    return status_;
}

nlohmann::json FleetPusher::status_json() const {
    const Status s = status();
    const auto time = [](std::int64_t ns) { return ns ? nlohmann::json(ns) : nlohmann::json(); };
    return {{"bench", s.bench},
            {"state", s.last_error.empty() ? "ok" : "retrying"},
            {"pending", s.pending ? nlohmann::json(*s.pending) : nlohmann::json()},
            {"pushed", s.pushed},
            {"failures", s.failures},
            {"last_error", s.last_error.empty() ? nlohmann::json() : nlohmann::json(s.last_error)},
            {"next_attempt_ns", time(s.next_attempt_ns)},
            {"last_success_ns", time(s.last_success_ns)},
            {"last_push_ms", s.last_push_seconds * 1000}};
}

void FleetPusher::run() {
    auto delay = config_.push_interval;
    while (true) {
        try {
            push_round();
            delay = config_.push_interval;
            const std::lock_guard lock(mutex_);
            status_.last_error.clear();
            status_.last_success_ns = now_ns();
        } catch (const std::exception& e) {
            store_.reset();  // a fresh connection next time
            // Doubling from the push interval up to retry_max: an outage costs few attempts.
            delay = std::min(config_.retry_max, delay * 2);
            const std::lock_guard lock(mutex_);
            ++status_.failures;
            // The server's words: escaped, so they cannot forge log lines or move a terminal.
            if (status_.last_error != e.what())
                log_->warn("fleet: push failed (retrying in {} ms): {}", delay.count(),
                           config::printable(e.what()));
            status_.last_error = e.what();
        }
        if (!status_.last_error.empty()) recount_pending();
        std::unique_lock lock(mutex_);
        status_.next_attempt_ns =
            now_ns() + std::chrono::duration_cast<std::chrono::nanoseconds>(delay).count();
        // A wake (a session ended) only shortens the normal interval, never a backoff.
        const bool backing_off = !status_.last_error.empty();
        wake_.wait_for(lock, delay, [&] { return stopping_ || (woken_ && !backing_off); });
        woken_ = false;
        if (stopping_) return;
    }
}

void FleetPusher::push_round() {
    if (!store_) {
        store_ = std::make_unique<storage::fleet::FleetStore>(fleet_connection(config_));
        // A new connection (the first, or after a failure): what the fleet holds is read again
        // and every local session looked at. Between, the pusher adds what it pushes itself.
        in_fleet_ = store_->pushed(config_.bench);
        seen_to_id_ = 0;
    }
    if (!std::filesystem::exists(storage_path_)) return;
    storage::SessionStore local(storage_path_, storage::Database::Mode::kReadOnly);
    // Fleet retention removed what ended before this (`rackprof fleet prune`): not pushed again.
    retained_from_ = store_->retained_from();
    std::vector<storage::SessionInfo> waiting = newly_waiting(local);
    {
        const std::lock_guard lock(mutex_);
        status_.pending = waiting.size();
    }
    if (waiting.empty()) return;
    const auto tags = tags_of_();
    std::map<std::string, std::shared_ptr<const gmon::Symbolizer>> elves;
    for (const auto& s : waiting) {
        const auto started = std::chrono::steady_clock::now();
        std::shared_ptr<const gmon::Symbolizer> elf;
        if (!s.spec.elf_path.empty()) {
            auto& cached = elves[s.spec.elf_path];
            try {
                if (!cached) cached = gmon::Symbolizer::load(s.spec.elf_path);
            } catch (const std::exception&) {
                // Gone or unreadable: the session is pushed without firmware.
            }
            elf = cached;
        }
        storage::fleet::PushedSession pushed{config_.bench, s, {}, service::build_id_of(s)};
        if (const auto it = tags.find(s.spec.board); it != tags.end()) pushed.tags = it->second;
        const bool added = store_->push_session(pushed, local.aggregate(s.id), elf);
        in_fleet_->insert({s.id, s.spec.started_ns});
        const std::lock_guard lock(mutex_);
        if (added) {
            ++status_.pushed;
            status_.last_push_seconds =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        }
        if (status_.pending > 0) *status_.pending -= 1;
    }
    log_->info("fleet: pushed {} session(s) as bench '{}'", waiting.size(), config_.bench);
}

std::vector<storage::SessionInfo> FleetPusher::newly_waiting(storage::SessionStore& local) {
    const auto now = std::chrono::steady_clock::now();
    if (seen_to_id_ == 0 || now - full_look_at_ >= kFullLookInterval) {
        seen_to_id_ = 0;
        open_.clear();
        full_look_at_ = now;
    }
    std::vector<storage::SessionInfo> looked_at;
    for (const std::int64_t id : open_) {
        if (auto s = local.session(id)) looked_at.push_back(std::move(*s));
    }
    for (auto& s : local.sessions_after(seen_to_id_)) looked_at.push_back(std::move(s));
    std::vector<storage::SessionInfo> waiting;
    open_.clear();
    for (auto& s : looked_at) {
        seen_to_id_ = std::max(seen_to_id_, s.id);
        if (s.state == "capturing")
            open_.insert(s.id);
        else if (waits(s))
            waiting.push_back(std::move(s));
    }
    return waiting;
}

bool FleetPusher::waits(const storage::SessionInfo& s) const {
    return s.state != "capturing"  // completed sessions only: counts are final
           && !in_fleet_->count({s.id, s.spec.started_ns}) &&
           storage::fleet::fleet_session_end(s) >= retained_from_;
}

void FleetPusher::recount_pending() {
    if (!in_fleet_) return;  // the fleet never answered: unknown, not 0
    std::uint64_t waiting = 0;
    try {
        if (!std::filesystem::exists(storage_path_)) return;
        storage::SessionStore local(storage_path_, storage::Database::Mode::kReadOnly);
        for (const auto& s : local.sessions()) waiting += waits(s) ? 1 : 0;
    } catch (const std::exception&) {
        return;  // the local database unreadable now: the last count stands
    }
    const std::lock_guard lock(mutex_);
    status_.pending = waiting;
}

}  // namespace rackprof::daemon::fleet
