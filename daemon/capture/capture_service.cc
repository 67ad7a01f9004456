#include "daemon/capture/capture_service.h"

#include "storage/session_store.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <future>

namespace rackprof::daemon::capture {

namespace {

// The writer rate-limits its reports; each is one log line.
void log_storage_event(spdlog::logger& log, const storage::StorageEvent& e) {
    using Kind = storage::StorageEvent::Kind;
    switch (e.kind) {
        case Kind::kRecovered:
        case Kind::kSessionLosses:
        case Kind::kEarlierRunFinished:
        case Kind::kSealFailed:
            log.warn("{}", e.message);
            return;
        case Kind::kPruned:
        case Kind::kSealed:
            log.info("{}", e.message);
            return;
        default:
            log.error("{}", e.message);
    }
}

}  // namespace

CaptureService::CaptureService(config::DaemonConfig config, std::shared_ptr<spdlog::logger> log)
    : config_(std::move(config)), log_(std::move(log)) {
    if (config_.storage_path.has_parent_path())
        std::filesystem::create_directories(config_.storage_path.parent_path());
    storage::StorageWriterOptions options;
    options.aggregates = &aggregates_;
    options.retention.rules = {config_.keep_raw_days, config_.keep_sessions_days};
    writer_ = std::make_unique<storage::StorageWriter>(config_.storage_path, options);
    writer_->on_event([log = log_](const storage::StorageEvent& e) { log_storage_event(*log, e); });
    const storage::IntegrityReport& check = writer_->check_at_start();
    if (!check.cannot_check.empty()) {
        log_->error(
            "storage: cannot check {} at start (I/O error: disk full?): {}; starting without "
            "the check (`rackprof check --db {}` once the disk is sound)",
            config_.storage_path.string(), config::printable(check.cannot_check),
            config_.storage_path.string());
    } else if (!check.whole_file) {
        log_->info(
            "storage: {} is over {} MiB: its header and small tables were checked at start, not "
            "every page (`rackprof check --db {}` checks everything)",
            config_.storage_path.string(), storage::kFullCheckAtStartBytes >> 20,
            config_.storage_path.string());
    }
    if (!writer_->earlier_run_unfinished_at_start().empty()) {
        log_->error(
            "storage: cannot finish the earlier run's sessions at start ({}); capturing all the "
            "same, they are finished at the first commit that succeeds",
            config::printable(writer_->earlier_run_unfinished_at_start()));
    }
    if (writer_->interrupted_at_start() > 0) {
        log_->warn("{} session(s) left capturing by an earlier run are now marked interrupted",
                   writer_->interrupted_at_start());
    }
    for (const config::BoardConfig& b : config_.boards) {
        boards_.push_back(make_board(b));
    }
    // Boards added through the API in earlier runs.
    storage::SessionStore stored(config_.storage_path, storage::Database::Mode::kReadOnly);
    for (const auto& [name, text] : stored.stored_boards()) {
        try {
            config::BoardConfig b = config::board_from_json(nlohmann::json::parse(text));
            // Created over the API: still bound by what the API may open (an older rackprof
            // let any link through, and the board would be reopened at every start).
            config::LinkPolicy{config_.api_links}.check(b.link);
            if (std::any_of(boards_.begin(), boards_.end(),
                            [&](const auto& x) { return x->name() == b.name; })) {
                log_->warn(
                    "[{}] defined in the configuration file and through the API; the file wins",
                    name);
                continue;
            }
            api_boards_.insert(b.name);
            boards_.push_back(make_board(b));
        } catch (const std::exception& e) {
            log_->error("[{}] stored board is unusable, skipped: {}", config::printable(name),
                        e.what());
        }
    }
}

CaptureService::~CaptureService() {
    shutdown();
}

std::unique_ptr<Board> CaptureService::make_board(const config::BoardConfig& b) {
    return std::make_unique<Board>(
        io_, b, *writer_, log_, config_.reconnect_min, config_.reconnect_max,
        config_.storage_path.parent_path() / "firmware",
        [this](const BoardEvent& e) {
            if (events_) events_(e, e.session.value_or(0));
        },
        &live_);
}

// Every board publishes its session's live snapshot at this pace, on the capture thread.
void CaptureService::publish_live() {
    constexpr auto kPeriod = std::chrono::milliseconds(100);
    for (auto& board : boards_) board->publish_live();
    publish_timer_->expires_after(kPeriod);
    publish_timer_->async_wait([this](const boost::system::error_code& ec) {
        if (!ec) publish_live();
    });
}

std::optional<LiveSnapshot> CaptureService::live_snapshot(std::int64_t session_id) {
    if (session_id <= 0) return std::nullopt;
    return live_.snapshot(session_id);
}

void CaptureService::start() {
    if (running_) return;
    running_ = true;
    publish_timer_ = std::make_unique<boost::asio::steady_timer>(io_);
    boost::asio::post(io_, [this] {
        publish_live();
        for (auto& board : boards_) {
            try {
                board->start();
            } catch (const std::exception& e) {
                log_->error("[{}] cannot start: {}", board->name(), e.what());  // the others go on
            }
        }
    });
    thread_ = std::thread([this] {
        auto work = boost::asio::make_work_guard(io_);
        io_.run();
    });
}

template <typename F>
auto CaptureService::on_capture_thread(F&& f) -> decltype(f()) {
    using Result = decltype(f());
    if (!running_ || !thread_.joinable() || std::this_thread::get_id() == thread_.get_id())
        return f();
    std::packaged_task<Result()> task(std::forward<F>(f));
    auto result = task.get_future();
    boost::asio::post(io_, [&task] { task(); });
    return result.get();
}

void CaptureService::shutdown() {
    if (running_) {
        // On the capture thread, so no link callback runs while boards stop.
        on_capture_thread([this] {
            if (heartbeat_) heartbeat_->cancel();
            if (publish_timer_) publish_timer_->cancel();
            heartbeat_tick_.reset();
            for (auto& board : boards_) board->shutdown();
            return 0;
        });
        io_.stop();
        if (thread_.joinable()) thread_.join();
        running_ = false;
    }
    boards_.clear();
    if (writer_) writer_->stop();  // commits what the boards handed over
}

void CaptureService::reload(const config::DaemonConfig& next) {
    if (next.storage_path != config_.storage_path) {
        log_->warn("reload: storage.path changed to {}; it takes effect at the next start",
                   next.storage_path.string());
    }
    if (next.keep_raw_days != config_.keep_raw_days ||
        next.keep_sessions_days != config_.keep_sessions_days) {
        log_->warn(
            "reload: storage.keep_raw_days / keep_sessions_days changed; they take effect at the "
            "next start");
    }
    config_.reconnect_min = next.reconnect_min;  // boards made from here on use the new values
    config_.reconnect_max = next.reconnect_max;
    on_capture_thread([&] {
        std::vector<std::unique_ptr<Board>> kept;
        for (auto& board : boards_) {
            if (api_boards_.count(
                    board->name())) {  // the API's boards are not the file's to change
                kept.push_back(std::move(board));
                continue;
            }
            const auto wanted =
                std::find_if(next.boards.begin(), next.boards.end(),
                             [&](const config::BoardConfig& b) { return b.name == board->name(); });
            if (wanted != next.boards.end() && *wanted == board->config()) {
                kept.push_back(std::move(board));
                continue;
            }
            log_->info("[{}] {}", board->name(),
                       wanted == next.boards.end() ? "removed" : "changed: restarting");
            board->shutdown();
        }
        for (const config::BoardConfig& b : next.boards) {
            const bool present = std::any_of(kept.begin(), kept.end(),
                                             [&](const auto& k) { return k->name() == b.name; });
            if (present) continue;
            kept.push_back(make_board(b));
            try {
                kept.back()->start();
            } catch (const std::exception& e) {
                log_->error("[{}] cannot start: {}", b.name, e.what());
            }
        }
        boards_ = std::move(kept);
        return 0;
    });
    const auto storage_path = config_.storage_path;
    config_ = next;
    config_.storage_path = storage_path;
}

void CaptureService::set_heartbeat(std::chrono::microseconds interval, std::function<void()> beat) {
    on_capture_thread([&] {
        heartbeat_ = std::make_unique<boost::asio::steady_timer>(io_);
        auto tick = std::make_shared<std::function<void()>>();
        *tick = [this, interval, beat = std::move(beat),
                 weak = std::weak_ptr<std::function<void()>>(tick)] {
            beat();
            heartbeat_->expires_after(interval);
            heartbeat_->async_wait([weak](const boost::system::error_code& ec) {
                if (auto t = weak.lock(); t && !ec) (*t)();
            });
        };
        heartbeat_tick_ = tick;
        (*tick)();
        return 0;
    });
}

std::vector<BoardStatus> CaptureService::boards() {
    return on_capture_thread([this] {
        std::vector<BoardStatus> status;
        for (auto& board : boards_) status.push_back(board->status());
        return status;
    });
}

std::int64_t CaptureService::start_session(const std::string& name) {
    const auto id = on_capture_thread([&]() -> std::optional<storage::SessionId> {
        for (auto& board : boards_) {
            if (board->name() == name && board->start_session()) return board->status().session;
        }
        return std::nullopt;
    });
    if (!id) return 0;
    writer_->flush();  // the row exists once this returns (unless storage is failing)
    return *id;
}

bool CaptureService::stop_session(const std::string& name) {
    const bool found = on_capture_thread([&] {
        for (auto& board : boards_) {
            if (board->name() == name) {
                board->stop_session();
                return true;
            }
        }
        return false;
    });
    if (found && std::this_thread::get_id() != thread_.get_id())
        writer_->flush();  // stored as completed on return
    return found;
}

CaptureService::BoardChange CaptureService::add_board(const config::BoardConfig& b) {
    const auto result = on_capture_thread([&] {
        if (std::any_of(boards_.begin(), boards_.end(),
                        [&](const auto& x) { return x->name() == b.name; })) {
            return BoardChange::kExists;
        }
        writer_->submit(storage::SaveBoardOp{b.name, config::board_to_json(b).dump()});
        api_boards_.insert(b.name);
        boards_.push_back(make_board(b));
        if (running_) {
            try {
                boards_.back()->start();
            } catch (const std::exception& e) {
                log_->error("[{}] cannot start: {}", b.name, e.what());
            }
        }
        log_->info("[{}] added through the API", b.name);
        return BoardChange::kDone;
    });
    writer_->flush();
    return result;
}

std::vector<std::unique_ptr<Board>>::iterator CaptureService::board_named(const std::string& name) {
    return std::find_if(boards_.begin(), boards_.end(),
                        [&](const auto& x) { return x->name() == name; });
}

CaptureService::BoardChange CaptureService::update_board(const config::BoardConfig& b) {
    const auto result = on_capture_thread([&] {
        const auto it = board_named(b.name);
        if (it == boards_.end()) return BoardChange::kNotFound;
        if (!api_boards_.count(b.name)) return BoardChange::kFromFile;
        writer_->submit(storage::SaveBoardOp{b.name, config::board_to_json(b).dump()});
        if ((*it)->config() == b) return BoardChange::kDone;
        (*it)->shutdown();
        *it = make_board(b);
        if (running_) (*it)->start();
        log_->info("[{}] changed through the API: restarted", b.name);
        return BoardChange::kDone;
    });
    writer_->flush();
    return result;
}

CaptureService::BoardChange CaptureService::remove_board(const std::string& name) {
    const auto result = on_capture_thread([&] {
        const auto it = board_named(name);
        if (it == boards_.end()) return BoardChange::kNotFound;
        if (!api_boards_.count(name)) return BoardChange::kFromFile;
        writer_->submit(storage::SaveBoardOp{name, ""});
        (*it)->shutdown();
        boards_.erase(it);
        api_boards_.erase(name);
        log_->info("[{}] removed through the API", name);
        return BoardChange::kDone;
    });
    writer_->flush();
    return result;
}

bool CaptureService::from_api(const std::string& name) {
    return on_capture_thread([&] { return api_boards_.count(name) > 0; });
}

std::vector<config::BoardConfig> CaptureService::board_configs() {
    return on_capture_thread([&] {
        std::vector<config::BoardConfig> out;
        for (const auto& b : boards_) out.push_back(b->config());
        return out;
    });
}

void CaptureService::set_session_firmware(std::int64_t id, const std::string& elf_path,
                                          const std::string& build_id, const std::string& sha256) {
    writer_->submit(storage::SetFirmwareOp{id, elf_path, build_id, sha256});
    writer_->flush();
}

SessionImport::SessionImport(storage::StorageWriter& writer, const storage::NewSession& spec)
    : writer_(writer), id_(writer.reserve_session_id()), received_ns_(spec.started_ns) {
    writer_.submit(storage::OpenSessionOp{id_, spec});
}

SessionImport::~SessionImport() {
    if (completed_) return;
    writer_.submit(storage::DeleteSessionOp{id_});  // an import half stored is no import
    writer_.flush();
}

void SessionImport::append(std::vector<std::uint8_t> raw, std::vector<protocol::Record> records,
                           const storage::SessionCounters& counters) {
    writer_.flush();  // the piece before is committed: memory stays at about two pieces
    // A piece lost to a failing disk would be counted, but an import can simply be refused.
    if (writer_.health().failing)
        throw std::runtime_error("storage is failing: " + writer_.health().error);
    storage::ChunkOp op{id_, received_ns_, std::move(raw), std::move(records), counters, {}, {},
                        {}};
    op.delta.emplace().add(op.records);  // summed by its sender, as a capture session's chunk
    if (!writer_.submit(std::move(op))) {
        throw std::runtime_error("storage is too busy to take the import now; try again");
    }
}

std::int64_t SessionImport::complete(
    const storage::SessionCounters& counters,
    std::shared_ptr<const gmon::CallingContextTree> calling_context,
    std::vector<storage::TaskSummary> tasks) {
    writer_.submit(storage::CloseSessionOp{id_, "completed", unix_now_ns(), counters,
                                           std::move(calling_context), std::move(tasks)});
    writer_.flush();
    if (writer_.health().failing)
        throw std::runtime_error("storage is failing: " + writer_.health().error);
    completed_ = true;
    return id_;
}

std::unique_ptr<SessionImport> CaptureService::begin_import(const storage::NewSession& spec) {
    return std::make_unique<SessionImport>(*writer_, spec);
}

bool CaptureService::delete_stored_session(std::int64_t id) {
    for (const auto& b : boards()) {
        if (b.session == id) return false;
    }
    writer_->submit(storage::DeleteSessionOp{id});
    writer_->flush();
    return true;
}

bool CaptureService::stop_stored_session(std::int64_t id) {
    for (const auto& b : boards()) {
        if (b.session == id) return stop_session(b.name);
    }
    return false;
}

}  // namespace rackprof::daemon::capture
