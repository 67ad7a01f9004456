// A session's profile over a receive-time window (GET /api/v1/sessions/{id}/profile?from=&to=)
// from a real daemon, against a tally of the records the test itself stored: the daemon adds
// record slices and decodes only the rows they leave out, and must count exactly what was
// received in the window, for windows at slices' edges and for a session written before the
// slices existed (schema 10).
#include <signal.h>

#include <doctest/doctest.h>

#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "gmon/synthetic_elf.h"
#include "storage/session_store.h"
#include "tests/integration/test_support.h"

namespace rackprof {
namespace {

using nlohmann::json;
using protocol::Record;
using namespace std::chrono_literals;

constexpr int kFunctions = 24;
constexpr std::uint32_t kLow = 0x1000, kFunctionBytes = 256;
constexpr std::int64_t kT0 = 1'700'000'000'000'000'000;

std::string function_name(std::uint32_t i) {
    return "function_" + std::to_string(i);
}

struct StoredChunk {
    std::int64_t received_ns;
    std::vector<Record> records;
};

// Arcs only from a lower to a higher function (no cycles, no recursion: gprof's calls are then
// plain sums), PC samples anywhere in a function.
std::vector<Record> random_records(std::mt19937_64& rng, std::size_t n) {
    std::vector<Record> out(n);
    for (auto& r : out) {
        const auto from = static_cast<std::uint32_t>(rng() % (kFunctions - 1));
        if (rng() % 3 == 0) {
            const auto to = from + 1 + static_cast<std::uint32_t>(rng() % (kFunctions - 1 - from));
            r = Record::arc(
                (kLow + from * kFunctionBytes + 2 * static_cast<std::uint32_t>(rng() % 100)) | 1,
                (kLow + to * kFunctionBytes) | 1);
        } else {
            r = Record::pc_sample(kLow + from * kFunctionBytes +
                                  2 * static_cast<std::uint32_t>(rng() % (kFunctionBytes / 2)));
        }
    }
    return out;
}

// One session of `records` records in commits of up to 32 chunks, chunks 1 ms apart (some
// together); what was stored, in order.
std::vector<StoredChunk> store_session(storage::SessionStore& store, const std::string& elf,
                                       std::mt19937_64& rng, std::size_t records) {
    storage::NewSession spec;
    spec.board = "window";
    spec.link = "file:///window";
    spec.elf_path = elf;
    spec.started_ns = kT0;
    const auto id = store.create_session(spec);
    std::vector<StoredChunk> stored;
    std::int64_t seq = 0, t = kT0;
    while (records > 0) {
        storage::Transaction tx(store.db());
        std::vector<storage::SessionStore::ChunkToStore> chunks;
        const std::size_t first = stored.size();
        for (std::size_t c = 1 + rng() % 32; c > 0 && records > 0; --c) {
            auto recs = random_records(rng, std::min<std::size_t>(records, 1 + rng() % 4000));
            records -= recs.size();
            t += static_cast<std::int64_t>(rng() % 2) * 1'000'000;
            stored.push_back({t, std::move(recs)});
        }
        gmon::Aggregate delta;
        for (std::size_t i = first; i < stored.size(); ++i) {
            chunks.push_back({seq++, stored[i].received_ns, {}, stored[i].records});
            delta.add(stored[i].records);
        }
        store.append_chunks(id, chunks, &delta);
        store.add_to_aggregate(id, delta);
        tx.commit();
    }
    storage::Transaction tx(store.db());
    store.finish_slices(id);
    store.end_session(id, "completed", t);
    tx.commit();
    return stored;
}

// Calls into and samples in each function, of the chunks received within [from, to].
struct Tally {
    std::map<std::string, std::uint64_t> calls, samples;
    std::uint64_t total_samples = 0;
};
Tally tally(const std::vector<StoredChunk>& chunks, std::int64_t from, std::int64_t to) {
    Tally out;
    for (const auto& c : chunks) {
        if (c.received_ns < from || c.received_ns > to) continue;
        for (const auto& r : c.records) {
            const auto function = ((r.self_pc & ~1u) - kLow) / kFunctionBytes;
            if (r.kind == protocol::RecordKind::kArc) {
                out.calls[function_name(function)] += r.count;
            } else {
                out.samples[function_name(function)] += r.count;
                out.total_samples += r.count;
            }
        }
    }
    return out;
}

Tally tally_of(const json& profile) {
    Tally out;
    for (const auto& row : profile["flat"]) {
        const std::string name = row["name"];
        if (!row["calls"].is_null()) out.calls[name] = row["calls"];
        if (row["samples"].get<double>() > 0)
            out.samples[name] = static_cast<std::uint64_t>(row["samples"].get<double>());
    }
    out.total_samples = profile["total_samples"];
    return out;
}

// Windows: random ones, each slice's edges exactly and one ns either side, the whole session.
std::vector<std::pair<std::int64_t, std::int64_t>> windows(const std::filesystem::path& db,
                                                           std::int64_t session,
                                                           std::int64_t last_ns,
                                                           std::mt19937_64& rng) {
    std::vector<std::pair<std::int64_t, std::int64_t>> out;
    const auto span = static_cast<std::uint64_t>(last_ns - kT0 + 4'000'000);
    for (int i = 0; i < 12; ++i) {
        const std::int64_t a = kT0 - 2'000'000 + static_cast<std::int64_t>(rng() % span);
        const std::int64_t b = kT0 - 2'000'000 + static_cast<std::int64_t>(rng() % span);
        out.emplace_back(std::min(a, b), std::max(a, b));
    }
    storage::Database read(db, storage::Database::Mode::kReadOnly);
    auto slices =
        read.prepare("SELECT min_ns, max_ns FROM record_slices WHERE session_id = ? LIMIT 6");
    slices.bind(1, session);
    while (slices.step()) {
        const std::int64_t lo = slices.column_int(0), hi = slices.column_int(1);
        out.emplace_back(lo, hi);
        out.emplace_back(lo + 1, hi);
        out.emplace_back(lo, hi - 1);
        out.emplace_back(lo - 1, hi + 1);
    }
    out.emplace_back(0, std::numeric_limits<std::int64_t>::max());
    return out;
}

TEST_CASE("window profiles over HTTP count exactly the records received in the window") {
    testing::TempDir dir;
    const auto elf = (dir / "window.elf").string();
    std::vector<gmon::SyntheticFunction> functions;
    for (std::uint32_t i = 0; i < kFunctions; ++i)
        functions.push_back({function_name(i), kLow + i * kFunctionBytes, kFunctionBytes});
    gmon::write_synthetic_elf(elf, functions, kLow, kLow + kFunctions * kFunctionBytes);
    const auto db = dir / "rack.db";
    std::mt19937_64 rng(15);
    std::vector<StoredChunk> old_chunks, new_chunks;
    {
        storage::SessionStore store(db);
        old_chunks = store_session(store, elf, rng, 200'000);
        // Session 1 as schema 10 left it: no record slices.
        store.db().exec(
            "DROP TABLE session_tasks; ALTER TABLE sessions DROP COLUMN arch; "
            "ALTER TABLE sessions DROP COLUMN "
            "samples_halted_ns; "
            "ALTER TABLE sessions DROP COLUMN "
            "stack_unwind_failures; ALTER TABLE sessions DROP COLUMN cct_unit; "
            "DROP TABLE session_sums; DROP TABLE record_slices; ALTER TABLE sessions DROP "
            "COLUMN summed_seq; ALTER TABLE sessions DROP COLUMN raw_pruned_ns; ALTER TABLE "
            "sessions DROP COLUMN "
            "raw_pruned_keep_days; PRAGMA user_version = 10");
    }
    {
        storage::SessionStore store(db);  // migrates to 10
        new_chunks = store_session(store, elf, rng, 600'000);
    }
    std::ofstream(dir / "rack.toml")
        << "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\npath = \"" << db.string() << "\"\n";
    testing::Process daemon(
        testing::rackprof_argv({"serve", "--config", (dir / "rack.toml").string()}),
        dir / "serve.log");
    const std::string port = testing::wait_for_api_port(dir / "serve.log");
    int checked = 0;
    for (const auto& [session, chunks] :
         {std::pair<int, const std::vector<StoredChunk>*>{1, &old_chunks}, {2, &new_chunks}}) {
        for (const auto& [from, to] : windows(db, session, chunks->back().received_ns, rng)) {
            // CAPTURE takes no structured bindings (clang 14).
            const int stored_session = session;
            const auto from_start = from - kT0, to_start = to - kT0;
            CAPTURE(stored_session);
            CAPTURE(from_start);
            CAPTURE(to_start);
            const auto reply = testing::http_get(
                port, "/api/v1/sessions/" + std::to_string(session) +
                          "/profile?from=" + std::to_string(from) + "&to=" + std::to_string(to));
            REQUIRE(reply.status == 200);
            const Tally got = tally_of(json::parse(reply.body));
            const Tally expected = tally(*chunks, from, to);
            CHECK(got.calls == expected.calls);
            CHECK(got.samples == expected.samples);
            CHECK(got.total_samples == expected.total_samples);
            ++checked;
        }
    }
    CHECK(checked > 40);
    daemon.signal(SIGTERM);
    CHECK(daemon.wait(10s) == 0);
}

}  // namespace
}  // namespace rackprof
