#include "daemon/capture/capture_session.h"

#include <doctest/doctest.h>

#include "protocol/legacy_format.h"
#include "storage/session_store.h"
#include "storage/temp_db_test.h"

namespace rackprof::daemon::capture {
namespace {

// A legacy stream of a firmware's loop: arcs and PC samples, `n` of each, `salt` moving them.
std::vector<std::uint8_t> loop_wire(std::uint32_t n, std::uint32_t salt) {
    std::vector<std::uint8_t> wire;
    for (std::uint32_t i = 0; i < n; ++i) {
        protocol::encode_legacy(
            protocol::Record::arc(0x1000 + 4 * ((i + salt) % 5), 0x2000 + 8 * (i % 3)), 3, wire);
        protocol::encode_legacy(protocol::Record::pc_sample(0x3000 + 2 * ((i * 7 + salt) % 11)), 3,
                                wire);
    }
    return wire;
}

storage::NewSession spec_of(const std::string& board) {
    storage::NewSession spec;
    spec.board = board;
    spec.link = "sim://blinky";
    return spec;
}

gmon::Aggregate stored(const std::filesystem::path& db, storage::SessionId id) {
    storage::SessionStore store(db, storage::Database::Mode::kReadOnly);
    return store.aggregate(id);
}

TEST_CASE("a hand-over's sums are in the live changes at once, as storage stores them") {
    storage::TempDb db;
    storage::StorageWriterOptions options;
    options.commit_interval = std::chrono::hours(1);  // the writer takes nothing until a flush
    storage::StorageWriter writer(db.path, options);
    const storage::SessionId id = writer.reserve_session_id();
    CaptureSession session(id, spec_of("board"), protocol::WireSpec{}, writer);
    gmon::Aggregate live;
    for (std::uint32_t i = 0; i < 8; ++i) {
        const std::vector<std::uint8_t> wire = loop_wire(500 + i, i);
        REQUIRE(session.on_chunk(wire, 1000 + i));
        REQUIRE(session.hand_over());
        // Nothing committed yet: the changes are the capture side's own sums.
        const gmon::Aggregate changes = session.take_changes();
        CHECK_FALSE(changes.empty());
        live.merge(changes);
        writer.flush();
        CHECK(stored(db.path, id) == live);
    }
    session.end("completed", 2000);
    live.merge(session.take_changes());
    writer.flush();
    CHECK(stored(db.path, id) == live);
    CHECK(live.total_calls() == session.counters().arcs);
}

TEST_CASE("the live changes add up to the stored aggregate while the writer is behind") {
    storage::TempDb db;
    storage::StorageWriterOptions options;
    options.commit_interval = std::chrono::milliseconds(1);
    // A small queue: one chunk queued is over an eighth of it, so the writer is behind whenever
    // a chunk comes while it stores; some chunks are refused (counted, in neither).
    options.queue_budget_bytes = 1u << 20;
    storage::StorageWriter writer(db.path, options);
    const storage::SessionId id = writer.reserve_session_id();
    gmon::Aggregate live;
    int behind = 0, not_behind = 0;
    {
        CaptureSession session(id, spec_of("board"), protocol::WireSpec{}, writer);
        for (std::uint32_t i = 0; i < 5000 && (behind < 5 || not_behind < 5 || i < 50); ++i) {
            (writer.behind() ? behind : not_behind) += 1;
            const std::vector<std::uint8_t> wire = loop_wire(2000, i);
            session.on_chunk(wire, 1000 + i);
            session.hand_over();
            live.merge(session.take_changes());
        }
        session.end("completed", 100000);
        live.merge(session.take_changes());
        writer.flush();
    }
    CHECK(behind > 0);
    CHECK(not_behind > 0);
    CHECK(stored(db.path, id) == live);
}

}  // namespace
}  // namespace rackprof::daemon::capture
