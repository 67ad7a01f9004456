#include "daemon/sim/pty_board.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace rackprof::daemon {

namespace {
using Clock = std::chrono::steady_clock;

[[noreturn]] void fail(const std::string& what) {
    throw std::runtime_error(what + ": " + std::strerror(errno));
}
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
    return options_.link_path.empty() ? std::filesystem::path(slave_path_) : options_.link_path;
}

void PtyBoard::plug() {
    master_ = ::posix_openpt(O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    if (master_ < 0) fail("posix_openpt");
    if (::grantpt(master_) != 0 || ::unlockpt(master_) != 0) fail("grantpt/unlockpt");
    char name[128];
    if (::ptsname_r(master_, name, sizeof name) != 0) fail("ptsname");
    slave_path_ = name;
    keeper_ = ::open(name, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    if (keeper_ < 0) fail(std::string("open ") + name);
    // Raw from the first byte: no line discipline may touch the wire bytes.
    termios tio{};
    if (::tcgetattr(keeper_, &tio) != 0) fail("tcgetattr");
    ::cfmakeraw(&tio);
    if (::tcsetattr(keeper_, TCSANOW, &tio) != 0) fail("tcsetattr");
    if (!options_.link_path.empty()) {
        std::error_code ec;
        std::filesystem::remove(options_.link_path, ec);
        std::filesystem::create_symlink(slave_path_, options_.link_path);
    }
}

void PtyBoard::unplug() {
    if (!options_.link_path.empty()) {
        std::error_code ec;
        std::filesystem::remove(options_.link_path, ec);
    }
    if (keeper_ >= 0) ::close(keeper_);
    if (master_ >= 0) ::close(master_);
    keeper_ = master_ = -1;
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
    truth_ = simulate_board(options_.simulator, [&](const std::uint8_t* data, std::size_t size) {
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
        write_piece(data, size);
    });
    wait_until_read();
}

void PtyBoard::write_piece(const std::uint8_t* data, std::size_t size) {
    const auto start = Clock::now();
    std::size_t done = 0;
    while (done < size && !stop_) {
        const ssize_t n = ::write(master_, data + done, size - done);
        if (n > 0) {
            done += static_cast<std::size_t>(n);
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EINTR) fail("write to pty");
        pollfd p{master_, POLLOUT, 0};
        ::poll(&p, 1, 50);
    }
    // Pace: this piece may take size / rate seconds on the wire.
    const auto due = start + std::chrono::microseconds(size * 1'000'000 /
                                                       std::max<std::uint64_t>(1, options_.rate));
    while (!stop_ && Clock::now() < due)
        std::this_thread::sleep_for(
            std::min<Clock::duration>(due - Clock::now(), std::chrono::milliseconds(20)));
}

void PtyBoard::wait_until_read() {
    // Bytes written to the master reach the slave's queue through the kernel's flip buffer a
    // moment later (later still on a busy host), so one empty look proves nothing: the queue
    // must stay empty for 100 ms.
    int empty_looks = 0;
    while (!stop_ && empty_looks < 10) {
        int unread = 0;
        if (::ioctl(keeper_, FIONREAD, &unread) != 0) break;
        empty_looks = unread == 0 ? empty_looks + 1 : 0;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    // The reader may still be between its read and handing the bytes on.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

GroundTruth PtyBoard::wait() {
    if (thread_.joinable()) thread_.join();
    return truth_ ? *truth_ : GroundTruth{};
}

}  // namespace rackprof::daemon
