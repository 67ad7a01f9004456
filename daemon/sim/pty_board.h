// A simulated board on a pseudo-terminal: the simulator's wire bytes are written into the
// pty's master side, paced to a byte rate, and the daemon opens the slave side as a serial
// device — the same code path real hardware takes. It can also "unplug": the pty vanishes
// (the reader sees an I/O error, the path disappears) and comes back under the same path.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>

#include "daemon/sim/board_simulator.h"

namespace rackprof::daemon::sim {

// A raw-mode pseudo-terminal, as a board's wire: bytes written to `master` arrive at
// `slave_path`. `keeper` is our own slave descriptor: it keeps the pty alive while no reader
// has it open and tells (FIONREAD) how much is still unread.
struct RawPty {
    int master = -1;  // non-blocking
    int keeper = -1;
    std::string slave_path;
};
// Throws std::runtime_error.
RawPty open_raw_pty();
void close_raw_pty(RawPty& pty);
// Bytes written to the pty that no reader has taken yet.
std::size_t unread_bytes(const RawPty& pty);

struct PtyBoardOptions {
    SimulatorOptions simulator;
    std::uint64_t rate = 20000;  // wire bytes per second
    // Above 0: the board also runs in real time, its PC samples leaving at most this many per
    // second of wall time (the rate a profile of them assumes: simulator.sample_hz), so that a
    // capture's sampled seconds match the time it took. 0: only `rate` paces (a test feeder).
    std::uint32_t sample_hz = 0;
    std::filesystem::path link_path;  // optional: a symlink to the slave, stable across replugs
    std::chrono::milliseconds unplug_every{0};  // 0: never unplug
    std::chrono::milliseconds unplug_for{500};
    std::uint64_t max_unplugs = 0;  // 0: no limit
};

class PtyBoard {
  public:
    // Creates the first pty (raw mode) and its symlink. Throws std::runtime_error.
    explicit PtyBoard(PtyBoardOptions options);
    ~PtyBoard();
    PtyBoard(const PtyBoard&) = delete;
    PtyBoard& operator=(const PtyBoard&) = delete;

    // The path a reader opens: the symlink if one was asked for, else /dev/pts/N.
    std::filesystem::path device() const;
    // Starts writing in a thread of its own.
    void start();
    // Asks the writer to stop after the current piece.
    void stop() { stop_ = true; }
    // Waits until the simulation ended and a reader has taken every byte (or stop()).
    GroundTruth wait();
    std::uint64_t unplugs() const { return unplugs_; }
    // Why the board stopped early, if it did ("" otherwise); read after wait().
    const std::string& error() const { return error_; }

  private:
    void run();
    void plug();
    void unplug();
    void write_piece(const std::uint8_t* data, std::size_t size, std::uint64_t samples);
    void wait_until_read();

    PtyBoardOptions options_;
    RawPty pty_;
    std::atomic<bool> stop_{false};
    std::atomic<std::uint64_t> unplugs_{0};
    std::optional<GroundTruth> truth_;
    std::chrono::steady_clock::time_point due_{};  // when the last piece was due to be out
    std::string error_;
    std::thread thread_;
};

}  // namespace rackprof::daemon::sim
