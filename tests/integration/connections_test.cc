// Connection limits of a real daemon over loopback, clients told apart by their source address
// (127.0.0.0/8 is all loopback): idle connections cannot lock anyone out, WebSockets count
// against the limits and have a share of their own below them (128 in all, 16 per client), a
// health probe always gets in, and refusals are logged once.
#include <iostream>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <doctest/doctest.h>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>

#include <fstream>
#include <memory>
#include <regex>
#include <thread>

#include "tests/integration/test_support.h"

namespace rackprof {
namespace {

namespace asio = boost::asio;
namespace websocket = boost::beast::websocket;
using namespace std::chrono_literals;

struct ServedDaemon {
    testing::TempDir dir;
    std::unique_ptr<testing::Process> daemon;
    std::string port;

    ServedDaemon() {
        // The dashboard: a page of its own, whether or not web/dist is built.
        std::filesystem::create_directories(dir / "web");
        std::ofstream(dir / "web/index.html") << "<!doctype html><title>rackprof</title>\n";
        std::ofstream(dir / "rack.toml")
            << "[server]\nlisten = \"127.0.0.1:0\"\nweb_root = \"" << (dir / "web").string()
            << "\"\n[storage]\npath = \"" << (dir / "rack.db").string()
            << "\"\n[[boards]]\nname = \"det\"\nlink = \"sim://deterministic?rate=2000\"\n";
        daemon = std::make_unique<testing::Process>(
            testing::rackprof_argv({"serve", "--config", (dir / "rack.toml").string()}),
            dir / "serve.log");
        port = testing::wait_for_api_port(dir / "serve.log");
    }
    ~ServedDaemon() {
        daemon->signal(SIGTERM);
        daemon->wait(5s);
    }
    std::string log() const { return testing::read_text(dir / "serve.log"); }
    // GET /healthz from `source` on a fresh connection: "200 0.001234" (status, seconds).
    std::string health_from(const std::string& source) const {
        return testing::run({"curl", "-s", "-o", "/dev/null", "-w", "%{http_code} %{time_total}",
                             "--max-time", "10", "--interface", source,
                             "http://127.0.0.1:" + port + "/healthz"})
            .out;
    }
};

// A TCP connection from `source` that sends nothing; -1 if connect failed.
int idle_connection(const std::string& source, const std::string& port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    ::inet_pton(AF_INET, source.c_str(), &from.sin_addr);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) == 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<std::uint16_t>(std::stoi(port)));
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

// True when the server has closed the connection (end of stream or reset).
bool closed_by_server(int fd) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    char byte;
    return ::recv(fd, &byte, 1, MSG_DONTWAIT) <= 0;
}

struct Sockets {
    std::vector<int> fds;
    ~Sockets() {
        for (const int fd : fds) ::close(fd);
    }
};

// A WebSocket from `source`; null if the server refused it.
struct SourcedFeed {
    asio::io_context io;
    websocket::stream<asio::ip::tcp::socket> ws{io};
};
std::unique_ptr<SourcedFeed> feed_from(const std::string& source, const std::string& port) {
    auto feed = std::make_unique<SourcedFeed>();
    boost::system::error_code ec;
    auto& socket = feed->ws.next_layer();
    socket.open(asio::ip::tcp::v4());
    socket.bind({asio::ip::make_address(source), 0});
    socket.connect(
        {asio::ip::make_address("127.0.0.1"), static_cast<std::uint16_t>(std::stoi(port))}, ec);
    if (!ec) feed->ws.handshake("127.0.0.1", "/api/v1/events", ec);
    return ec ? nullptr : std::move(feed);
}

double seconds_of(const std::string& health) {
    return std::stod(health.substr(health.find(' ') + 1));
}

std::size_t refusal_lines(const std::string& log) {
    std::size_t n = 0;
    for (std::size_t at = log.find("refus"); at != std::string::npos;
         at = log.find("refus", at + 1))
        ++n;
    return n;
}

TEST_CASE("300 idle connections from one client: a fresh GET /healthz answers at once") {
    ServedDaemon d;
    Sockets idle;
    for (int i = 0; i < 300; ++i) idle.fds.push_back(idle_connection("127.0.0.1", d.port));
    std::this_thread::sleep_for(300ms);  // all accepted (or not) by now
    const std::string health = d.health_from("127.0.0.1");
    std::cout << "FIGURE idle_connections.healthz = " << health << " beside 300 idle\n";
    REQUIRE(health.rfind("200 ", 0) == 0);
    CHECK(seconds_of(health) < 1.0);
    // The client holds at most its own limit: its oldest idle connections were closed.
    std::size_t open = 0;
    for (const int fd : idle.fds) open += fd >= 0 && !closed_by_server(fd);
    CHECK(open <= 32);
    CHECK(!closed_by_server(idle.fds.back()));                // the newest stay
    CHECK(d.health_from("127.0.0.2").rfind("200 ", 0) == 0);  // another client, too
    CHECK(refusal_lines(d.log()) <= 1);
}

