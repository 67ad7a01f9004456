// The storage writer against a database that fills up for real: SQLite's max_page_count makes
// every commit past the cap fail with SQLITE_FULL, as a full disk does, and deleting a session
// frees pages that commits use again, as freeing disk space does.
#include <doctest/doctest.h>

#include <fstream>
#include <mutex>
#include <thread>

#include "storage/session_store.h"
#include "storage/storage_writer.h"
#include "storage/temp_db_test.h"

namespace rackprof::storage {
namespace {

using protocol::Record;
using Kind = StorageEvent::Kind;

struct Events {
    std::mutex mutex;
    std::vector<StorageEvent> seen;
    void add(const StorageEvent& e) {
        std::lock_guard lock(mutex);
        seen.push_back(e);
    }
    std::vector<StorageEvent> of(Kind kind) {
        std::lock_guard lock(mutex);
        std::vector<StorageEvent> out;
        for (const auto& e : seen)
            if (e.kind == kind) out.push_back(e);
        return out;
    }
};

// Chunks of 8 KiB raw and 100 PC samples, their counters counting what was sent; with
// `encode`, parts of every other chunk encoded by the sender (ChunkOp::encoded): its records,
// as the capture thread does while the writer is behind, or the whole chunk.
class Sender {
  public:
    Sender(StorageWriter& writer, SessionId id, bool encode = false)
        : writer_(writer), id_(id), encode_(encode) {}
    void chunk() {
        ++t_;
        std::vector<Record> records(100, Record::pc_sample(0x1000 + 2 * (t_ % 50)));
        counters_.bytes_in += kRaw;
        counters_.pc_samples += records.size();
        sent_ += records.size();
        // Noise, so the database grows by what is sent (blocks are compressed) and fills up.
        std::vector<std::uint8_t> raw(kRaw);
        for (auto& b : raw)
            b = static_cast<std::uint8_t>(
                (noise_ = noise_ * 6364136223846793005u + 1442695040888963407u) >> 56);
        ChunkOp op{id_, t_, std::move(raw), std::move(records), counters_, {}, {}, {}};
        op.delta.emplace().add(op.records);  // its sender sums a chunk
        if (encode_ && t_ % 2) {
            const bool whole = t_ % 4 == 1;
            op.encoded = std::make_shared<const EncodedChunk>(encode_chunk(
                t_, whole ? std::span<const std::uint8_t>(op.raw) : std::span<const std::uint8_t>(),
                op.records));
            if (whole) op.raw.clear();
            op.records.clear();
        }
        REQUIRE(writer_.submit(std::move(op)));
    }
    std::uint64_t sent() const { return sent_; }
    std::int64_t now() const { return t_; }
    const SessionCounters& counters() const { return counters_; }
    SessionCounters& counters() { return counters_; }

