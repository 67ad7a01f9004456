// Floods while a board captures: idle connections, connection churn and WebSocket clients from
// other loopback addresses (other "hosts"), while a file link replays a known capture. The
// health probe must answer throughout, and the capture must be stored byte for byte.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <doctest/doctest.h>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <regex>
#include <thread>

#include "storage/session_store.h"
#include "tests/integration/test_support.h"

namespace rackprof {
namespace {

using namespace std::chrono_literals;

// A TCP connection from `source` (a 127.x.y.z address) to the daemon; -1 if refused.
int connect_from(const std::string& source, int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    ::inet_pton(AF_INET, source.c_str(), &from.sin_addr);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<std::uint16_t>(port));
    ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 ||
        ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

#if defined(RACKPROF_ASAN)
constexpr int kProbeTimeoutS = 5;  // ASan makes every request several times slower
#else
constexpr int kProbeTimeoutS = 2;
#endif

// GET /healthz from 127.0.0.1 on a fresh connection: the status line, or what went wrong.
std::string probe(int port) {
    const int fd = connect_from("127.0.0.1", port);
    if (fd < 0) return "connect refused";
    timeval timeout{kProbeTimeoutS, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    const std::string request = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    std::string reply;
    if (::write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
        char buffer[512];
        const ssize_t n = ::read(fd, buffer, sizeof buffer);
        if (n > 0) reply.assign(buffer, static_cast<std::size_t>(n));
    }
    ::close(fd);
    return reply.empty() ? "no answer within " + std::to_string(kProbeTimeoutS) + " s"
                         : reply.substr(0, reply.find('\r'));
}

TEST_CASE("floods of idle, churning and WebSocket connections: probes answer, nothing is lost") {
    testing::TempDir dir;
    const auto capture = dir / "capture.bin";
    REQUIRE(testing::rackprof({"simulate", "--model", "deterministic", "--iterations", "500", "-o",
                               capture.string()})
                .exit_code == 0);
    const std::string sent = testing::read_text(capture);
    std::ofstream(dir / "rack.toml")
        << "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\npath = \"" << (dir / "rack.db").string()
        << "\"\n[[boards]]\nname = \"replay\"\nlink = \"file://" << capture.string()
        << "?pace=realtime&rate=100000\"\n";
    testing::Process daemon(
        testing::rackprof_argv({"serve", "--config", (dir / "rack.toml").string()}),
        dir / "serve.log");
    const int port = std::stoi(testing::wait_for_api_port(dir / "serve.log"));

    std::atomic<bool> stop{false};
    std::atomic<int> probes{0}, failed_probes{0};
    std::string first_failure;
    std::thread prober([&] {
        while (!stop) {
            const std::string status = probe(port);
            ++probes;
            if (status.rfind("HTTP/1.1 200", 0) != 0 && failed_probes++ == 0)
                first_failure = status;
            std::this_thread::sleep_for(100ms);
        }
    });
    // 300 idle connections from ten other hosts.
    std::vector<int> idle;
    for (int i = 0; i < 300; ++i)
        idle.push_back(connect_from("127.0.2." + std::to_string(1 + i % 10), port));
    // Churn: connections opened and closed as fast as one thread can.
    std::atomic<int> churned{0};
    std::thread churner([&] {
        while (!stop) {
            const int fd = connect_from("127.0.3.1", port);
            if (fd >= 0) ::close(fd);
            // About 2000 connections a second: a flood, yet one that leaves a 2-core CI host
            // (and a sanitizer build) the time to answer anyone at all.
            if (++churned % 20 == 0) std::this_thread::sleep_for(10ms);
        }
    });
    // 100 WebSocket clients on the events feed; one sends a message far above the cap.
    boost::asio::io_context io;
    std::vector<std::unique_ptr<boost::beast::websocket::stream<boost::asio::ip::tcp::socket>>>
        feeds;
    int feeds_open = 0;
    for (int i = 0; i < 100; ++i) {
        auto ws =
            std::make_unique<boost::beast::websocket::stream<boost::asio::ip::tcp::socket>>(io);
        try {
            auto& socket = ws->next_layer();
            socket.open(boost::asio::ip::tcp::v4());
            socket.bind(
                {boost::asio::ip::make_address_v4("127.0.4." + std::to_string(1 + i % 50)), 0});
            socket.connect(
                {boost::asio::ip::make_address_v4("127.0.0.1"), static_cast<unsigned short>(port)});
            ws->handshake("127.0.0.1", "/api/v1/events");
            ++feeds_open;
            feeds.push_back(std::move(ws));
        } catch (const std::exception&) {
        }
    }
    bool big_message_closed = false;
    if (!feeds.empty()) {
        try {
            feeds.front()->write(boost::asio::buffer(std::string(1 << 20, 'x')));
            boost::beast::flat_buffer buffer;
            feeds.front()->read(buffer);  // the close frame ends the read with an error
        } catch (const std::exception&) {
            big_message_closed = true;
        }
    }

    // The replay takes about 3.5 s; floods stay on until it is stored whole.
    const bool completed = testing::eventually(
        [&] {
            try {
                storage::SessionStore store(dir / "rack.db", storage::Database::Mode::kReadOnly);
                const auto sessions = store.sessions();
                return !sessions.empty() && sessions[0].state == "completed";
            } catch (const std::exception&) {
                return false;
            }
        },
        30s);
    stop = true;
    churner.join();
    prober.join();
    for (const int fd : idle) {
        if (fd >= 0) ::close(fd);
    }
    const long rss = daemon.rss_kib();
    feeds.clear();
    daemon.signal(SIGTERM);
    CHECK(daemon.wait(5s) == 0);

    const std::string summary = "floods: 300 idle connections, " + std::to_string(churned.load()) +
                                " churned, " + std::to_string(feeds_open) +
                                " WebSockets accepted of 100; " + std::to_string(probes.load()) +
                                " health probes, " + std::to_string(failed_probes.load()) +
                                " failed; daemon RSS " + std::to_string(rss) + " KiB";
    std::printf("FIGURE floods.while_capturing = %s\n", summary.c_str());
    INFO(testing::read_text(dir / "serve.log"));
    REQUIRE(completed);
    INFO("first failed probe: " << first_failure);
    CHECK(failed_probes == 0);
    CHECK(probes > 10);
    CHECK(big_message_closed);
    storage::SessionStore store(dir / "rack.db", storage::Database::Mode::kReadOnly);
    const auto sessions = store.sessions();
    REQUIRE(sessions.size() == 1);
    std::string raw;
    store.for_each_chunk(sessions[0].id, [&](std::int64_t, std::span<const std::uint8_t> bytes) {
        raw.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    });
    CHECK(raw == sent);  // every byte, in order
    const auto& c = sessions[0].counters;
    CHECK(c.records_lost + c.bytes_lost + c.records_lost_storage + c.bytes_lost_storage == 0);
}

}  // namespace
}  // namespace rackprof
