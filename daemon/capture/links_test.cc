#include "daemon/capture/links.h"

#include <doctest/doctest.h>
#include <unistd.h>
#include <boost/asio/post.hpp>

#include <cerrno>
#include <chrono>
#include <optional>

#include "daemon/sim/pty_board.h"

namespace rackprof::daemon::capture {
namespace {

using namespace std::chrono_literals;

config::LinkUri serial_uri(const std::string& path) {
    return config::parse_link_uri("serial://" + path);
}

// Each pty's own bytes: a pattern no other pty repeats at the same offset.
std::vector<std::uint8_t> pattern(std::size_t size, int seed) {
    std::vector<std::uint8_t> out(size);
    for (std::size_t i = 0; i < size; ++i)
        out[i] = static_cast<std::uint8_t>((i * 131 + static_cast<std::size_t>(seed) * 7) >> 3);
    return out;
}

TEST_CASE("serial links on one io_context each take their own line's bytes, whole and in order") {
    boost::asio::io_context io;
    constexpr int kLines = 5;
    constexpr std::size_t kBytes = 200 * 1024;  // many rounds' worth: the kernel holds ~4 KiB
    std::vector<sim::RawPty> ptys;
    std::vector<std::unique_ptr<Link>> links;
    std::vector<std::vector<std::uint8_t>> sent, got(kLines);
    std::vector<std::size_t> written(kLines, 0);
    int closed = 0;
    for (int i = 0; i < kLines; ++i) {
        ptys.push_back(sim::open_raw_pty());
        sent.push_back(pattern(kBytes, i));
        links.push_back(make_link(io, serial_uri(ptys.back().slave_path)));
        links.back()->open(
            [&got, i](std::span<const std::uint8_t> bytes) {
                got[static_cast<std::size_t>(i)].insert(got[static_cast<std::size_t>(i)].end(),
                                                        bytes.begin(), bytes.end());
            },
            [&closed](const LinkClosed&) { ++closed; });
    }
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    const auto done = [&] {
        for (int i = 0; i < kLines; ++i) {
            if (got[static_cast<std::size_t>(i)].size() < kBytes) return false;
        }
        return true;
    };
    while (!done() && std::chrono::steady_clock::now() < deadline) {
        for (int i = 0; i < kLines; ++i) {
            auto& at = written[static_cast<std::size_t>(i)];
            const auto& bytes = sent[static_cast<std::size_t>(i)];
            if (at == bytes.size()) continue;
            const ssize_t n = ::write(ptys[static_cast<std::size_t>(i)].master, bytes.data() + at,
                                      std::min<std::size_t>(bytes.size() - at, 1024));
            if (n > 0) at += static_cast<std::size_t>(n);
        }
        io.run_for(2ms);
    }
    for (int i = 0; i < kLines; ++i) {
        CAPTURE(i);
        CHECK(got[static_cast<std::size_t>(i)] == sent[static_cast<std::size_t>(i)]);
    }
    CHECK(closed == 0);
    for (auto& link : links) link->close();
    for (auto& pty : ptys) sim::close_raw_pty(pty);
    io.run_for(50ms);
    CHECK(closed == 0);  // a link closed by its owner calls nothing back
}

TEST_CASE("a serial line's first bytes come after what its opener posted, line by line") {
    // A board posts "connected" (and starts its session) after opening: boards opened in turn
    // must get their sessions in turn even when a later line already holds bytes.
    boost::asio::io_context io;
    std::vector<sim::RawPty> ptys;
    std::vector<std::unique_ptr<Link>> links;
    std::vector<int> order;  // which line's "connected" or first bytes, in the order they ran
    for (int i = 0; i < 3; ++i) {
        ptys.push_back(sim::open_raw_pty());
        const std::vector<std::uint8_t> early(100, static_cast<std::uint8_t>(i));
        REQUIRE(::write(ptys.back().master, early.data(), early.size()) == 100);
    }
    for (int i = 0; i < 3; ++i) {
        links.push_back(make_link(io, serial_uri(ptys[static_cast<std::size_t>(i)].slave_path)));
        links.back()->open([&order, i](std::span<const std::uint8_t>) { order.push_back(10 + i); },
                           [](const LinkClosed&) {});
        boost::asio::post(io, [&order, i] { order.push_back(i); });
    }
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (order.size() < 6 && std::chrono::steady_clock::now() < deadline) io.run_for(5ms);
    REQUIRE(order.size() == 6);
    CHECK(std::vector<int>(order.begin(), order.begin() + 3) == std::vector<int>{0, 1, 2});
    for (auto& link : links) link->close();
    for (auto& pty : ptys) sim::close_raw_pty(pty);
}

TEST_CASE("a serial line idle for a while is still read when its bytes come") {
    boost::asio::io_context io;
    sim::RawPty quiet = sim::open_raw_pty();
    auto link = make_link(io, serial_uri(quiet.slave_path));
    std::vector<std::uint8_t> got;
    link->open([&](std::span<const std::uint8_t> b) { got.insert(got.end(), b.begin(), b.end()); },
               [](const LinkClosed&) {});
    io.run_for(800ms);  // long enough to be read less often
    const auto sent = pattern(3000, 9);
    REQUIRE(::write(quiet.master, sent.data(), sent.size()) == 3000);
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (got.size() < sent.size() && std::chrono::steady_clock::now() < deadline) io.run_for(5ms);
    CHECK(got == sent);
    link->close();
    sim::close_raw_pty(quiet);
}

TEST_CASE("idle serial lines wait in the reactor: no rounds run, bytes and hang-ups wake them") {
    boost::asio::io_context io;
    std::vector<sim::RawPty> ptys;
    std::vector<std::unique_ptr<Link>> links;
    std::vector<std::vector<std::uint8_t>> got(3);
    std::vector<int> closed(3, 0);
    for (std::size_t i = 0; i < 3; ++i) {
        ptys.push_back(sim::open_raw_pty());
        links.push_back(make_link(io, serial_uri(ptys[i].slave_path)));
        links[i]->open(
            [&got, i](std::span<const std::uint8_t> b) {
                got[i].insert(got[i].end(), b.begin(), b.end());
            },
            [&closed, i](const LinkClosed&) { ++closed[i]; });
    }
    io.run_for(800ms);  // every line idle past half a second
    // Nothing is due while every line waits (in rounds, 25 would have run in 500 ms).
    CHECK(io.run_for(500ms) == 0);
    // Bytes wake their line alone, and all of them are read.
    const auto sent = pattern(5000, 3);
    REQUIRE(::write(ptys[1].master, sent.data(), sent.size()) == 5000);
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (got[1].size() < sent.size() && std::chrono::steady_clock::now() < deadline)
        io.run_for(5ms);
    CHECK(got[1] == sent);
    CHECK(got[0].empty());
    CHECK(got[2].empty());
    // A line unplugged while it waits is reported, once.
    sim::close_raw_pty(ptys[2]);
    while (closed[2] == 0 && std::chrono::steady_clock::now() < deadline) io.run_for(5ms);
    CHECK(closed[2] == 1);
    // The woken line goes back to waiting once idle again: nothing due after that either.
    io.run_for(800ms);
    CHECK(io.run_for(300ms) == 0);
    // A waiting line closed by its owner calls nothing back; the others are unaffected.
    links[0]->close();
    io.run_for(50ms);
    CHECK(closed[0] == 0);
    const auto more = pattern(700, 5);
    REQUIRE(::write(ptys[1].master, more.data(), more.size()) == 700);
    while (got[1].size() < sent.size() + more.size() && std::chrono::steady_clock::now() < deadline)
        io.run_for(5ms);
    CHECK(got[1].size() == sent.size() + more.size());
    links[1]->close();
    links[2]->close();
    sim::close_raw_pty(ptys[0]);
    sim::close_raw_pty(ptys[1]);
    io.run_for(50ms);
    CHECK(closed == std::vector<int>{0, 0, 1});
}

TEST_CASE("a serial line that goes away is reported once, and a link may reopen from that report") {
    boost::asio::io_context io;
    sim::RawPty gone = sim::open_raw_pty();
    sim::RawPty stays = sim::open_raw_pty();
    auto first = make_link(io, serial_uri(gone.slave_path));
    std::optional<LinkClosed> why;
    int closed = 0, reopened_bytes = 0;
    first->open([](std::span<const std::uint8_t>) {},
                [&](const LinkClosed& c) {
                    ++closed;
                    why = c;
                    // A board's reconnect: a new line opened from inside the report.
                    first = make_link(io, serial_uri(stays.slave_path));
                    first->open(
                        [&](std::span<const std::uint8_t> b) {
                            reopened_bytes += static_cast<int>(b.size());
                        },
                        [](const LinkClosed&) {});
                });
    io.run_for(50ms);
    sim::close_raw_pty(gone);  // unplugged: its reader gets an error or the end
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (closed == 0 && std::chrono::steady_clock::now() < deadline) io.run_for(5ms);
    REQUIRE(closed == 1);
    CHECK_FALSE(why->reason.empty());
    CHECK_FALSE(why->final);
    // The link opened from the report reads its line.
    const std::vector<std::uint8_t> hello(300, 0x5A);
    REQUIRE(::write(stays.master, hello.data(), hello.size()) == 300);
    while (reopened_bytes < 300 && std::chrono::steady_clock::now() < deadline) io.run_for(5ms);
    CHECK(reopened_bytes == 300);
    CHECK(closed == 1);
    first->close();
    sim::close_raw_pty(stays);
}

}  // namespace
}  // namespace rackprof::daemon::capture
