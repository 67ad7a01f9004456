// The capture service: one io_context thread owning every board and link, and the storage
// writer behind them. The service interface the web layer will call lives here; every call
// is thread-safe (it runs on the capture thread and waits for the answer).
#pragma once

#include <boost/asio/io_context.hpp>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include <spdlog/logger.h>

#include "daemon/board.h"
#include "daemon/config.h"
#include "storage/storage_writer.h"

namespace rackprof::daemon {

class CaptureService {
  public:
    // Opens storage (throws storage::StorageError) and makes the boards; nothing runs yet.
    CaptureService(DaemonConfig config, std::shared_ptr<spdlog::logger> log);
    ~CaptureService();
    CaptureService(const CaptureService&) = delete;
    CaptureService& operator=(const CaptureService&) = delete;

    void start();
    // Stops every link, completes every session, commits everything. Idempotent.
    void shutdown();

    std::vector<BoardStatus> boards();
    bool start_session(const std::string& board);
    bool stop_session(const std::string& board);
    const DaemonConfig& config() const { return config_; }

  private:
    template <typename F>
    auto on_capture_thread(F&& f) -> decltype(f());

    DaemonConfig config_;
    std::shared_ptr<spdlog::logger> log_;
    boost::asio::io_context io_;
    std::unique_ptr<storage::StorageWriter> writer_;
    std::vector<std::unique_ptr<Board>> boards_;
    std::thread thread_;
    std::atomic<bool> running_{false};
};

}  // namespace rackprof::daemon
