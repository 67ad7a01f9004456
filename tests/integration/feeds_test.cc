// The WebSocket feeds of a real daemon: live snapshots that change while a board captures,
// and state-change events.
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <iostream>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>

#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "tests/integration/feed.h"
#include "tests/integration/test_support.h"

namespace rackprof {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using nlohmann::json;
using namespace std::chrono_literals;

struct FeedDaemon {
    testing::TempDir dir;
    std::unique_ptr<testing::Process> daemon;
    std::string port;

    // A board on the deterministic model, with the given protocol and extra link parameters.
    // `server_extra`: more lines of the [server] table; `env`: the daemon's extra environment.
    explicit FeedDaemon(const std::string& protocol = "legacy", const std::string& link_extra = "",
                        const std::string& server_extra = "",
                        const std::vector<std::string>& env = {}) {
        REQUIRE(testing::rackprof({"simulate", "--model", "deterministic", "--iterations", "1",
                                   "--write-elf", (dir / "model.elf").string()})
                    .exit_code == 0);
        std::ofstream(dir / "rack.toml")
            << "[server]\nlisten = \"127.0.0.1:0\"\n"
            << server_extra << "[storage]\npath = \"" << (dir / "rack.db").string()
            << "\"\n[[boards]]\nname = \"det\"\n"
            << "link = \"sim://deterministic?rate=40000" << link_extra << "\"\nprotocol = \""
            << protocol << "\"\nelf = \"" << (dir / "model.elf").string() << "\"\n";
        daemon = std::make_unique<testing::Process>(
            testing::rackprof_argv({"serve", "--config", (dir / "rack.toml").string()}),
            dir / "serve.log", std::filesystem::path(), env);
        REQUIRE(testing::eventually(
            [&] {
                const std::string log = testing::read_text(dir / "serve.log");
                port = testing::api_port_in(log);
                return !port.empty() && log.find("[det] session") != std::string::npos;
            },
            10s));
    }
    ~FeedDaemon() {
        daemon->signal(SIGTERM);
        daemon->wait(5s);
    }
    std::int64_t session() const {
        const auto r = testing::run({"curl", "-s", "http://127.0.0.1:" + port + "/api/v1/boards"});
        return json::parse(r.out)[0]["session"].get<std::int64_t>();
    }
    int post(const std::string& path) const { return std::stoi(post_body(path, "%{http_code}")); }
    // The reply's body, or what `write_out` asks curl for.
    std::string post_body(const std::string& path, const std::string& write_out = "") const {
        std::vector<std::string> argv = {"curl", "-s", "-X", "POST"};
        if (!write_out.empty()) argv.insert(argv.end(), {"-o", "/dev/null", "-w", write_out});
        argv.push_back("http://127.0.0.1:" + port + path);
        return testing::run(argv).out;
    }
};

using Feed = testing::Feed;

TEST_CASE("live feed: snapshots of a capturing session change within 2 s") {
    FeedDaemon d;
    const auto id = d.session();
    Feed feed(d.port, "/api/v1/sessions/" + std::to_string(id) + "/live");
    const auto start = std::chrono::steady_clock::now();
    const json first = feed.next();
    CHECK(first["session"] == id);
    CHECK(first["state"] == "capturing");
    CHECK(first["link"] == "connected");
    json later = first;
    while (later["totals"]["arcs"] == first["totals"]["arcs"] &&
           std::chrono::steady_clock::now() - start < 5s) {
        later = feed.next();
    }
    CHECK(std::chrono::steady_clock::now() - start < 2s);
    CHECK(later["totals"]["arcs"].get<std::uint64_t>() >
          first["totals"]["arcs"].get<std::uint64_t>());
    const json third = feed.next();
    CHECK(third["records_per_s"].get<double>() > 0);
    bool named = false;
    for (const auto& f : third["top_functions"]) named = named || f["name"] == "gamma";
    CHECK_MESSAGE(named, third.dump());
    CHECK(third["newest_arcs"].size() == 8);
    CHECK(third["busiest_arcs"].size() == 5);
}

// A board sending at a constant rate reads as one: the rate is taken over a window of the
// last seconds, not between two snapshots (several clients' snapshots a few ms apart, and the
// link's bursts, made it zig-zag between near 0 and several times the rate).
TEST_CASE("live feed: records/s of a constant-rate board is steady, with several clients") {
    FeedDaemon d;
    const auto path = "/api/v1/sessions/" + std::to_string(d.session()) + "/live";
    Feed a(d.port, path), b(d.port, path), c(d.port, path);
    std::vector<double> rates;
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - start < 8s) {
        for (Feed* feed : {&a, &b, &c}) {
            const json snapshot = feed->next();
            if (std::chrono::steady_clock::now() - start > 3s)  // the window is full
                rates.push_back(snapshot["records_per_s"].get<double>());
        }
    }
    REQUIRE(rates.size() >= 6);
    const auto [low, high] = std::minmax_element(rates.begin(), rates.end());
    std::cout << "records/s of a constant-rate board, " << rates.size() << " readings: " << *low
              << " .. " << *high << "\n";
    CHECK(*low > 0);
    CHECK(*high < 1.3 * *low);
}