  private:
    static constexpr std::size_t kRaw = 8 << 10;
    std::uint64_t noise_ = 1;
    StorageWriter& writer_;
    SessionId id_;
    bool encode_;
    std::int64_t t_ = 0;
    std::uint64_t sent_ = 0;
    SessionCounters counters_;
};

NewSession spec_of(const std::string& board) {
    NewSession spec;
    spec.board = board;
    spec.link = "sim://blinky";
    return spec;
}

std::uint64_t stored_records(SessionStore& store, SessionId id) {
    std::uint64_t n = 0;
    store.for_each_record_batch(id,
                                [&](std::int64_t, std::span<const Record> r) { n += r.size(); });
    return n;
}

TEST_CASE(
    "a full disk: lost chunks are counted with a gap, nothing else is lost, capture resumes") {
    bool encode = false;
    SUBCASE("chunks as the writer encodes them") {}
    SUBCASE("every other chunk encoded by its sender") {
        encode = true;
    }
    TempDb db;
    Events events;
    SessionId filler = 0;
    SessionId session = 0;
    std::uint64_t sent = 0;
    std::uint64_t lost = 0;
    {
        StorageWriterOptions options;
        options.commit_interval = std::chrono::milliseconds(5);
        options.max_database_bytes = 2 << 20;
        options.report_interval = std::chrono::hours(1);
        StorageWriter writer(db.path, options);
        writer.on_event([&](const StorageEvent& e) { events.add(e); });

        // A completed session taking room, to delete later.
        filler = writer.reserve_session_id();
        writer.submit(OpenSessionOp{filler, spec_of("filler")});
        Sender fill(writer, filler);
        for (int i = 0; i < 60; ++i) fill.chunk();
        writer.submit(CloseSessionOp{filler, "completed", fill.now(), fill.counters()});
        writer.flush();
        REQUIRE_FALSE(writer.health().failing);

        // Capture until the database is full.
        session = writer.reserve_session_id();
        writer.submit(OpenSessionOp{session, spec_of("board")});
        Sender capture(writer, session, encode);
        for (int i = 0; i < 1000 && !writer.health().failing; ++i) {
            capture.chunk();
            writer.flush();
        }
        REQUIRE(writer.health().failing);
        CHECK(writer.health().error.find("full") != std::string::npos);
        // While full: more chunks (lost), a link gap and a HELLO (both held, not lost).
        for (int i = 0; i < 20; ++i) {
            capture.chunk();
            writer.flush();
        }
        capture.counters().gaps = 1;
        writer.submit(GapOp{
            session, {capture.now(), capture.now() + 1, "unplugged", {}, {}}, capture.counters()});
        writer.submit(TargetOp{session, {"beef", 0x1000, 0x2000, ""}, "", "", ""});
        writer.flush();
        lost = writer.with_storage_losses(session, capture.counters()).records_lost_storage;
        CHECK(lost >= 20 * 100);
        CHECK(writer.with_storage_losses(session, capture.counters()).gaps == 2);

        // Space returns: the filler goes, and what comes next is stored.
        writer.submit(DeleteSessionOp{filler});
        capture.chunk();
        writer.flush();
        CHECK_FALSE(writer.health().failing);
        for (int i = 0; i < 5; ++i) capture.chunk();
        writer.submit(CloseSessionOp{session, "completed", capture.now(), capture.counters()});
        writer.stop();
        sent = capture.sent();
        CHECK(writer.loss_totals().records == lost);
        CHECK(writer.loss_totals().operations_uncommitted == 0);
    }
    // Said once when it began (naming the database and its free space), once when it ended.
    const auto failing = events.of(Kind::kFailing);
    REQUIRE(failing.size() == 1);
    CHECK(failing[0].message.find(db.path.string()) != std::string::npos);
    CHECK(failing[0].message.find("free of") != std::string::npos);
    CHECK(events.of(Kind::kRecovered).size() == 1);
    CHECK(events.of(Kind::kStillFailing).empty());
    CHECK(events.of(Kind::kOperationLost).empty());
    CHECK(events.of(Kind::kSessionLosses).size() == 1);

    SessionStore store(db.path, Database::Mode::kReadOnly);
    CHECK_FALSE(store.session(filler));
    const auto info = store.session(session);
    REQUIRE(info);
    CHECK(info->state == "completed");
    CHECK(info->target.build_id == "beef");
    CHECK(info->counters.records_lost_storage == lost);
    CHECK(info->counters.bytes_lost_storage == lost / 100 * (8 << 10));
    CHECK(info->counters.pc_samples == sent);
    // Every record sent is stored or counted lost, exactly.
    CHECK(stored_records(store, session) + lost == sent);
    CHECK(store.aggregate(session).total_samples() == stored_records(store, session));
    // The link's gap and the storage's, and the gaps counter counts both.
    const auto gaps = store.gaps(session);
    REQUIRE(gaps.size() == 2);
    CHECK(info->counters.gaps == 2);
    int storage_gaps = 0;
    for (const auto& g : gaps) {
        if (g.reason.rfind("storage: ", 0) == 0) {
            ++storage_gaps;
            CHECK(g.reason.find("full") != std::string::npos);
            CHECK(g.ended_ns > g.started_ns);
            // The one storage gap lost exactly what the counters say was lost.
            CHECK(g.records_lost == lost);
            CHECK(g.bytes_lost == info->counters.bytes_lost_storage);
        } else {
            CHECK(g.reason == "unplugged");
            CHECK_FALSE(g.records_lost);  // a link's gap knows only its time
            CHECK_FALSE(g.bytes_lost);
        }
    }
    CHECK(storage_gaps == 1);
}

TEST_CASE("stopping while the disk is still full: said, counted, never waited on forever") {
    TempDb db;
    Events events;
    StorageWriterOptions options;
    options.commit_interval = std::chrono::milliseconds(5);
    options.max_database_bytes = 1 << 20;
    options.report_interval = std::chrono::hours(1);
    StorageWriter writer(db.path, options);
    writer.on_event([&](const StorageEvent& e) { events.add(e); });
    const SessionId first = writer.reserve_session_id();
    writer.submit(OpenSessionOp{first, spec_of("board")});
    Sender capture(writer, first);
    for (int i = 0; i < 1000 && !writer.health().failing; ++i) {
        capture.chunk();
        writer.flush();
    }
    REQUIRE(writer.health().failing);
    // A session opened now that cannot fit (its settings need pages the cap leaves none of):
    // its open is held, and retried meanwhile.
    const SessionId second = writer.reserve_session_id();
    NewSession big = spec_of("board");
    big.wire_options = std::string(200 << 10, ' ');
    writer.submit(OpenSessionOp{second, big});
    for (int i = 0; i < 50; ++i) {
        capture.chunk();
        writer.flush();
    }
    writer.stop();
    CHECK(events.of(Kind::kFailing).size() == 1);  // 50 failed commits, one report
    const auto uncommitted = events.of(Kind::kUncommitted);
    REQUIRE(uncommitted.size() == 1);
    CHECK(uncommitted[0].message.find("session(s) " + std::to_string(second)) != std::string::npos);
    const auto totals = writer.loss_totals();
    CHECK_FALSE(totals.all_committed());
    CHECK(totals.operations_uncommitted == 1);
    CHECK(totals.records >= 50 * 100);
    CHECK(totals.sessions.count(first));
}

}  // namespace
}  // namespace rackprof::storage

