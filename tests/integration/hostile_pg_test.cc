// The fleet client against a server that is not PostgreSQL but speaks its protocol
// (tests/support/hostile_pg.h): endless replies, replies too slow, malformed and uneven rows,
// errors carrying control characters. Each costs the daemon bounded memory and time, answers
// selections 502 bad_upstream, shows in /readyz, and reaches the log escaped.
#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/integration/api_daemon.h"
#include "tests/integration/test_support.h"
#include "tests/support/hostile_pg.h"

namespace rackprof {

using namespace std::chrono_literals;
using nlohmann::json;
using Mode = testing::HostilePg::Mode;

namespace {

// ASan keeps freed memory in quarantine (256 MiB by default): there the bound only tells
// bounded from unbounded.
#if defined(__SANITIZE_ADDRESS__)
constexpr long kGrowthBoundKib = 512 * 1024;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr long kGrowthBoundKib = 512 * 1024;
#else
constexpr long kGrowthBoundKib = 64 * 1024;
#endif
#else
constexpr long kGrowthBoundKib = 64 * 1024;
#endif

struct HostileCase {
    const char* name;
    Mode mode;
    const char* refused_because;  // in the pusher's last_error and the selection's error
};

}  // namespace

TEST_CASE("a hostile PostgreSQL server costs bounded memory and time, and its words are escaped") {
    const HostileCase cases[] = {
        {"endless rows", Mode::kEndless, "a reply larger than 8 MiB"},
        {"no reply", Mode::kSilent, "no complete reply within 1 s"},
        {"text where integers belong", Mode::kMalformed, "where an integer belongs"},
        {"rows of unequal width", Mode::kUneven, "unexpected field count"},
        {"errors with control characters", Mode::kErrors, "forged"},
    };
    std::string figure;
    for (const auto& c : cases) {
        CAPTURE(std::string(c.name));
        testing::HostilePg server(c.mode);
        testing::TempDir dir;
        std::ofstream(dir / "rack.toml")
            << "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\npath = \""
            << (dir / "rack.db").string() << "\"\n[fleet]\nurl = \"" << server.url()
            << "\"\nbench = \"h\"\npush_interval_ms = 100\nretry_max_ms = 400\n"
               "max_reply_mib = 8\nreply_timeout_s = 1\n";
        testing::Process daemon(
            testing::rackprof_argv({"serve", "--config", (dir / "rack.toml").string()}),
            dir / "serve.log");
        const std::string port = testing::wait_for_api_port(dir / "serve.log");
        const auto start = testing::peak_memory(daemon.pid());
        const auto last_error = [&] {
            const auto reply = testing::http_get(port, "/readyz");
            const json fleet = json::parse(reply.body, nullptr, false)["fleet"];
            return fleet.is_object() && fleet["last_error"].is_string()
                       ? fleet["last_error"].get<std::string>()
                       : std::string();
        };
        const bool refused = testing::eventually(
            [&] { return last_error().find(c.refused_because) != std::string::npos; }, 30s);
        CHECK_MESSAGE(refused, "last_error: " << last_error());

        const auto asked = std::chrono::steady_clock::now();
        const auto selection = testing::http_get(port, "/api/v1/profile?bench=h");
        const auto took = std::chrono::steady_clock::now() - asked;
        CHECK(selection.status == 502);
        CHECK(selection.body.find("bad_upstream") != std::string::npos);
        CHECK(selection.body.find(c.refused_because) != std::string::npos);
        CHECK(took < 10s);  // one reply's timeout (1 s), not one per retry or forever

        const auto probed = std::chrono::steady_clock::now();
        CHECK(testing::http_get(port, "/healthz").status == 200);
        CHECK(std::chrono::steady_clock::now() - probed < 500ms);
        const long grown_kib =
            static_cast<long>((testing::peak_memory(daemon.pid()) - start) / 1024);
        std::cout << "hostile PostgreSQL (" << c.name << "): " << server.queries()
                  << " queries answered, daemon peak +" << grown_kib / 1024 << " MiB, selection "
                  << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms\n";
        figure += std::string(figure.empty() ? "" : "; ") + c.name + " +" +
                  std::to_string(grown_kib / 1024) + " MiB";
        // The pusher and the selection each hold at most one 8 MiB reply (and the string's
        // doubling): without a bound, endless rows grew it until the kernel said no.
        CHECK(grown_kib < kGrowthBoundKib);
        CHECK(daemon.running());
        daemon.signal(SIGTERM);
        CHECK(daemon.wait(15s) == 0);

        const std::string log = testing::read_text(dir / "serve.log");
        CHECK(log.find('\x1b') == std::string::npos);
        CHECK(log.find('\r') == std::string::npos);
        CHECK(log.find("\n[info] fleet: pushed 9999") == std::string::npos);
        CHECK(log.find("\nfleet: pushed 9999") == std::string::npos);
    }
    std::cout << "FIGURE hostile_postgresql.peak_growth = " << figure << "\n";
}

}  // namespace rackprof
