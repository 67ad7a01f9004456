// Many simulated boards on pseudo-terminals, fed by one thread: one process and one event loop
// for a whole rack, so that a benchmark of hundreds of boards measures the daemon and not the
// feeder. Each board is paced to its own byte rate; its bytes are generated only when its wire
// is due to carry them, and written with non-blocking writes, one per board per tick. A pty
// with no room keeps the bytes due as a backlog (like a target blocking on a full UART queue)
// and is written again as soon as epoll says it has room.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

#include "daemon/sim/board_simulator.h"

namespace rackprof::daemon::sim {

struct PtyRackOptions {
    std::vector<SimulatorOptions> boards;      // one pty each
    std::vector<std::filesystem::path> links;  // empty, or a symlink to each board's pty
    std::uint64_t rate = 150000;               // wire bytes per second, per board
    std::chrono::milliseconds tick{10};        // how often every board is written
};

// What a run did, for a benchmark to judge the feeder itself.
struct PtyRackStats {
    std::uint64_t bytes_sent = 0;
    double seconds = 0;  // from the first write until readers took every byte
    // The most bytes any board had due (by its rate) that its pty had no room for: a reader
    // that keeps up leaves this near one tick's worth.
    std::uint64_t max_backlog = 0;
};

class PtyRack {
  public:
    // Creates every pty (raw mode) and symlink. Throws std::runtime_error, or
    // std::invalid_argument for a simulation's options.
    explicit PtyRack(PtyRackOptions options);
    ~PtyRack();
    PtyRack(const PtyRack&) = delete;
    PtyRack& operator=(const PtyRack&) = delete;

    std::size_t size() const { return boards_.size(); }
    // The path a reader opens: the symlink if one was asked for, else /dev/pts/N.
    std::filesystem::path device(std::size_t board) const;
    // Feeds every board until each has sent its whole simulation and readers took every byte,
    // or until `stop` turns true. Throws std::runtime_error when a pty fails.
    PtyRackStats run(const std::atomic<bool>* stop = nullptr);
    const GroundTruth& truth(std::size_t board) const;

  private:
    struct Board;
    void feed(Board& board, std::uint64_t due);
    void watch_until_writable(Board& board);
    void wait_until_read(const std::atomic<bool>* stop) const;

    PtyRackOptions options_;
    std::vector<std::unique_ptr<Board>> boards_;
    int epoll_ = -1;
    std::uint64_t max_backlog_ = 0;
};

}  // namespace rackprof::daemon::sim
