#include "daemon/sim/pty_rack.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "daemon/sim/pty_board.h"

namespace rackprof::daemon::sim {

namespace {
using Clock = std::chrono::steady_clock;

// The most one write hands a pty (more than a pty holds): bytes due beyond it wait for the
// next write, and are not generated before then. Generating a lagging reader's whole backlog
// at once cost a copy of all of it after every write, most of the feeder's time.
constexpr std::uint64_t kMaxWrite = 64 * 1024;

// Bytes a wire at `rate` bytes per second carries in `elapsed`.
std::uint64_t bytes_due(std::uint64_t rate, Clock::duration elapsed) {
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(elapsed).count();
    return rate * static_cast<std::uint64_t>(std::max<std::int64_t>(us, 0)) / 1'000'000;
}
}  // namespace

struct PtyRack::Board {
    RawPty pty;
    std::filesystem::path link;
    std::unique_ptr<BoardSimulation> simulation;
    std::vector<std::uint8_t> pending;  // generated, not yet written; from `offset` on
    std::size_t offset = 0;
    std::uint64_t sent = 0;
    std::size_t index = 0;  // in boards_, for epoll
    bool watched = false;   // armed in epoll for one EPOLLOUT

    std::size_t pending_size() const { return pending.size() - offset; }
    bool finished() const { return simulation->done() && pending_size() == 0; }
};

PtyRack::PtyRack(PtyRackOptions options) : options_(std::move(options)) {
    if (!options_.links.empty() && options_.links.size() != options_.boards.size())
        throw std::invalid_argument("a pty rack needs one link per board, or none");
    if (options_.rate == 0) throw std::invalid_argument("a pty rack needs a rate above 0");
    epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (epoll_ < 0) throw std::system_error(errno, std::generic_category(), "epoll_create1");
    // About one tick's bytes per piece: generated just ahead of the wire, never megabytes.
    const auto piece = std::max<std::uint64_t>(
        64, bytes_due(options_.rate, std::chrono::duration_cast<Clock::duration>(options_.tick)));
    for (std::size_t i = 0; i < options_.boards.size(); ++i) {
        auto board = std::make_unique<Board>();
        Board* b = board.get();
        b->index = i;
        boards_.push_back(std::move(board));  // owned before anything can throw
        b->pty = open_raw_pty();
        SimulatorOptions sim = options_.boards[i];
        sim.piece_bytes = piece;
        b->simulation = std::make_unique<BoardSimulation>(
            std::move(sim), [b](const std::uint8_t* data, std::size_t size) {
                b->pending.insert(b->pending.end(), data, data + size);
            });
        if (!options_.links.empty()) {
            b->link = options_.links[i];
            std::error_code ec;
            std::filesystem::remove(b->link, ec);
            std::filesystem::create_symlink(b->pty.slave_path, b->link);
        }
        // Registered disarmed: a pty is watched only while it is full (see feed()).
        epoll_event ev{};
        ev.events = EPOLLONESHOT;
        ev.data.u64 = i;
        if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, b->pty.master, &ev) != 0) throw std::system_error(errno, std::generic_category(), "epoll_ctl");
    }
}

PtyRack::~PtyRack() {
    for (auto& b : boards_) {
        if (!b->link.empty()) {
            std::error_code ec;
            std::filesystem::remove(b->link, ec);
        }
        close_raw_pty(b->pty);
    }
    if (epoll_ >= 0) ::close(epoll_);
}

std::filesystem::path PtyRack::device(std::size_t board) const {
    const Board& b = *boards_.at(board);
    return b.link.empty() ? std::filesystem::path(b.pty.slave_path) : b.link;
}

const GroundTruth& PtyRack::truth(std::size_t board) const {
    return boards_.at(board)->simulation->truth();
}

