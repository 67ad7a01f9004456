// kill -9 in a loop: a real daemon replaying a known capture file (legacy binary, legacy hex,
// framed) is killed at random moments. Every session it leaves must be a byte-exact prefix of
// the file, with records, aggregate and raw bytes agreeing — the stored records exactly what
// the stored raw bytes decode to — and what was lost must be only the last moments before the
// kill (the loss window, reported).
#include <signal.h>
#include <iostream>

#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <thread>

#include "gmon/aggregate.h"
#include "protocol/wire_format.h"
#include "storage/session_store.h"
#include "tests/integration/test_support.h"

namespace rackprof {
namespace {

using namespace std::chrono_literals;

std::int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// A capture of one wire: simulate's arguments, and the board's settings for it.
struct Wire {
    const char* name;
    std::vector<std::string> simulate_args;
    std::string board_settings;
    protocol::WireSpec spec;
};

// The stored raw bytes decoded afresh, to their end.
gmon::Aggregate redecoded(const std::string& raw, const protocol::WireSpec& spec) {
    gmon::Aggregate out;
    gmon::AggregateSink sink(out);
    const auto decoder = protocol::make_decoder(spec);
    decoder->feed(std::span(reinterpret_cast<const std::uint8_t*>(raw.data()), raw.size()), sink);
    decoder->finish(sink);
    return out;
}

void kill_loop(const Wire& wire, int kills, std::uint32_t seed) {
    testing::TempDir dir;
    const auto capture = dir / "capture.bin";
    std::vector<std::string> args = {"simulate", "--model", "deterministic", "--iterations",
                                     "4000",     "-o",      capture.string()};
    args.insert(args.end(), wire.simulate_args.begin(), wire.simulate_args.end());
    REQUIRE(testing::rackprof(args).exit_code == 0);
    const std::string sent = testing::read_text(capture);
    REQUIRE(sent.size() > 300'000);  // more than a run replays before its kill
    std::ofstream(dir / "rack.toml")
        << "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\npath = \"" << (dir / "rack.db").string()
        << "\"\n[[boards]]\nname = \"replay\"\nlink = \"file://" << capture.string()
        << "?pace=realtime&rate=200000\"\n"
        << wire.board_settings;

    std::mt19937 random(seed);
    std::vector<std::int64_t> killed_at;
    for (int i = 0; i < kills; ++i) {
        testing::Process daemon(
            testing::rackprof_argv({"serve", "--config", (dir / "rack.toml").string()}),
            dir / "serve.log");
        const auto sessions_before = static_cast<long>(killed_at.size());
        // The kill comes at a random moment after the new session's first bytes are committed:
        // a kill before them (the first commit takes ~200 ms from the session's start) would
        // leave an empty session, which proves nothing about prefixes.
        REQUIRE(testing::eventually(
            [&] {
                try {  // the database may not exist, or not have its tables yet
                    storage::SessionStore store(dir / "rack.db",
                                                storage::Database::Mode::kReadOnly);
                    const auto sessions = store.sessions();
                    return static_cast<long>(sessions.size()) > sessions_before &&
                           sessions.back().counters.bytes_in > 0;
                } catch (const std::exception&) {
                    return false;
                }
            },
            10s));
        std::this_thread::sleep_for(std::chrono::milliseconds(150 + random() % 450));
        killed_at.push_back(now_ns());
        daemon.signal(SIGKILL);
        REQUIRE(daemon.wait(5s) == 128 + SIGKILL);
    }
    {  // a last clean run repairs the state of the killed sessions
        testing::Process daemon(
            testing::rackprof_argv({"serve", "--config", (dir / "rack.toml").string()}),
            dir / "serve.log");
        REQUIRE(testing::eventually(
            [&] {
                return testing::read_text(dir / "serve.log").find("now marked interrupted") !=
                       std::string::npos;
            },
            10s));
        // Its own session must have started before it is stopped (a slow host can take a while
        // to open the link after the repair).
        CHECK(testing::eventually(
            [&] {
                try {
                    storage::SessionStore store(dir / "rack.db",
                                                storage::Database::Mode::kReadOnly);
                    return store.sessions().size() > static_cast<std::size_t>(kills);
                } catch (const std::exception&) {
                    return false;
                }
            },
            10s));
        daemon.signal(SIGTERM);
        REQUIRE(daemon.wait(5s) == 0);
    }

    storage::SessionStore store(dir / "rack.db", storage::Database::Mode::kReadOnly);
    {
        storage::Statement check = store.db().prepare("PRAGMA integrity_check");
        REQUIRE(check.step());
        CHECK(check.column_text(0) == "ok");
    }
    const auto sessions = store.sessions();
    std::string listed;
    for (const auto& s : sessions) {
        listed += "session " + std::to_string(s.id) + " " + s.state + " " +
                  std::to_string(s.counters.bytes_in) + " bytes\n";
    }
    INFO(std::string(wire.name) << "\n" << listed << testing::read_text(dir / "serve.log"));
    REQUIRE(sessions.size() == static_cast<std::size_t>(kills) + 1);
    std::int64_t worst_window_ns = 0;
    std::uint64_t bytes_kept = 0;
    for (int i = 0; i < kills; ++i) {
        const auto& s = sessions[static_cast<std::size_t>(i)];
        CAPTURE(i);
        CHECK(s.state == "interrupted");
        std::string raw;
        std::int64_t last_chunk_ns = 0;
        store.for_each_chunk(s.id, [&](std::int64_t t, std::span<const std::uint8_t> bytes) {
            CHECK(t >= last_chunk_ns);
            last_chunk_ns = t;
            raw.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
        });
        REQUIRE(raw.size() > 0);
        CHECK(raw.size() == s.counters.bytes_in);
        CHECK(sent.compare(0, raw.size(), raw) == 0);  // a byte-exact prefix
        gmon::Aggregate from_batches;
        store.for_each_record_batch(
            s.id, [&](std::int64_t, std::span<const protocol::Record> r) { from_batches.add(r); });
        CHECK(store.aggregate(s.id) == from_batches);
        CHECK(from_batches.total_calls() == s.counters.arcs);
        // What the stored bytes say, exactly: no record held back by the decoder is missing
        // (a hex record waits for the next digit after its line), none is extra.
        CHECK(redecoded(raw, wire.spec) == from_batches);
        // The loss window: from the last stored chunk to the kill.
        const std::int64_t window = killed_at[static_cast<std::size_t>(i)] - last_chunk_ns;
        CHECK(window >= 0);
        worst_window_ns = std::max(worst_window_ns, window);
        bytes_kept += raw.size();
    }
    MESSAGE("kill -9 x" << kills << " (" << std::string(wire.name) << "): " << bytes_kept
                        << " bytes kept, all byte-exact prefixes whose records are their "
                           "re-decode; worst loss window "
                        << worst_window_ns / 1'000'000 << " ms");
    std::string key = wire.name;
    std::replace(key.begin(), key.end(), ' ', '_');
    std::cout << "FIGURE kill_loop.loss_window_ms." << key << " = " << worst_window_ns / 1'000'000
              << " ms (" << kills << " kills, " << bytes_kept << " bytes kept)\n";
    // At most a commit interval (100 ms) and a realtime piece (20 ms), with room for a busy host.
    CHECK(worst_window_ns < 400'000'000);
}

TEST_CASE("kill -9 in a loop: every session a byte-exact prefix that decodes to its records") {
    const Wire wires[] = {
        {"legacy binary", {}, "", protocol::WireSpec("legacy", "bin", 3, std::nullopt)},
        {"legacy hex",
         {"--format", "hex"},
         "format = \"hex\"\n",
         protocol::WireSpec("legacy", "hex", 3, std::nullopt)},
        {"framed",
         {"--protocol", "framed"},
         "protocol = \"framed\"\n",
         protocol::WireSpec("framed", "bin", 3, std::nullopt)},
    };
    std::uint32_t seed = 20261123;
    for (const Wire& wire : wires) {
        const std::string name = wire.name;
        CAPTURE(name);
        kill_loop(wire, 8, seed++);
    }
}

}  // namespace
}  // namespace rackprof
