#include "daemon/capture_service.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>

#include <future>

namespace rackprof::daemon {

CaptureService::CaptureService(DaemonConfig config, std::shared_ptr<spdlog::logger> log)
    : config_(std::move(config)), log_(std::move(log)) {
    if (config_.storage_path.has_parent_path())
        std::filesystem::create_directories(config_.storage_path.parent_path());
    writer_ = std::make_unique<storage::StorageWriter>(config_.storage_path);
    writer_->on_error([log = log_](const std::string& what) { log->error("storage: {}", what); });
    if (writer_->interrupted_at_start() > 0) {
        log_->warn("{} session(s) left capturing by an earlier run are now marked interrupted",
                   writer_->interrupted_at_start());
    }
    for (const BoardConfig& b : config_.boards) {
        boards_.push_back(std::make_unique<Board>(io_, b, *writer_, log_, config_.reconnect_min,
                                                  config_.reconnect_max));
    }
}

CaptureService::~CaptureService() {
    shutdown();
}

void CaptureService::start() {
    if (running_) return;
    running_ = true;
    boost::asio::post(io_, [this] {
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

std::vector<BoardStatus> CaptureService::boards() {
    return on_capture_thread([this] {
        std::vector<BoardStatus> out;
        for (auto& board : boards_) out.push_back(board->status());
        return out;
    });
}

bool CaptureService::start_session(const std::string& name) {
    return on_capture_thread([&] {
        for (auto& board : boards_) {
            if (board->name() == name) return board->start_session();
        }
        return false;
    });
}

bool CaptureService::stop_session(const std::string& name) {
    return on_capture_thread([&] {
        for (auto& board : boards_) {
            if (board->name() == name) {
                board->stop_session();
                return true;
            }
        }
        return false;
    });
}

}  // namespace rackprof::daemon
