#include "daemon/sim/pty_board.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>

namespace rackprof::daemon::sim {

namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

PtyBoard::PtyBoard(PtyBoardOptions options) : options_(std::move(options)) {
    options_.simulator.stop = &stop_;
    plug();
}

PtyBoard::~PtyBoard() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    unplug();
}

std::filesystem::path PtyBoard::device() const {
    return options_.link_path.empty() ? std::filesystem::path(pty_.slave_path) : options_.link_path;
}

RawPty open_raw_pty() {
    RawPty pty;
    pty.master = ::posix_openpt(O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    if (pty.master < 0) throw std::system_error(errno, std::generic_category(), "posix_openpt");
    try {
        if (::grantpt(pty.master) != 0 || ::unlockpt(pty.master) != 0) throw std::system_error(errno, std::generic_category(), "grantpt/unlockpt");
        char name[128];
        if (::ptsname_r(pty.master, name, sizeof name) != 0) throw std::system_error(errno, std::generic_category(), "ptsname");
        pty.slave_path = name;
        pty.keeper = ::open(name, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
        if (pty.keeper < 0) throw std::system_error(errno, std::generic_category(), std::string("open ") + name);
        // Raw from the first byte: no line discipline may touch the wire bytes.
        termios tio{};
        if (::tcgetattr(pty.keeper, &tio) != 0) throw std::system_error(errno, std::generic_category(), "tcgetattr");
        ::cfmakeraw(&tio);
        if (::tcsetattr(pty.keeper, TCSANOW, &tio) != 0) throw std::system_error(errno, std::generic_category(), "tcsetattr");
    } catch (...) {
        close_raw_pty(pty);
        throw;
    }
    return pty;
}

void close_raw_pty(RawPty& pty) {
    if (pty.keeper >= 0) ::close(pty.keeper);
    if (pty.master >= 0) ::close(pty.master);
    pty.keeper = pty.master = -1;
}

std::size_t unread_bytes(const RawPty& pty) {
    int unread = 0;
    if (pty.keeper < 0 || ::ioctl(pty.keeper, FIONREAD, &unread) != 0) return 0;
    return static_cast<std::size_t>(std::max(unread, 0));
}

void PtyBoard::plug() {
    pty_ = open_raw_pty();
    if (!options_.link_path.empty()) {
        std::error_code ec;
        std::filesystem::remove(options_.link_path, ec);
        std::filesystem::create_symlink(pty_.slave_path, options_.link_path);
    }
}

void PtyBoard::unplug() {
    if (!options_.link_path.empty()) {
        std::error_code ec;
        std::filesystem::remove(options_.link_path, ec);
    }
    close_raw_pty(pty_);
}

void PtyBoard::start() {
    thread_ = std::thread([this] {
        try {
            run();
        } catch (const std::exception& e) {
            // A board that fails stops sending, like unplugged hardware; the reason is kept.
            error_ = e.what();
            stop_ = true;
        }
    });
}

void PtyBoard::run() {
    auto last_plug = Clock::now();
    // The samples each piece carries: what the ground truth counted since the last piece
    // (records enter it as they are encoded, and a piece holds whole records).
    const GroundTruth* sent = nullptr;
    std::uint64_t samples_before = 0;
    BoardSimulation simulation(options_.simulator, [&](const std::uint8_t* data, std::size_t size) {
        const std::uint64_t samples = sent ? sent->aggregate.total_samples() : 0;
        if (options_.unplug_every.count() > 0 &&
            Clock::now() - last_plug >= options_.unplug_every &&
            (options_.max_unplugs == 0 || unplugs_ < options_.max_unplugs)) {
            // Between pieces, so no record is cut: everything written has been read first.
            wait_until_read();
            unplug();
            ++unplugs_;
            std::this_thread::sleep_for(options_.unplug_for);
            plug();
            last_plug = Clock::now();
        }
        write_piece(data, size, samples - samples_before);
        samples_before = samples;
    });
    sent = &simulation.truth();
    while (!simulation.done()) simulation.step();
    truth_ = simulation.truth();
    wait_until_read();
}

void PtyBoard::write_piece(const std::uint8_t* data, std::size_t size, std::uint64_t samples) {
    const auto start = Clock::now();
    std::size_t done = 0;
    while (done < size && !stop_) {
        const ssize_t n = ::write(pty_.master, data + done, size - done);
        if (n > 0) {
            done += static_cast<std::size_t>(n);
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EINTR) throw std::system_error(errno, std::generic_category(), "write to pty");
        pollfd p{pty_.master, POLLOUT, 0};
        ::poll(&p, 1, 50);
    }
    // Pace: this piece may take size / rate seconds on the wire, and, in real time, the
    // target's timer needs samples / sample_hz seconds to take its samples. The clock runs on
    // from the last due time while the board keeps up, so sleeps that oversleep a little do not
    // add up; after a stall (a full pty, an unplug) it restarts from now.
    auto needed =
        std::chrono::microseconds(size * 1'000'000 / std::max<std::uint64_t>(1, options_.rate));
    if (options_.sample_hz > 0)
        needed =
            std::max(needed, std::chrono::microseconds(samples * 1'000'000 / options_.sample_hz));
    const auto from = start - due_ < std::chrono::milliseconds(50) ? due_ : start;
    due_ = from + needed;
    while (!stop_ && Clock::now() < due_)
        std::this_thread::sleep_for(
            std::min<Clock::duration>(due_ - Clock::now(), std::chrono::milliseconds(20)));
}

void PtyBoard::wait_until_read() {
    // Bytes written to the master reach the slave's queue through the kernel's flip buffer a
    // moment later (later still on a busy host: the kernel's worker that moves them may wait
    // behind other work), so one empty look proves nothing: the queue must stay empty for
    // 300 ms, long enough for a heavily loaded host's worker to catch up.
    int empty_looks = 0;
    while (!stop_ && empty_looks < 30) {
        empty_looks = unread_bytes(pty_) == 0 ? empty_looks + 1 : 0;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    // The reader may still be between its read and handing the bytes on.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

GroundTruth PtyBoard::wait() {
    if (thread_.joinable()) thread_.join();
    return truth_ ? *truth_ : GroundTruth{};
}

}  // namespace rackprof::daemon::sim