TEST_CASE("WebSockets: 16 per client, counted against its limit; a probe still gets in") {
    ServedDaemon d;
    std::vector<std::unique_ptr<SourcedFeed>> feeds;
    std::size_t refused = 0;
    for (int i = 0; i < 100; ++i) {
        auto feed = feed_from("127.0.0.1", d.port);
        if (feed) {
            feeds.push_back(std::move(feed));
        } else {
            ++refused;
        }
    }
    CHECK(feeds.size() == 16);
    CHECK(refused == 84);
    // The feeds hold 16 of the client's 32 connections: of 30 idle ones, only 16 stay open
    // (the client's own oldest idle ones make room for the newer).
    std::this_thread::sleep_for(300ms);  // the refused ones closed by now
    Sockets idle;
    for (int i = 0; i < 30; ++i) idle.fds.push_back(idle_connection("127.0.0.1", d.port));
    std::this_thread::sleep_for(300ms);
    std::size_t open = 0;
    for (const int fd : idle.fds) open += fd >= 0 && !closed_by_server(fd);
    CHECK(open == 16);
    const std::string health = d.health_from("127.0.0.1");
    MESSAGE("GET /healthz beside 16 feeds, 84 refused and 30 idle: " << health);
    CHECK(health.rfind("200 ", 0) == 0);
    CHECK(d.health_from("127.0.0.3").rfind("200 ", 0) == 0);
    CHECK(refusal_lines(d.log()) <= 1);  // once per episode, not per connection
}

TEST_CASE(
    "at the global limit idle connections are reclaimed oldest first; busy ones leave "
    "the reserved slots to probes") {
    ServedDaemon d;
    Sockets idle;
    for (int client = 0; client < 10; ++client) {  // 300 idle from 10 clients: 256 fit
        for (int i = 0; i < 30; ++i)
            idle.fds.push_back(idle_connection("127.0.1." + std::to_string(client + 1), d.port));
        std::this_thread::sleep_for(20ms);  // in order of age
    }
    std::this_thread::sleep_for(300ms);
    CHECK(closed_by_server(idle.fds.front()));
    CHECK(!closed_by_server(idle.fds.back()));
    std::size_t open = 0;
    for (const int fd : idle.fds) open += fd >= 0 && !closed_by_server(fd);
    CHECK(open <= 256);
    CHECK(d.health_from("127.0.2.1").rfind("200 ", 0) == 0);

    // Feeds are never reclaimed, and they have a share of 128 (16 per client): 270 asked for
    // from 9 clients take 128 slots, reclaiming idle ones; the other 128 stay ordinary.
    std::vector<std::unique_ptr<SourcedFeed>> feeds;
    for (int client = 0; client < 9; ++client) {
        for (int i = 0; i < 30; ++i) {
            if (auto f = feed_from("127.0.3." + std::to_string(client + 1), d.port))
                feeds.push_back(std::move(f));
        }
    }
    CHECK(feeds.size() == 128);
    const std::string health = d.health_from("127.0.4.1");
    MESSAGE("GET /healthz with 128 feeds open: " << health);
    CHECK(health.rfind("200 ", 0) == 0);
}

// Two requests on one curl connection: "200 1 200 0" when the second reused the connection,
// which only an ordinary (keep-alive) slot allows; a reserved slot serves one request.
std::string two_requests_from(const ServedDaemon& d, const std::string& source,
                              const std::string& first, const std::string& second) {
    const auto r =
        testing::run({"curl", "-s", "-o", "/dev/null", "-o", "/dev/null", "-w",
                      "%{http_code} %{num_connects} ", "--max-time", "10", "--interface", source,
                      "http://127.0.0.1:" + d.port + first, "http://127.0.0.1:" + d.port + second});
    return r.out;
}

TEST_CASE("with the feeds' share full, HTTP requests and the dashboard's page get ordinary slots") {
    ServedDaemon d;
    std::vector<std::unique_ptr<SourcedFeed>> feeds;
    for (int client = 0; client < 10; ++client) {  // 200 asked for: 128 fit, 16 per client
        for (int i = 0; i < 20; ++i) {
            if (auto f = feed_from("127.0.5." + std::to_string(client + 1), d.port))
                feeds.push_back(std::move(f));
        }
    }
    CHECK(feeds.size() == 128);
    CHECK(!feed_from("127.0.6.1", d.port));  // a new client's feed: the share is full
    // The dashboard's page and an API request, both on a kept-alive connection.
    CHECK(two_requests_from(d, "127.0.6.2", "/", "/api/v1/boards") == "200 1 200 0 ");
    CHECK(two_requests_from(d, "127.0.5.1", "/healthz", "/") == "200 1 200 0 ");
    // 127 feeds end: a new feed gets in again.
    feeds.resize(1);
    CHECK(testing::eventually([&] { return feed_from("127.0.6.1", d.port) != nullptr; }, 5s));
    // The refusals were told once, as feeds, not once each.
    const std::string log = d.log();
    CHECK(log.find("WebSocket limits reached") != std::string::npos);
    CHECK(refusal_lines(log) <= 1);
}

}  // namespace
}  // namespace rackprof