namespace rackprof::storage {
namespace {

// A database of some 2.5 MiB: one session of 300 chunks.
void write_database(const std::filesystem::path& path) {
    StorageWriter writer(path);
    const SessionId id = writer.reserve_session_id();
    writer.submit(OpenSessionOp{id, spec_of("board")});
    Sender capture(writer, id);
    for (int i = 0; i < 300; ++i) capture.chunk();
    writer.submit(CloseSessionOp{id, "completed", capture.now(), capture.counters()});
    writer.stop();
}

// 64 KiB of garbage (a fixed pseudo-random sequence) written over the middle of a file.
void write_garbage_in_the_middle(const std::filesystem::path& path) {
    const auto size = std::filesystem::file_size(path);
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size / 2));
    std::uint32_t x = 2463534242u;
    for (int i = 0; i < (64 << 10); ++i) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        f.put(static_cast<char>(x & 0xFF));
    }
}

std::string contents(const std::filesystem::path& path) {
    std::ifstream f(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

TEST_CASE("a database with 64 KiB of garbage in its middle is refused at start, untouched") {
    TempDb db;
    write_database(db.path);
    {
        Database sound(db.path, Database::Mode::kReadOnly);
        CHECK(check_at_start(sound).ok());
        CHECK(check_at_start(sound).whole_file);
        CHECK(integrity_check(sound).ok());
    }
    REQUIRE(std::filesystem::file_size(db.path) > (1u << 20));
    write_garbage_in_the_middle(db.path);
    const std::string damaged = contents(db.path);
    CHECK_THROWS_WITH_AS(StorageWriter(db.path),
                         doctest::Contains("is damaged (PRAGMA quick_check: "), StorageError);
    CHECK(contents(db.path) == damaged);  // nothing was written to it, not even a migration
    Database checked(db.path, Database::Mode::kReadOnly);
    const auto full = integrity_check(checked);
    CHECK_FALSE(full.ok());
    CHECK_FALSE(check_at_start(checked).ok());
}

}  // namespace
}  // namespace rackprof::storage