// Writes what the board's wire has carried by now (`due` bytes since the start): generates
// just enough, then as much as the pty takes. What it does not take stays pending.
void PtyRack::feed(Board& b, std::uint64_t due) {
    if (due <= b.sent) return;
    const std::uint64_t want = std::min(due - b.sent, kMaxWrite);
    while (b.pending_size() < want && !b.simulation->done()) b.simulation->step();
    std::size_t left = static_cast<std::size_t>(std::min<std::uint64_t>(want, b.pending_size()));
    while (left > 0) {
        const ssize_t n = ::write(b.pty.master, b.pending.data() + b.offset, left);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) {
            watch_until_writable(b);
            break;
        }
        if (n <= 0) throw std::system_error(errno, std::generic_category(), "write to " + b.pty.slave_path);
        b.offset += static_cast<std::size_t>(n);
        b.sent += static_cast<std::uint64_t>(n);
        left -= static_cast<std::size_t>(n);
    }
    // Compact once the written part dominates, so the buffer stays about one tick long.
    if (b.offset > 0 && b.offset >= b.pending.size() / 2) {
        b.pending.erase(b.pending.begin(),
                        b.pending.begin() + static_cast<std::ptrdiff_t>(b.offset));
        b.offset = 0;
    }
    if (!b.simulation->done() || b.pending_size() > 0)
        max_backlog_ = std::max(max_backlog_, due > b.sent ? due - b.sent : 0);
}

// One wake-up when the full pty has room again: watching every pty all the time would wake
// the loop at each read of every reader.
void PtyRack::watch_until_writable(Board& b) {
    if (b.watched) return;
    epoll_event ev{};
    ev.events = EPOLLOUT | EPOLLONESHOT;
    ev.data.u64 = b.index;
    if (::epoll_ctl(epoll_, EPOLL_CTL_MOD, b.pty.master, &ev) != 0) throw std::system_error(errno, std::generic_category(), "epoll_ctl");
    b.watched = true;
}

PtyRackStats PtyRack::run(const std::atomic<bool>* stop) {
    const auto stopped = [stop] { return stop && stop->load(std::memory_order_relaxed); };
    const auto start = Clock::now();
    auto next_tick = start;
    std::vector<epoll_event> events(std::max<std::size_t>(1, boards_.size()));
    for (;;) {
        const auto now = Clock::now();
        const std::uint64_t due = bytes_due(options_.rate, now - start);
        bool all_finished = true;
        if (now >= next_tick) {
            for (auto& b : boards_) {
                feed(*b, due);
                all_finished = all_finished && b->finished();
            }
            next_tick += options_.tick;
            // Late (a busy machine): skip the missed ticks; `due` already counts their bytes.
            if (next_tick < now) next_tick = now + options_.tick;
        } else {
            all_finished = std::all_of(boards_.begin(), boards_.end(),
                                       [](const auto& b) { return b->finished(); });
        }
        if (all_finished || stopped()) break;
        const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next_tick - Clock::now());
        const int n = ::epoll_wait(epoll_, events.data(), static_cast<int>(events.size()),
                                   static_cast<int>(std::max<std::int64_t>(0, wait.count())));
        if (n < 0 && errno != EINTR) throw std::system_error(errno, std::generic_category(), "epoll_wait");
        // A drained pty takes its backlog now rather than at the next tick.
        const std::uint64_t due_now = bytes_due(options_.rate, Clock::now() - start);
        for (int i = 0; i < n; ++i) {
            Board& b = *boards_[events[static_cast<std::size_t>(i)].data.u64];
            b.watched = false;  // one-shot: disarmed by this event
            feed(b, due_now);
        }
    }
    wait_until_read(stop);
    PtyRackStats stats;
    for (const auto& b : boards_) stats.bytes_sent += b->sent;
    stats.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    stats.max_backlog = max_backlog_;
    return stats;
}

void PtyRack::wait_until_read(const std::atomic<bool>* stop) const {
    for (const auto& b : boards_) {
        while (!(stop && stop->load()) && unread_bytes(b->pty) > 0)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    // A reader may still be between its read and handing the bytes on.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

}  // namespace rackprof::daemon::sim