// A TCP link that sends a capture and then holds the connection open, sending nothing more:
// the session goes on capturing while its data no longer changes.
class HoldingServer {
  public:
    explicit HoldingServer(std::string bytes) : bytes_(std::move(bytes)) {
        thread_ = std::thread([this] {
            client_ = ::accept(listener_.fd, nullptr, nullptr);
            for (std::size_t done = 0; client_ >= 0 && done < bytes_.size();) {
                const ssize_t n = ::send(client_, bytes_.data() + done, bytes_.size() - done, 0);
                if (n <= 0) break;
                done += static_cast<std::size_t>(n);
            }
        });
    }
    ~HoldingServer() {
        ::shutdown(listener_.fd, SHUT_RDWR);
        if (thread_.joinable()) thread_.join();
        if (client_ >= 0) ::close(client_);
        ::close(listener_.fd);
    }
    int port() const { return listener_.port; }

  private:
    std::string bytes_;
    testing::LoopbackListener listener_ = testing::listen_loopback();
    int client_ = -1;
    std::thread thread_;
};

TEST_CASE("the live feed's top functions are the profile endpoint's for the same session") {
    testing::TempDir dir;
    const auto capture = dir / "capture.bin";
    const auto elf = dir / "model.elf";
    const auto truth_path = dir / "truth.json";
    REQUIRE(testing::rackprof({"simulate", "--model", "conflation", "--iterations", "400", "-o",
                               capture.string(), "--write-elf", elf.string(), "--truth",
                               truth_path.string()})
                .exit_code == 0);
    const json truth = json::parse(testing::read_text(truth_path));
    HoldingServer link(testing::read_text(capture));
    std::ofstream(dir / "rack.toml")
        << "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\npath = \"" << (dir / "rack.db").string()
        << "\"\n[[boards]]\nname = \"held\"\nlink = \"tcp://127.0.0.1:" << link.port()
        << "\"\nelf = \"" << elf.string() << "\"\n";
    testing::Process daemon(
        testing::rackprof_argv({"serve", "--config", (dir / "rack.toml").string()}),
        dir / "serve.log");
    const std::string port = testing::wait_for_api_port(dir / "serve.log");
    auto get = [&](const std::string& path) {
        return json::parse(
            testing::run({"curl", "-s", "http://127.0.0.1:" + port + "/api/v1" + path}).out);
    };
    // Everything sent is decoded, stored and published; the link stays up, sending nothing.
    std::int64_t id = 0;
    REQUIRE(testing::eventually(
        [&] {
            const json boards = get("/boards");
            if (boards.empty() || !boards[0]["session"].is_number()) return false;
            id = boards[0]["session"].get<std::int64_t>();
            return get("/sessions/" + std::to_string(id))["counters"]["arcs"] == truth["arcs_sent"];
        },
        10s));
    std::this_thread::sleep_for(500ms);  // a publish and a commit after the last byte

    Feed feed(port, "/api/v1/sessions/" + std::to_string(id) + "/live");
    json snapshot = feed.next();
    REQUIRE(snapshot["state"] == "capturing");
    const json profile = get("/sessions/" + std::to_string(id) + "/profile?top=10");
    REQUIRE(profile["flat"].size() == snapshot["top_functions"].size());
    REQUIRE_FALSE(profile["flat"].empty());
    for (std::size_t i = 0; i < profile["flat"].size(); ++i) {
        CAPTURE(i);
        CHECK(snapshot["top_functions"][i]["name"] == profile["flat"][i]["name"]);
        CHECK(snapshot["top_functions"][i]["self_percent"] == profile["flat"][i]["percent"]);
        CHECK(snapshot["top_functions"][i]["calls"] == profile["flat"][i]["calls"]);
    }
    CHECK(snapshot["totals"]["arcs"] == truth["arcs_sent"]);
    // Nothing changes, so the next snapshot shows the same views.
    const json again = feed.next();
    CHECK(again["top_functions"] == snapshot["top_functions"]);
    CHECK(again["busiest_arcs"] == snapshot["busiest_arcs"]);
    daemon.signal(SIGTERM);
    CHECK(daemon.wait(10s) == 0);
}

TEST_CASE("a framed board: frame counters in the live feed's losses and in the session JSON") {
    FeedDaemon d("framed", "&arc_cache=8");
    const auto id = d.session();
    Feed feed(d.port, "/api/v1/sessions/" + std::to_string(id) + "/live");
    json snapshot = feed.next();
    const auto start = std::chrono::steady_clock::now();
    while (snapshot["totals"]["pc_samples"] == 0 && std::chrono::steady_clock::now() - start < 5s)
        snapshot = feed.next();
    const json& losses = snapshot["losses"];
    CHECK(losses["frames_lost"] == 0);
    CHECK(losses["frames_bad"] == 0);
    CHECK(losses["target_dropped"] == 0);
    json session;
    CHECK(testing::eventually(
        [&] {
            const auto r = testing::run(
                {"curl", "-s",
                 "http://127.0.0.1:" + d.port + "/api/v1/sessions/" + std::to_string(id)});
            session = json::parse(r.out);
            return session["counters"]["frames"].get<std::uint64_t>() > 0 &&
                   !session["target"].is_null();
        },
        5s));
    CHECK(session["protocol"] == "framed");
    CHECK(session["counters"]["frames_lost"] == 0);
    CHECK(session["counters"]["frames_bad"] == 0);
    CHECK(session["counters"]["target_dropped"] == 0);
    // The deterministic model's functions span 0x1000-0x11a0; its HELLO says so.
    CHECK(session["target"]["text_lo"] == "0x1000");
    CHECK(session["target"]["text_hi"] == "0x11a0");
}

