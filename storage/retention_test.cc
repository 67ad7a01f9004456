// Retention against a real SQLite file written by the real storage writer: sessions whose end
// lies before the rules' cutoffs (the clock is the options', not a sleep) lose their raw data or
// go whole; young, capturing and summing-behind sessions are untouched; aggregates are the
// same before and after; freed pages are used again by later writes.
#include <doctest/doctest.h>

#include <mutex>

#include "storage/retention.h"
#include "storage/session_pages.h"
#include "storage/storage_writer.h"
#include "storage/temp_db_test.h"

namespace rackprof::storage {
namespace {

using protocol::Record;

constexpr std::int64_t kNow = 1'790'000'000'000'000'000;  // 2026-09-21, the tests' clock

// A session written through the writer: `chunks` chunks of 8 KiB of noise and 200 records
// (arcs and PC samples), received from `started_ns` on, then closed at `ended_ns` (0: left
// capturing).
SessionId write_session(StorageWriter& writer, const std::string& board, std::int64_t started_ns,
                        std::int64_t ended_ns, int chunks, std::uint64_t seed) {
    const SessionId id = writer.reserve_session_id();
    NewSession spec;
    spec.board = board;
    spec.link = "sim://blinky";
    spec.started_ns = started_ns;
    writer.submit(OpenSessionOp{id, spec});
    SessionCounters counters;
    std::uint64_t noise = seed;
    for (int i = 0; i < chunks; ++i) {
        std::vector<Record> records;
        for (int r = 0; r < 100; ++r) {
            records.push_back(Record::pc_sample(0x1000 + 2 * ((seed + i + r) % 64)));
            records.push_back(Record::arc(0x2000 + 4 * (r % 8), 0x3000 + 4 * ((i + r) % 16)));
        }
        std::vector<std::uint8_t> raw(8 << 10);
        for (auto& b : raw)
            b = static_cast<std::uint8_t>(
                (noise = noise * 6364136223846793005u + 1442695040888963407u) >> 56);
        counters.bytes_in += raw.size();
        counters.pc_samples += 100;
        counters.arcs += 100;
        ChunkOp op{id,
                   started_ns + i * 1'000'000'000LL,
                   std::move(raw),
                   std::move(records),
                   counters,
                   {},
                   {},
                   {}};
        op.delta.emplace().add(op.records);  // its sender sums a chunk
        REQUIRE(writer.submit(std::move(op)));
    }
    if (ended_ns != 0) writer.submit(CloseSessionOp{id, "completed", ended_ns, counters});
    writer.flush();
    return id;
}

std::int64_t rows_of(SessionStore& store, const char* table, SessionId id) {
    Statement st = store.db().prepare(
        (std::string("SELECT count(*) FROM ") + table + " WHERE session_id = ?").c_str());
    st.bind(1, id);
    st.step();
    return st.column_int(0);
}

std::int64_t pragma(SessionStore& store, const char* name) {
    Statement st = store.db().prepare((std::string("PRAGMA ") + name).c_str());
    st.step();
    return st.column_int(0);
}

std::int64_t raw_rows(SessionStore& store, SessionId id) {
    return rows_of(store, "raw_chunks", id) + rows_of(store, "record_batches", id) +
           rows_of(store, "record_slices", id);
}

std::int64_t days_ago(std::int64_t days) {
    return kNow - days * kNsPerDay;
}

TEST_CASE("retention: old sessions lose their raw data or go whole, the rest is untouched") {
    TempDb db;
    SessionId old = 0, young = 0, ancient = 0;
    {
        // Written by a writer that keeps everything (rules of 0).
        StorageWriterOptions options;
        options.commit_interval = std::chrono::milliseconds(5);
        StorageWriter writer(db.path, options);
        old = write_session(writer, "old", days_ago(41), days_ago(40), 120, 1);
        young = write_session(writer, "young", days_ago(3), days_ago(2), 20, 2);
        ancient = write_session(writer, "ancient", days_ago(401), days_ago(400), 20, 3);
        CHECK(writer.prune_now().rows == 0);
        writer.stop();
    }
    SessionStore reader(db.path, Database::Mode::kReadOnly);
    const gmon::Aggregate old_before = reader.aggregate(old);
    const gmon::Aggregate young_before = reader.aggregate(young);
    const auto old_info_before = reader.session(old);
    REQUIRE(old_info_before);
    CHECK_FALSE(old_info_before->raw_pruned);
    REQUIRE(raw_rows(reader, old) > 0);
    REQUIRE(rows_of(reader, "record_slices", old) > 0);
    CHECK(old_before.total_samples() == 120 * 100);
    const std::int64_t young_rows = raw_rows(reader, young);
    const std::int64_t pages_before = pragma(reader, "page_count");

    // The writer with rules prunes at start (and again on prune_now).
    std::mutex mutex;
    std::vector<StorageEvent> events;
    StorageWriterOptions options;
    options.commit_interval = std::chrono::milliseconds(5);
    options.retention.rules = {30, 365};
    options.retention.clock = [] { return kNow; };
    options.retention.rows_per_transaction = 2;  // many small transactions
    StorageWriter writer(db.path, options);
    writer.on_event([&](const StorageEvent& e) {
        std::lock_guard lock(mutex);
        events.push_back(e);
    });
    // Started 60 days ago and still capturing: never touched, whatever its age.
    const SessionId capturing = write_session(writer, "capturing", days_ago(60), 0, 20, 4);
    const gmon::Aggregate capturing_before = reader.aggregate(capturing);
    const std::int64_t capturing_rows = raw_rows(reader, capturing);
    CHECK(capturing_rows > 0);

    writer.prune_now();  // after the pass at start
    const RetentionTotals pass = writer.stats().retention;
    CHECK(pass.sessions_raw_pruned == 1);
    CHECK(pass.sessions_deleted == 1);
    CHECK(pass.rows > 0);
    CHECK(pass.bytes > 120 * 1024);  // zstd does not shrink noise much

    // The old session: no raw rows, marked, its aggregate and counters exactly as before.
    CHECK(raw_rows(reader, old) == 0);
    const auto old_info = reader.session(old);
    REQUIRE(old_info);
    REQUIRE(old_info->raw_pruned);
    CHECK(old_info->raw_pruned->at_ns == kNow);
    CHECK(old_info->raw_pruned->keep_days == 30);
    CHECK(raw_pruned_reason(*old_info->raw_pruned) ==
          "raw data pruned on 2026-09-21 by retention (keep_raw_days = 30)");
    CHECK(old_info->counters == old_info_before->counters);
    CHECK(old_info->state == "completed");
    CHECK(reader.aggregate(old) == old_before);
    CHECK(reader.versioned_aggregate(old)->aggregate == old_before);
    // What needs the raw data says why it is gone, never an empty export.
    const auto lease = [&reader] { return &reader; };
    auto raw = raw_pages(lease, old);
    CHECK_THROWS_WITH_AS(raw(), doctest::Contains("raw data pruned on 2026-09-21"), StorageError);
    auto records = record_pages(lease, old);
    CHECK_THROWS_AS(records(), StorageError);

    // The ancient one is gone whole; the young and the capturing ones keep everything.
    CHECK_FALSE(reader.session(ancient));
    CHECK(raw_rows(reader, ancient) == 0);
    CHECK(rows_of(reader, "session_arcs", ancient) == 0);
    CHECK(raw_rows(reader, young) == young_rows);
    CHECK(raw_rows(reader, capturing) == capturing_rows);
    CHECK_FALSE(reader.session(young)->raw_pruned);
    CHECK_FALSE(reader.session(capturing)->raw_pruned);
    CHECK(reader.session(capturing)->state == "capturing");
    CHECK(reader.aggregate(young) == young_before);
    CHECK(reader.aggregate(capturing) == capturing_before);
    auto young_raw = raw_pages(lease, young);
    CHECK(young_raw()->size() > 0);

    {
        std::lock_guard lock(mutex);
        const auto pruned = std::find_if(events.begin(), events.end(), [](const StorageEvent& e) {
            return e.kind == StorageEvent::Kind::kPruned;
        });
        REQUIRE(pruned != events.end());
        CHECK(pruned->message.find("raw data of 1 session(s) pruned (keep_raw_days = 30), 1 "
                                   "session(s) deleted") != std::string::npos);
    }

    // Freed pages are on the freelist, and the next writes take them: the file does not grow.
    // (The capturing session's 20 chunks came after pages_before.)
    const std::int64_t free_pages = pragma(reader, "freelist_count");
    const std::int64_t pages_pruned = pragma(reader, "page_count");
    CHECK(free_pages * 2 > pages_before);  // most of the file held the old sessions' raw data
    CHECK(pages_pruned < pages_before + 16);
    write_session(writer, "after", days_ago(0), kNow, 60, 5);
    CHECK(pragma(reader, "page_count") == pages_pruned);
    CHECK(pragma(reader, "freelist_count") < free_pages);
    MESSAGE("retention freed ", free_pages, " of ", pages_pruned, " pages; 60 new chunks took ",
            free_pages - pragma(reader, "freelist_count"), " of them, the file stayed at ",
            pragma(reader, "page_count"), " pages");

    // A second pass finds nothing left to do.
    const RetentionTotals again = writer.prune_now();
    CHECK(again.rows == 0);
    CHECK(again.sessions_raw_pruned == 0);
    writer.stop();
}

TEST_CASE("retention: a pruning cut short is finished by the next pass, whatever the rules") {
    TempDb db;
    SessionId old = 0;
    {
        StorageWriterOptions options;
        options.commit_interval = std::chrono::milliseconds(5);
        StorageWriter writer(db.path, options);  // rules of 0: nothing pruned
        old = write_session(writer, "old", days_ago(41), days_ago(40), 40, 1);
        CHECK(writer.prune_now().rows == 0);
        writer.stop();
    }
    SessionStore store(db.path);
    const gmon::Aggregate before = store.aggregate(old);
    {
        // One row and the mark, then "a stop": marked before anything went.
        RetentionPass pass(store, {30, 0}, kNow, {});
        CHECK_FALSE(pass.done());
        pass.step(std::chrono::nanoseconds(1), 1);
        CHECK(pass.totals().rows == 1);
    }
    REQUIRE(store.session(old)->raw_pruned);
    CHECK(raw_rows(store, old) > 0);
    // Rules now keep raw data forever: the marked session is still finished.
    RetentionPass next(store, {0, 0}, kNow, {});
    while (!next.done()) next.step(std::chrono::seconds(1), 4);
    CHECK(raw_rows(store, old) == 0);
    CHECK(next.totals().sessions_raw_pruned == 1);
    CHECK(store.aggregate(old) == before);
}

TEST_CASE("retention: sessions the writer has open, or with sums behind, keep their raw data") {
    TempDb db;
    StorageWriterOptions options;
    options.commit_interval = std::chrono::milliseconds(5);
    StorageWriter writer(db.path, options);
    const SessionId done = write_session(writer, "done", days_ago(41), days_ago(40), 4, 1);
    writer.stop();
    SessionStore store(db.path);
    // Sums behind their rows (a crash before complete_sums): the rows are the only copy.
    store.db().exec(
        ("UPDATE sessions SET summed_seq = 1 WHERE id = " + std::to_string(done)).c_str());
    CHECK(RetentionPass(store, {30, 0}, kNow, {}).done());
    store.db().exec("UPDATE sessions SET summed_seq = NULL");
    // Open in the writer (whatever the table says).
    CHECK(RetentionPass(store, {30, 0}, kNow, {done}).done());
    CHECK_FALSE(RetentionPass(store, {30, 0}, kNow, {}).done());
    // Young enough: nothing.
    CHECK(RetentionPass(store, {41, 0}, kNow, {}).done());
}

TEST_CASE("retention: schema 12 adds the pruned marks to a schema 11 database") {
    TempDb db;
    {
        SessionStore store(db.path);
        NewSession spec;
        spec.board = "b";
        spec.link = "sim://x";
        store.create_session(spec);
        store.db().exec(
            "DROP TABLE session_tasks; ALTER TABLE sessions DROP COLUMN arch; "
            "ALTER TABLE sessions DROP COLUMN "
            "samples_halted_ns; "
            "ALTER TABLE sessions DROP COLUMN "
            "stack_unwind_failures; ALTER TABLE sessions DROP COLUMN cct_unit; "
            "DROP TABLE session_sums; ALTER TABLE sessions DROP COLUMN raw_pruned_ns; ALTER TABLE "
            "sessions DROP COLUMN raw_pruned_keep_days; PRAGMA user_version = 11");
    }
    {
        // Read-only, before the migration: read as never pruned.
        SessionStore old(db.path, Database::Mode::kReadOnly);
        CHECK_FALSE(old.session(1)->raw_pruned);
    }
    SessionStore store(db.path);
    CHECK(schema_version(store.db()) == kSchemaVersion);  // 12 and every later migration
    CHECK_FALSE(store.session(1)->raw_pruned);
}

}  // namespace
}  // namespace rackprof::storage
