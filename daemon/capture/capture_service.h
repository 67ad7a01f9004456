// The capture service: one io_context thread owning every board and link, and the storage
// writer behind them. Every call is thread-safe (it runs on the capture thread and waits for
// the answer); web/ reaches it only through service::LocalRack (daemon/service/).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include <spdlog/logger.h>

#include "daemon/capture/board.h"
#include "daemon/config/config.h"
#include "storage/storage_writer.h"

namespace rackprof::daemon::capture {

// A session stored from data made elsewhere, one piece (raw bytes and their records) at a
// time: each piece waits for the one before it to be committed, so an import of any size
// holds about two pieces in memory. Not completed (an error on the way): the session is
// deleted again.
class SessionImport {
  public:
    SessionImport(storage::StorageWriter& writer, const storage::NewSession& spec);
    ~SessionImport();
    SessionImport(const SessionImport&) = delete;
    SessionImport& operator=(const SessionImport&) = delete;

    // `counters`: the session's so far. Throws std::runtime_error when storage refuses it.
    void append(std::vector<std::uint8_t> raw, std::vector<protocol::Record> records,
                const storage::SessionCounters& counters);
    // Stores it as completed with its final counters; returns its id.
    // `calling_context`: the tree its events made, if any.
    std::int64_t complete(const storage::SessionCounters& counters,
                          std::shared_ptr<const gmon::CallingContextTree> calling_context = nullptr,
                          std::vector<storage::TaskSummary> tasks = {});

  private:
    storage::StorageWriter& writer_;
    storage::SessionId id_;  // reserved: the session's row id from the start
    std::int64_t received_ns_;
    bool completed_ = false;
};

class CaptureService {
  public:
    // Opens storage (throws storage::StorageError) and makes the boards; nothing runs yet.
    CaptureService(config::DaemonConfig config, std::shared_ptr<spdlog::logger> log);
    ~CaptureService();
    CaptureService(const CaptureService&) = delete;
    CaptureService& operator=(const CaptureService&) = delete;

    void start();
    // Stops every link, completes every session, commits everything. Idempotent.
    void shutdown();

    // Applies a new configuration's boards (SIGHUP): removed boards stop, changed ones restart,
    // new ones start; untouched boards keep their links and sessions. Settings that need a
    // restart (storage path) are reported in the log and otherwise left alone.
    void reload(const config::DaemonConfig& config);
    // Calls `beat` on the capture thread every `interval`: proof the capture loop is alive.
    void set_heartbeat(std::chrono::microseconds interval, std::function<void()> beat);

    std::vector<BoardStatus> boards();

    // Board events, called on the capture thread (set before start()), with the session's id.
    void on_event(std::function<void(const BoardEvent&, std::int64_t session_id)> sink) {
        events_ = std::move(sink);
    }

    // The newest snapshot the capture side published for this stored session (never waits on
    // the capture thread).
    std::optional<LiveSnapshot> live_snapshot(std::int64_t session_id);
    // Starts a session on a board; returns its stored id (0: no such board).
    std::int64_t start_session(const std::string& board);
    bool stop_session(const std::string& board);
    // Stops the session with this stored id if one of the boards is capturing it.
    bool stop_stored_session(std::int64_t id);
    // Boards managed through the API (stored in the database, restored at start). The file's
    // boards are the file's: these refuse them. Results: "" on success, else why not.
    enum class BoardChange { kDone, kExists, kNotFound, kFromFile };
    BoardChange add_board(const config::BoardConfig& board);
    BoardChange update_board(const config::BoardConfig& board);
    BoardChange remove_board(const std::string& name);
    bool from_api(const std::string& name);
    std::vector<config::BoardConfig> board_configs();

    // Attaches a firmware image to a stored session (through the writer).
    void set_session_firmware(std::int64_t id, const std::string& elf_path,
                              const std::string& build_id, const std::string& sha256);
    // Stores a capture or profile made elsewhere as a session, a piece at a time (see
    // SessionImport); the session exists (as capturing) from here on.
    std::unique_ptr<SessionImport> begin_import(const storage::NewSession& spec);
    // Deletes a stored session through the writer; false while a board is capturing it.
    bool delete_stored_session(std::int64_t id);
    const config::DaemonConfig& config() const { return config_; }
    storage::WriterStats writer_stats() { return writer_->stats(); }
    // Whether storage's commits are failing now (disk full, I/O error), and since when.
    storage::StorageHealth storage_health() { return writer_->health(); }
    // What storage failures cost this run; complete once shutdown() returned.
    storage::StorageLossTotals storage_losses() { return writer_->loss_totals(); }
    // Stored sessions' aggregates in memory, kept current by the writer (any thread).
    storage::AggregateCache& aggregates() { return aggregates_; }

  private:
    template <typename F>
    auto on_capture_thread(F&& f) -> decltype(f());
    std::unique_ptr<Board> make_board(const config::BoardConfig& config);
    void publish_live();
    // The board of that name in boards_ (capture thread), or boards_.end().
    std::vector<std::unique_ptr<Board>>::iterator board_named(const std::string& name);

    config::DaemonConfig config_;
    std::shared_ptr<spdlog::logger> log_;
    boost::asio::io_context io_;
    storage::AggregateCache aggregates_;  // before writer_, which updates it until it stops
    std::unique_ptr<storage::StorageWriter> writer_;
    LiveSnapshots live_;  // before boards_: boards publish into it
    std::unique_ptr<boost::asio::steady_timer> publish_timer_;
    std::vector<std::unique_ptr<Board>> boards_;
    std::function<void(const BoardEvent&, std::int64_t)> events_;
    std::set<std::string> api_boards_;  // capture thread only
    std::unique_ptr<boost::asio::steady_timer> heartbeat_;
    std::shared_ptr<std::function<void()>> heartbeat_tick_;
    std::thread thread_;
    std::atomic<bool> running_{false};
};

}  // namespace rackprof::daemon::capture