TEST_CASE("events feed: session stops and starts are announced") {
    FeedDaemon d;
    const auto id = d.session();
    Feed events(d.port, "/api/v1/events");
    std::this_thread::sleep_for(200ms);  // subscribed before the changes
    REQUIRE(d.post("/api/v1/sessions/" + std::to_string(id) + "/stop") == 200);
    const json started = json::parse(d.post_body("/api/v1/boards/det/sessions"));
    REQUIRE(started["id"].is_number());
    std::vector<std::string> kinds;
    while (kinds.size() < 2) {
        const json e = events.next();
        // The first session's start is announced once its row is committed, maybe just now.
        if (e["kind"] == "session_started" && e["session"] == id) continue;
        CHECK(e["board"] == "det");
        kinds.push_back(e["kind"]);
        if (e["kind"] == "session_stopped") CHECK(e["session"] == id);
        if (e["kind"] == "session_started") CHECK(e["session"] == started["id"]);
    }
    CHECK(kinds == std::vector<std::string>{"session_stopped", "session_started"});
}

TEST_CASE("a message larger than 4 KiB from a feed client closes it (1009)") {
    FeedDaemon d;
    Feed feed(d.port, "/api/v1/sessions/" + std::to_string(d.session()) + "/live");
    feed.next();
    feed.ws.text(true);
    beast::error_code write_ec;
    feed.ws.write(asio::buffer(std::string(64 * 1024, 'x')), write_ec);
    if (write_ec) {
        // The server closed the connection before all 64 KiB were written (a race it may win):
        // the client is closed, which is what this test is about.
        CHECK((write_ec == asio::error::broken_pipe || write_ec == asio::error::connection_reset));
    } else {
        // Snapshots until the server's close frame (our reply to it may find the socket gone).
        const auto start = std::chrono::steady_clock::now();
        beast::error_code ec;
        while (!ec && std::chrono::steady_clock::now() - start < 3s) {
            beast::flat_buffer buffer;
            feed.ws.read(buffer, ec);
        }
        REQUIRE(ec);
        CHECK(feed.ws.reason().code == websocket::close_code::too_big);
    }
    // A small control message is fine.
    Feed other(d.port, "/api/v1/events");
    other.ws.write(asio::buffer(std::string("{\"hello\":1}")));
    CHECK(d.post("/api/v1/boards/det/sessions") == 201);
    json e = other.next();  // (the first session's start may come first: see the events test)
    while (e["kind"] == "session_started") e = other.next();
    CHECK(e["kind"] == "session_stopped");
}

TEST_CASE("with token_for_reads the feeds need the token: ?token= or Authorization") {
    FeedDaemon d("legacy", "", "token_for_reads = true\n", {"RACKPROF_API_TOKEN=s3/cr+t"});
    const std::string live = "/api/v1/sessions/1/live";
    CHECK_THROWS(Feed(d.port, "/api/v1/events"));
    CHECK_THROWS(Feed(d.port, live));
    CHECK_THROWS(Feed(d.port, live + "?token=wrong"));
    CHECK_THROWS(Feed(d.port, live + "?token=s3/cr+t"));  // '+' is a space in a query
    CHECK(Feed(d.port, live + "?token=s3%2Fcr%2Bt").next()["session"] == 1);
    CHECK_NOTHROW(Feed(d.port, "/api/v1/events?token=s3%2fcr%2bt"));
    // Clients that can set headers may use them.
    asio::io_context io;
    websocket::stream<asio::ip::tcp::socket> ws{io};
    asio::ip::tcp::resolver resolver(io);
    asio::connect(ws.next_layer(), resolver.resolve("127.0.0.1", d.port));
    ws.set_option(websocket::stream_base::decorator([](websocket::request_type& r) {
        r.set(beast::http::field::authorization, "bearer s3/cr+t");
    }));
    CHECK_NOTHROW(ws.handshake("127.0.0.1", live));
    // /healthz never needs it.
    const auto health = testing::run({"curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                                      "http://127.0.0.1:" + d.port + "/healthz"});
    CHECK(health.out == "200");
}

TEST_CASE("a WebSocket upgrade anywhere else is refused") {
    FeedDaemon d;
    CHECK_THROWS(Feed(d.port, "/api/v1/nothing"));
    CHECK_THROWS(Feed(d.port, "/api/v1/sessions/x/live"));
}

}  // namespace
}  // namespace rackprof