namespace rackprof::storage {
namespace {

// A session's samples as readers see them (the sums and the rows after them).
std::uint64_t summed_samples(const std::filesystem::path& path, SessionId id) {
    SessionStore store(path, Database::Mode::kReadOnly);
    return store.aggregate(id).total_samples();
}
// What its sums rows alone hold.
std::uint64_t stored_sums(const std::filesystem::path& path, SessionId id) {
    Database db(path, Database::Mode::kReadOnly);
    Statement st =
        db.prepare("SELECT COALESCE(SUM(count), 0) FROM session_pcs WHERE session_id = ?");
    st.bind(1, id);
    st.step();
    return static_cast<std::uint64_t>(st.column_int(0));
}

TEST_CASE(
    "a capturing session's sums are written once per sums_interval and at its close; readers add "
    "the rows after them") {
    TempDb db;
    StorageWriterOptions options;
    options.commit_interval = std::chrono::milliseconds(5);
    options.sums_interval = std::chrono::hours(1);
    StorageWriter writer(db.path, options);
    const SessionId id = writer.reserve_session_id();
    writer.submit(OpenSessionOp{id, spec_of("board")});
    Sender capture(writer, id);
    for (int i = 0; i < 10; ++i) capture.chunk();
    // Committed (the records are there) without a flush, which would write the sums.
    bool committed = false;
    for (int i = 0; i < 1000 && !committed; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        SessionStore store(db.path, Database::Mode::kReadOnly);
        committed = stored_records(store, id) == 1000;
    }
    REQUIRE(committed);
    CHECK(stored_sums(db.path, id) == 0);
    CHECK(summed_samples(db.path, id) == 1000);  // read from the rows meanwhile
    writer.submit(CloseSessionOp{id, "completed", capture.now(), capture.counters()});
    writer.flush();
    CHECK(stored_sums(db.path, id) == 1000);
    CHECK(summed_samples(db.path, id) == 1000);
}

TEST_CASE("the writer adds the sums its senders give, and stores no records without them") {
    TempDb db;
    StorageWriter writer(db.path);
    Events events;
    writer.on_event([&](const StorageEvent& e) { events.add(e); });
    const SessionId id = writer.reserve_session_id();
    writer.submit(OpenSessionOp{id, spec_of("board")});
    // A loop's arcs and samples, with counts other than 1, as a framed board sends them.
    const auto records_of = [](std::uint32_t n) {
        std::vector<Record> r;
        for (std::uint32_t i = 0; i < n; ++i) {
            r.push_back(Record::arc(0x1000 + 4 * (i % 3), 0x2000 + 8 * (i % 5), 1 + i % 4));
            r.push_back(Record::pc_sample(0x3000 + 2 * (i % 7), 1 + i % 2));
        }
        return r;
    };
    gmon::Aggregate sent;  // what the sender summed
    for (std::uint32_t i = 0; i < 6; ++i) {
        ChunkOp op{id, i + 1, {}, records_of(100 + i), {}, {}, {}, {}};
        op.delta.emplace().add(op.records);
        sent.merge(*op.delta);
        REQUIRE(writer.submit(std::move(op)));
    }
    // A chunk without records needs no sums; one with records but without them is refused by
    // the writer (lost, counted, reported): the writer does not sum a chunk itself.
    REQUIRE(writer.submit(ChunkOp{id, 7, {0x50}, {}, {}, {}, {}, {}}));
    REQUIRE(writer.submit(ChunkOp{id, 8, {}, records_of(5), {}, {}, {}, {}}));
    writer.flush();
    SessionStore store(db.path, Database::Mode::kReadOnly);
    CHECK(store.aggregate(id) == sent);
    CHECK(stored_records(store, id) == 2 * (100 + 101 + 102 + 103 + 104 + 105));
    CHECK(writer.with_storage_losses(id, {}).records_lost_storage == 10);
    const auto lost = events.of(Kind::kOperationLost);
    REQUIRE(lost.size() == 1);
    CHECK(lost[0].message.find("did not sum") != std::string::npos);
}

TEST_CASE("a chunk's buffers come back for the next chunk once it is written, a bounded few") {
    TempDb db;
    StorageWriter writer(db.path);
    // A sender that asks for buffers: the writer keeps as many as were asked for, at most
    // ChunkBuffers::kKept (none for a sender that never asks).
    for (std::size_t i = 0; i < ChunkBuffers::kKept + 1; ++i) {
        CHECK(writer.record_buffer().capacity() == 0);  // none kept yet
        CHECK(writer.raw_buffer().capacity() == 0);
    }
    const SessionId id = writer.reserve_session_id();
    writer.submit(OpenSessionOp{id, spec_of("board")});
    const std::size_t chunks = ChunkBuffers::kKept + 2;
    for (std::size_t i = 0; i < chunks; ++i) {
        std::vector<Record> records(1000 + i, Record::pc_sample(0x1000));
        std::vector<std::uint8_t> raw(4096 + i, 0x50);
        ChunkOp op{
            id, static_cast<std::int64_t>(i + 1), std::move(raw), std::move(records), {}, {}, {},
            {}};
        op.delta.emplace().add(op.records);
        REQUIRE(writer.submit(std::move(op)));
    }
    // Too large to keep: a buffer over ChunkBuffers::kMaxBytes goes back to the allocator.
    const std::size_t large = ChunkBuffers::kMaxBytes / sizeof(Record) + 1;
    ChunkOp large_op{id, 100, {}, std::vector<Record>(large), {}, {}, {}, {}};
    large_op.delta.emplace().add(large_op.records);
    REQUIRE(writer.submit(std::move(large_op)));
    writer.flush();
    std::size_t records_kept = 0, raw_kept = 0;
    for (std::size_t i = 0; i < chunks; ++i) {
        const auto records = writer.record_buffer();
        const auto raw = writer.raw_buffer();
        CHECK(records.empty());
        CHECK(raw.empty());
        if (records.capacity() > 0) {
            ++records_kept;
            CHECK(records.capacity() >= 1000);
            CHECK(records.capacity() * sizeof(Record) <= ChunkBuffers::kMaxBytes);
        }
        if (raw.capacity() > 0) {
            ++raw_kept;
            CHECK(raw.capacity() >= 4096);
        }
    }
    CHECK(records_kept == ChunkBuffers::kKept);
    CHECK(raw_kept == ChunkBuffers::kKept);
    // And the chunks were stored whole.
    SessionStore store(db.path, Database::Mode::kReadOnly);
    std::size_t stored = 0;
    store.for_each_chunk(
        id, [&](std::int64_t, std::span<const std::uint8_t> bytes) { stored += bytes.size(); });
    CHECK(stored == chunks * 4096 + chunks * (chunks - 1) / 2);
}

TEST_CASE(
    "a source that waits keeps the queue to a quarter of the budget, never waiting out "
    "the commit interval") {
    TempDb db;
    StorageWriterOptions options;
    options.commit_interval = std::chrono::hours(1);  // only a wake-up commits here
    StorageWriter writer(db.path, options);
    const SessionId id = writer.reserve_session_id();
    writer.submit(OpenSessionOp{id, spec_of("file")});
    writer.flush();
    // Chunks as a file source hands them over: 256 KiB read, 4096 records.
    std::size_t sent = 0, waits = 0, most_queued = 0;
    std::int64_t t = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (sent < 200 && std::chrono::steady_clock::now() < deadline) {
        if (!writer.has_room()) {
            ++waits;
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
            continue;
        }
        most_queued = std::max(most_queued, writer.stats().queued_bytes);
        ChunkOp op{id,
                   ++t,
                   std::vector<std::uint8_t>(256 << 10, 0x50),
                   std::vector<Record>(4096, Record::pc_sample(0x1000)),
                   {},
                   {},
                   {},
                   {}};
        op.delta.emplace().add(op.records);
        REQUIRE(writer.submit(std::move(op)));
        ++sent;
    }
    // All of it went through (a source waiting out the hour-long interval would not), the
    // queue never held more than the waiting budget, and none was refused.
    CHECK(sent == 200);
    CHECK(most_queued + StorageWriter::kRoomFor <= options.queue_budget_bytes / 4);
    writer.flush();
    SessionStore store(db.path, Database::Mode::kReadOnly);
    CHECK(stored_records(store, id) == 200 * 4096);
    MESSAGE("200 chunks of 256 KiB; the source waited ", waits, " times; most queued ", most_queued,
            " bytes");
}

TEST_CASE("an empty queue has room for a source whatever the budget") {
    TempDb db;
    StorageWriterOptions options;
    options.queue_budget_bytes = StorageWriter::kRoomFor / 2;
    StorageWriter writer(db.path, options);
    CHECK(writer.has_room());
}

// A session's distinct arcs and PCs, wide enough that the sums block has real work to do.
gmon::Aggregate spread_records(std::uint32_t seed, std::vector<Record>& records) {
    gmon::Aggregate sums;
    for (std::uint32_t i = 0; i < 3000; ++i) {
        const std::uint32_t k = i * 2654435761u + seed;
        records.push_back(Record::arc(0x1000 + 4 * (k % 97), 0x8000 + 2 * (k % 389), 1 + k % 3));
        records.push_back(Record::pc_sample(0x8000 + 2 * (k % 1777), 1 + k % 5));
    }
    sums.add(records);
    return sums;
}

std::int64_t seal_rows(const std::filesystem::path& path, SessionId id) {
    SessionStore store(path, Database::Mode::kReadOnly);
    Statement st = store.db().prepare(
        "SELECT count(*) FROM session_sums ss JOIN sessions s ON s.id = ss.session_id WHERE "
        "ss.session_id = ? AND ss.aggregate_version = s.aggregate_version");
    st.bind(1, id);
    st.step();
    return st.column_int(0);
}

TEST_CASE("a closed session's sums are sealed in one row, read back equal, unused once stale") {
    TempDb db;
    const SessionId id = 1;
    gmon::Aggregate sent;
    {
        StorageWriter writer(db.path);
        REQUIRE(writer.reserve_session_id() == id);
        writer.submit(OpenSessionOp{id, spec_of("board")});
        for (std::uint32_t i = 0; i < 3; ++i) {
            std::vector<Record> records;
            ChunkOp op{id, i + 1, {}, {}, {}, {}, {}, {}};
            op.delta = spread_records(i, records);
            op.records = std::move(records);
            sent.merge(*op.delta);
            REQUIRE(writer.submit(std::move(op)));
        }
        writer.flush();
        CHECK(seal_rows(db.path, id) == 0);  // capturing: its sums still change
        writer.submit(CloseSessionOp{id, "completed", 10, {}});
        writer.flush();
        CHECK(seal_rows(db.path, id) == 1);
    }
    {
        SessionStore store(db.path, Database::Mode::kReadOnly);
        CHECK(store.aggregate(id) == sent);
    }
    SessionStore store(db.path);
    // The seal is what is read: rows changed behind its back (as no writer does) do not show.
    store.db().exec("UPDATE session_arcs SET count = count + 1000");
    CHECK(store.aggregate(id) == sent);
    // A change through the store counts the version on: the seal is stale, the rows answer.
    gmon::Aggregate more;
    more.add_pc(0x8000, 7);
    store.add_to_aggregate(id, more);
    CHECK(seal_rows(db.path, id) == 0);
    const auto now = store.aggregate(id);
    CHECK(now.total_samples() == sent.total_samples() + 7);
    CHECK(now.total_calls() == sent.total_calls() + 1000 * sent.distinct_arcs());
    // Sealed again, it answers as the rows do.
    CHECK(store.seal_sums(id));
    CHECK(seal_rows(db.path, id) == 1);
    CHECK(store.aggregate(id) == now);
}

TEST_CASE("sessions finished without a seal are sealed by the writer in the background") {
    TempDb db;
    std::vector<gmon::Aggregate> sums;
    SessionId capturing = 0;
    {
        SessionStore store(db.path);
        for (std::uint32_t i = 0; i < 20; ++i) {
            const SessionId id = store.create_session(spec_of("board"));
            std::vector<Record> records;
            sums.push_back(spread_records(i, records));
            store.add_to_aggregate(id, sums.back());
            if (i != 7) store.end_session(id, "completed", 100 + i);
        }
        capturing = 8;  // the 8th session (ids from 1), left capturing
        CHECK(store.unsealed_sessions(INT64_MAX, 100).size() == 19);
    }
    {
        StorageWriter writer(db.path);  // the crash's session 8 becomes 'interrupted'
        for (int waited = 0; waited < 200; ++waited) {
            SessionStore reader(db.path, Database::Mode::kReadOnly);
            if (reader.unsealed_sessions(INT64_MAX, 100).empty()) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    }
    SessionStore store(db.path, Database::Mode::kReadOnly);
    CHECK(store.unsealed_sessions(INT64_MAX, 100).empty());
    for (SessionId id = 1; id <= 20; ++id) {
        CAPTURE(id);
        CHECK(seal_rows(db.path, id) == 1);
        CHECK(store.aggregate(id) == sums[static_cast<std::size_t>(id - 1)]);
    }
    CHECK(store.session(capturing)->state == "interrupted");
}

TEST_CASE("after a crash, the records stored after a session's sums are added at the next start") {
    TempDb db;
    SessionId id = 0;
    {
        SessionStore store(db.path);
        NewSession spec = spec_of("board");
        id = store.create_session(spec);
        const std::vector<Record> records(100, Record::pc_sample(0x1000));
        gmon::Aggregate first;
        first.add(records);
        store.append_chunk(id, 0, 1, {}, records);
        store.add_to_aggregate(id, first);
        // Two more chunks committed, their sums not yet written when the daemon died.
        store.append_chunk(id, 1, 2, {}, records);
        store.defer_sums(id, 0);
        store.append_chunk(id, 2, 3, {}, records);
        store.defer_sums(id, 1);  // the first mark stays
    }
    CHECK(stored_sums(db.path, id) == 100);
    CHECK(summed_samples(db.path, id) == 300);  // aggregate(): the sums and the rows after them
    { StorageWriter writer(db.path); }
    CHECK(stored_sums(db.path, id) == 300);
    CHECK(summed_samples(db.path, id) == 300);
    { StorageWriter writer(db.path); }  // once only
    CHECK(stored_sums(db.path, id) == 300);
}

}  // namespace
}  // namespace rackprof::storage
