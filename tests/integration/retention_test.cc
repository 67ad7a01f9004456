// Retention through a real daemon over HTTP: a database with a session that ended 40 days ago
// and one that ended now is served first without rules, then by a daemon with keep_raw_days =
// 30. The old session's raw data goes at start; its profile and gmon.out are byte for byte what
// they were; what needs raw data (raw and ndjson exports, a time window) answers 410 with the
// reason; the session's JSON and /metrics say it; the young session is untouched.
#include <signal.h>

#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "gmon/synthetic_elf.h"
#include "storage/session_store.h"
#include "tests/integration/test_support.h"

namespace rackprof {
namespace {

using nlohmann::json;
using protocol::Record;
using namespace std::chrono_literals;

constexpr std::int64_t kDay = 86'400'000'000'000;

std::int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// A completed session of 50 chunks (raw bytes and their records) that ended at `ended_ns`.
void store_session(storage::SessionStore& store, const std::string& elf, std::int64_t ended_ns) {
    storage::NewSession spec;
    spec.board = "retention";
    spec.link = "file:///retention";
    spec.elf_path = elf;
    spec.started_ns = ended_ns - 50'000'000;
    const auto id = store.create_session(spec);
    storage::Transaction tx(store.db());
    std::vector<std::vector<Record>> records(50);
    std::vector<std::vector<std::uint8_t>> raw(50);
    std::vector<storage::SessionStore::ChunkToStore> chunks;
    gmon::Aggregate delta;
    for (std::int64_t i = 0; i < 50; ++i) {
        for (std::uint32_t r = 0; r < 40; ++r) {
            records[i].push_back(Record::pc_sample(0x1000 + 2 * ((i * 7 + r) % 256)));
            records[i].push_back(Record::arc(0x1001 + 0x10 * (r % 4), 0x1101 + 0x40 * (r % 3)));
        }
        raw[i].assign(400 + i, static_cast<std::uint8_t>(i));
        chunks.push_back({i, spec.started_ns + i * 1'000'000, raw[i], records[i]});
        delta.add(records[i]);
    }
    store.append_chunks(id, chunks, &delta);
    store.add_to_aggregate(id, delta);
    store.finish_slices(id);
    store.end_session(id, "completed", ended_ns);
    tx.commit();
}

struct Served {
    std::string profile, gmon;
};

Served serve_once(const std::string& port, int id) {
    const auto base = "/api/v1/sessions/" + std::to_string(id);
    const auto profile = testing::http_get(port, base + "/profile");
    const auto gmon = testing::http_get(port, base + "/export/gmon");
    REQUIRE(profile.status == 200);
    REQUIRE(gmon.status == 200);
    return {profile.body, gmon.body};
}

TEST_CASE(
    "retention over HTTP: raw data of an old session pruned, its aggregates served as "
    "before, what needs raw data answers 410") {
    testing::TempDir dir;
    const auto elf = (dir / "r.elf").string();
    gmon::write_synthetic_elf(elf, {{"low", 0x1000, 0x100}, {"high", 0x1100, 0x100}}, 0x1000,
                              0x1200);
    const auto db = dir / "rack.db";
    {
        storage::SessionStore store(db);
        store_session(store, elf, now_ns() - 40 * kDay);  // 1: old
        store_session(store, elf, now_ns());              // 2: young
    }
    std::ofstream(dir / "keep.toml")
        << "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\npath = \"" << db.string() << "\"\n";
    std::ofstream(dir / "prune.toml") << "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\npath = \""
                                      << db.string() << "\"\nkeep_raw_days = 30\n";

    Served before;
    std::string raw_before;
    {
        testing::Process daemon(
            testing::rackprof_argv({"serve", "--config", (dir / "keep.toml").string()}),
            dir / "keep.log");
        const std::string port = testing::wait_for_api_port(dir / "keep.log");
        before = serve_once(port, 1);
        const auto raw = testing::http_get(port, "/api/v1/sessions/1/export/raw");
        REQUIRE(raw.status == 200);
        raw_before = raw.body;
        CHECK(raw_before.size() > 20'000);
        CHECK(json::parse(testing::http_get(port, "/api/v1/sessions/1").body)["raw_pruned"]
                  .is_null());
        daemon.signal(SIGTERM);
        CHECK(daemon.wait(10s) == 0);
    }

    testing::Process daemon(
        testing::rackprof_argv({"serve", "--config", (dir / "prune.toml").string()}),
        dir / "prune.log");
    const std::string port = testing::wait_for_api_port(dir / "prune.log");
    json session;
    CHECK(testing::eventually(
        [&] {
            session = json::parse(testing::http_get(port, "/api/v1/sessions/1").body);
            return !session["raw_pruned"].is_null();
        },
        10s));
    const std::string reason = session["raw_pruned"]["reason"];
    CHECK(reason.find("raw data pruned on ") == 0);
    CHECK(reason.find("by retention (keep_raw_days = 30)") != std::string::npos);
    CHECK(session["raw_pruned"]["keep_raw_days"] == 30);
    CHECK(session["state"] == "completed");

    // Everything made from the aggregate: exactly as before.
    const Served after = serve_once(port, 1);
    CHECK(after.gmon == before.gmon);
    CHECK(json::parse(after.profile) == json::parse(before.profile));

    // What needs raw data: 410 gone, with the reason, never an empty answer.
    for (const char* path : {"/api/v1/sessions/1/export/raw", "/api/v1/sessions/1/export/ndjson",
                             "/api/v1/sessions/1/profile?from=0&to=9000000000000000000",
                             "/api/v1/sessions/1/export/gmon?from=0&to=9000000000000000000"}) {
        CAPTURE(path);
        const auto reply = testing::http_get(port, path);
        CHECK(reply.status == 410);
        CHECK(reply.body.find("\"gone\"") != std::string::npos);
        CHECK(reply.body.find("keep_raw_days = 30") != std::string::npos);
    }

    // The young session keeps everything.
    CHECK(json::parse(testing::http_get(port, "/api/v1/sessions/2").body)["raw_pruned"].is_null());
    const auto young_raw = testing::http_get(port, "/api/v1/sessions/2/export/raw");
    CHECK(young_raw.status == 200);
    CHECK(young_raw.body.size() == raw_before.size());

    // The log line and /metrics.
    CHECK(testing::eventually(
        [&] {
            return testing::read_text(dir / "prune.log")
                       .find("retention: raw data of 1 session(s) pruned (keep_raw_days = 30)") !=
                   std::string::npos;
        },
        5s));
    const auto metrics = testing::http_get(port, "/metrics");
    CHECK(metrics.body.find("rackprof_retention_sessions_raw_pruned_total 1") != std::string::npos);

    // convert --redecode of the pruned session: refused with the same words.
    daemon.signal(SIGTERM);
    CHECK(daemon.wait(10s) == 0);
    const auto redecode = testing::rackprof(
        {"convert", "--db", db.string(), "--session", "1", "--redecode", "--report", "json"});
    CHECK(redecode.exit_code == 1);
    CHECK(redecode.err.find("keep_raw_days = 30") != std::string::npos);
}

}  // namespace
}  // namespace rackprof
