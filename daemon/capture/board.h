// A board on the rack: its link, its connection state (with reconnects and backoff), and its
// current capture session. Lives on the capture io_context; all methods run on that thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <spdlog/logger.h>

#include "daemon/capture/board_status.h"
#include "daemon/capture/capture_session.h"
#include "daemon/capture/links.h"
#include "daemon/capture/live_snapshots.h"
#include "daemon/config/config.h"
#include "daemon/sim/pty_board.h"
#include "gmon/symbolizer.h"

namespace rackprof::daemon::capture {

using BoardEventSink = std::function<void(const BoardEvent&)>;

class Board {
  public:
    // `firmware_dir`: uploaded ELFs stored as <build-id>.elf, searched when a framed target's
    // HELLO names a build-id and the board's config names no ELF.
    Board(boost::asio::io_context& io, config::BoardConfig config, storage::StorageWriter& writer,
          std::shared_ptr<spdlog::logger> log, std::chrono::milliseconds reconnect_min,
          std::chrono::milliseconds reconnect_max, std::filesystem::path firmware_dir,
          BoardEventSink events = {}, LiveSnapshots* live = nullptr);
    ~Board();
    Board(const Board&) = delete;
    Board& operator=(const Board&) = delete;

    void start();
    // Stops reading and completes the session (all data handed to storage first).
    void shutdown();
    // Starts a session now (a running one is completed first); false if none can start.
    bool start_session();
    void stop_session();

    BoardStatus status();
    // Hands the session's gathered bytes to storage and publishes its live snapshot (its
    // changes since the last publish); the capture service calls it every 100 ms.
    void publish_live();
    const std::string& name() const { return config_.name; }
    const config::BoardConfig& config() const { return config_; }

  private:
    void connect();
    void on_data(std::span<const std::uint8_t> bytes);
    void on_closed(const LinkClosed& closed);
    // Logs what a refused hand-off to storage lost (bytes_lost was `lost_before`).
    void said_lost(std::uint64_t lost_before);
    PickedFirmware firmware_for(const protocol::TargetHello& hello);
    void load_elf(const std::filesystem::path& path);
    void schedule_reconnect();
    void set_state(LinkState state, const std::string& why = {});
    std::string storage_error();  // while storage fails and a session loses data; else ""

    boost::asio::io_context& io_;
    config::BoardConfig config_;
    config::LinkUri uri_;
    storage::StorageWriter& writer_;
    std::shared_ptr<spdlog::logger> log_;
    std::chrono::milliseconds reconnect_min_;
    std::chrono::milliseconds reconnect_max_;
    std::chrono::milliseconds backoff_;
    boost::asio::steady_timer retry_timer_;
    std::unique_ptr<sim::PtyBoard> simulated_;  // sim:// boards: the simulator behind a pty
    std::unique_ptr<Link> link_;
    std::filesystem::path firmware_dir_;
    std::shared_ptr<const gmon::Symbolizer> elf_;
    std::filesystem::path elf_path_;
    std::string elf_sha256_;
    std::optional<CaptureSession> session_;
    LinkState state_ = LinkState::kConnecting;
    std::string last_error_;
    std::uint64_t reconnects_ = 0;  // connections made again after a connection was lost
    bool connected_once_ = false;
    std::uint64_t failed_attempts_ = 0;
    bool stopping_ = false;
    BoardEventSink events_;
    LiveSnapshots* live_ = nullptr;  // where live snapshots go (none: not published)
};

// Hex SHA-256 of a file ("" if unreadable).
std::string file_sha256(const std::filesystem::path& path);

}  // namespace rackprof::daemon::capture
