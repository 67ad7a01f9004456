// Record slices: a time window's sums from slices equal the sums of the record batches alone
// (every row decoded), for random windows, windows at slices' edges, sessions written before
// schema 10, after a rolled-back transaction, and through the storage writer.
#include <doctest/doctest.h>
#include <zstd.h>

#include <limits>
#include <map>
#include <random>

#include "storage/session_store.h"
#include "storage/storage_writer.h"
#include "storage/temp_db_test.h"

namespace rackprof::storage {
namespace {

using protocol::Record;

constexpr std::int64_t kT0 = 1'000'000'000'000;

// A payload as one zstd frame, as the store writes blocks.
std::vector<std::uint8_t> compress_for_test(const std::vector<std::uint8_t>& payload) {
    std::vector<std::uint8_t> frame(ZSTD_compressBound(payload.size()));
    const std::size_t n =
        ZSTD_compress(frame.data(), frame.size(), payload.data(), payload.size(), 1);
    REQUIRE_FALSE(ZSTD_isError(n));
    frame.resize(n);
    return frame;
}

std::vector<Record> random_records(std::mt19937_64& rng, std::size_t n) {
    std::vector<Record> out(n);
    for (auto& r : out) {
        if (rng() % 4 == 0) {
            r = Record::arc(0x1001 + 2 * static_cast<std::uint32_t>(rng() % 64),
                            0x2001 + 64 * static_cast<std::uint32_t>(rng() % 32),
                            rng() % 16 == 0 ? 1 + static_cast<std::uint32_t>(rng() % 9) : 1);
        } else if (rng() % 512 == 0) {
            // Now and then an odd PC, or one far from the text (a damaged capture's): they are
            // not in WindowSums' array.
            r = Record::pc_sample(rng() % 2 ? 0x1001 + 2 * static_cast<std::uint32_t>(rng() % 3000)
                                            : 0xF000'0000u + static_cast<std::uint32_t>(rng() % 8));
        } else {
            r = Record::pc_sample(0x1000 + 2 * static_cast<std::uint32_t>(rng() % 3000));
        }
    }
    return out;
}

// A session's chunks in transactions of 1..40 chunks of 1..3000 records, received 0..2 ms apart
// (some at the same time); its open slices written at the end. `rolled_back`: the transaction
// with that index is rolled back (and the open slices forgotten, as the writer does).
struct WrittenSession {
    std::int64_t id = 0;
    std::int64_t first_ns = 0, last_ns = 0;
};
WrittenSession write_session(SessionStore& store, std::mt19937_64& rng, std::size_t records,
                             bool pass_sums, int rolled_back = -1) {
    NewSession spec;
    spec.board = "slices";
    spec.link = "sim://slices";
    spec.started_ns = kT0;
    WrittenSession w{store.create_session(spec), kT0, kT0};
    std::int64_t seq = 0, t = kT0;
    for (int transaction = 0; records > 0; ++transaction) {
        Transaction tx(store.db());
        std::vector<std::vector<Record>> held;
        std::vector<SessionStore::ChunkToStore> chunks;
        const std::size_t count = 1 + rng() % 40;
        held.reserve(count);
        gmon::Aggregate sums;
        for (std::size_t c = 0; c < count && records > 0; ++c, ++seq) {
            auto& recs = held.emplace_back(
                random_records(rng, std::min<std::size_t>(records, 1 + rng() % 3000)));
            records -= recs.size();
            t += static_cast<std::int64_t>(rng() % 3) * 1'000'000;
            sums.add(recs);
            chunks.push_back({seq, t, {}, recs});
        }
        store.append_chunks(w.id, chunks, pass_sums ? &sums : nullptr);
        if (transaction == rolled_back) {
            store.forget_open_slices();  // ~Transaction rolls back
            continue;
        }
        tx.commit();
        w.last_ns = t;
    }
    Transaction tx(store.db());
    store.finish_slices(w.id);
    tx.commit();
    return w;
}

struct SliceRow {
    int level;
    std::int64_t min_ns, max_ns;
};
std::vector<SliceRow> slice_rows(SessionStore& store, std::int64_t session) {
    Statement st =
        store.db().prepare("SELECT level, min_ns, max_ns FROM record_slices WHERE session_id = ?");
    st.bind(1, session);
    std::vector<SliceRow> out;
    while (st.step())
        out.push_back({static_cast<int>(st.column_int(0)), st.column_int(1), st.column_int(2)});
    return out;
}

// Windows: random ones, and each slice's edges exactly, one past and one short of them, and
// from one slice's start to another's end.
std::vector<std::pair<std::int64_t, std::int64_t>> windows_of(const WrittenSession& w,
                                                              const std::vector<SliceRow>& slices,
                                                              std::mt19937_64& rng) {
    std::vector<std::pair<std::int64_t, std::int64_t>> out;
    const auto span = static_cast<std::uint64_t>(w.last_ns - w.first_ns + 10'000'000);
    for (int i = 0; i < 60; ++i) {
        const std::int64_t a = w.first_ns - 5'000'000 + static_cast<std::int64_t>(rng() % span);
        const std::int64_t b = w.first_ns - 5'000'000 + static_cast<std::int64_t>(rng() % span);
        out.emplace_back(std::min(a, b), std::max(a, b));
    }
    for (const auto& s : slices) {
        for (const std::int64_t d : {-1, 0, 1}) {
            out.emplace_back(s.min_ns + d, s.max_ns);
            out.emplace_back(s.min_ns, s.max_ns + d);
        }
        const auto& other = slices[rng() % slices.size()];
        out.emplace_back(std::min(s.min_ns, other.min_ns), std::max(s.max_ns, other.max_ns));
    }
    out.emplace_back(0, std::numeric_limits<std::int64_t>::max());
    return out;
}

// Checks every window; returns how many were answered with at least one slice.
int check_windows(SessionStore& store, const WrittenSession& w, std::mt19937_64& rng) {
    const auto slices = slice_rows(store, w.id);
    int sliced = 0;
    for (const auto& window : windows_of(w, slices, rng)) {
        const auto [from, to] = window;
        const auto from_start = from - w.first_ns, to_start = to - w.first_ns;
        CAPTURE(from_start);  // CAPTURE takes no structured bindings (clang 14)
        CAPTURE(to_start);
        const auto expected = store.aggregate_between_rows(w.id, from, to);
        const auto got = store.aggregate_between(w.id, from, to);
        CHECK(got == expected);
        CHECK(got.total_calls() == expected.total_calls());
        CHECK(got.total_samples() == expected.total_samples());
        if (!slices_inside(store.db(), w.id, from, to).empty()) ++sliced;
    }
    return sliced;
}

TEST_CASE("record slices: a window's sums equal the record batches', at slice edges too") {
    TempDb db;
    SessionStore store(db.path);
    std::mt19937_64 rng(7);
    for (const bool pass_sums : {true, false}) {
        CAPTURE(pass_sums);
        const auto w = write_session(store, rng, 1'200'000, pass_sums);
        const auto slices = slice_rows(store, w.id);
        int levels[kSliceLevels + 1] = {};
        for (const auto& s : slices) ++levels[s.level];
        CHECK(levels[1] >= 10);  // 1.2 M records in slices of >= 64 Ki records (and the last)
        CHECK(levels[2] >= 3);   // of 4 level-1 slices each
        CHECK(check_windows(store, w, rng) > 40);
    }
}

// WindowSums against an Aggregate fed the same counts: PCs in its array, in its table (odd,
// outside the array, stray), in both (added to the table before the array covered them), with
// zero counts, and 64-bit arcs; in every order of adding; blocks as vectors and as stored
// (decoded straight into the array, runs of PCs growing it up the text). One WindowSums adds
// up every round, as a reader's does window after window: what take() leaves for the next
// round (the array, zeroed, wherever the last round put it) never shows in its answer.
TEST_CASE("record slices: WindowSums adds up as an Aggregate does") {
    std::mt19937_64 rng(12);
    WindowSums sums;
    for (int round = 0; round < 300; ++round) {
        CAPTURE(round);
        gmon::Aggregate expected;
        // Text at a new place now and then: the kept array is placed anew.
        const std::uint64_t base = (round % 50 < 25 ? 0x1000 : 0x800'0000) + 2 * (rng() % 4096);
        for (int step = 0; step < 6; ++step) {
            if (rng() % 2) {
                // A slice's block: sorted PCs, one of them maybe far away; now and then one of
                // thousands of PCs (several runs of the stored block's reader).
                SumsBlock block;
                std::map<std::uint64_t, std::uint64_t> pcs;
                const std::uint64_t low = base + 2 * (rng() % 2048);
                const bool big = rng() % 6 == 0;
                for (int i = 0, n = static_cast<int>(rng() % (big ? 9000 : 300)); i < n; ++i)
                    pcs[low + (rng() % 8 == 0 ? 1 : 0) + 2 * (rng() % (big ? 30000 : 1024))] +=
                        rng() % 5;
                if (rng() % 4 == 0) pcs[0xFFFF'FFFF'0000ull + rng() % 16] += 1;
                if (rng() % 8 == 0) pcs[low + 2 * WindowSums::kMaxSlots] += 3;
                for (const auto& [pc, n] : pcs) {
                    block.pcs.push_back({pc, n});
                    expected.add_pc(pc, n);
                }
                const std::uint64_t wide = rng() % 3 == 0 ? std::uint64_t{1} << 40 : 0;
                for (int i = 0, n = static_cast<int>(rng() % 20); i < n; ++i) {
                    block.arcs.push_back({wide + 0x100 + 2 * (rng() % 8), 0x200, rng() % 3});
                    expected.add_arc(block.arcs.back().from_pc, 0x200, block.arcs.back().count);
                }
                if (rng() % 2) {
                    sums.add(block);
                } else {
                    gmon::Aggregate stored;
                    for (const auto& a : block.arcs) stored.add_arc(a.from_pc, a.self_pc, a.count);
                    for (const auto& p : block.pcs) stored.add_pc(p.pc, p.count);
                    sums.add_block(encode_sums_block(stored));
                }
            } else {
                // Records at a window's edge: anywhere, in no order.
                std::vector<Record> records;
                for (int i = 0, n = static_cast<int>(rng() % 200); i < n; ++i) {
                    records.push_back(
                        rng() % 5 == 0
                            ? Record::arc(0x100 + 2 * static_cast<std::uint32_t>(rng() % 8), 0x200)
                            : Record::pc_sample(static_cast<std::uint32_t>(
                                  base - 64 + rng() % 6000 + (rng() % 50 == 0 ? 0x1000'0000 : 0))));
                }
                expected.add(records);
                sums.add(records);
            }
        }
        const auto got = sums.take();
        CHECK(got == expected);
        CHECK(got.total_calls() == expected.total_calls());
        CHECK(got.total_samples() == expected.total_samples());
        CHECK(got.distinct_pcs() == expected.distinct_pcs());
        CHECK(sums.slots() <= WindowSums::kKeptSlots);
    }
}

// A damaged sums block is a StorageError, not a crash or a wrong count: cut short anywhere, or
// with bytes after its last PC.
TEST_CASE("record slices: a damaged sums block read into WindowSums") {
    gmon::Aggregate a;
    for (std::uint64_t pc = 0x1000; pc < 0x1000 + 2 * 5000; pc += 6) a.add_pc(pc, pc % 7);
    a.add_arc(0x1001, 0x2001, 3);
    const auto good = encode_sums_block(a);
    {
        WindowSums sums;
        sums.add_block(good);
        CHECK(sums.take() == a);
    }
    std::vector<std::uint8_t> payload;
    SumsBlockReader reader(good, payload);
    for (const std::size_t cut : {std::size_t{1}, payload.size() / 2, payload.size() - 1}) {
        CAPTURE(cut);
        std::vector<std::uint8_t> damaged_payload(payload.begin(),
                                                  payload.begin() + static_cast<long>(cut));
        const auto damaged = compress_for_test(damaged_payload);
        WindowSums sums;
        CHECK_THROWS_AS(sums.add_block(damaged), StorageError);
    }
    auto longer = payload;
    longer.push_back(0);
    WindowSums sums;
    CHECK_THROWS_AS(sums.add_block(compress_for_test(longer)), StorageError);
}

// A reader connection keeps its WindowSums from window to window (SessionStore): while the
// session is still capturing, windows asked before and after more commits arrive (new rows,
// new slices closing) are exact, and so are windows of another session in between (a text
// elsewhere: the kept array is placed anew) and after a damaged slice failed one window.
TEST_CASE("record slices: a reader's kept window sums stay exact while the session captures") {
    TempDb db;
    SessionStore writer(db.path);
    SessionStore reader(db.path);
    std::mt19937_64 rng(13);
    NewSession spec;
    spec.board = "slices";
    spec.link = "sim://slices";
    spec.started_ns = kT0;
    WrittenSession w{writer.create_session(spec), kT0, kT0};
    std::int64_t seq = 0;
    // Another session whose PCs lie far from the first's.
    NewSession other_spec = spec;
    other_spec.board = "elsewhere";
    WrittenSession other{writer.create_session(other_spec), kT0, kT0};
    {
        Transaction tx(writer.db());
        std::vector<std::vector<Record>> held;
        std::vector<SessionStore::ChunkToStore> chunks;
        held.reserve(80);
        for (int c = 0; c < 80; ++c) {
            auto& recs = held.emplace_back(random_records(rng, 1000));
            for (auto& r : recs) {
                if (r.kind == protocol::RecordKind::kPcSample) r.self_pc += 0x400'0000;
            }
            other.last_ns += 1'000'000;
            chunks.push_back({c, other.last_ns, {}, recs});
        }
        writer.append_chunks(other.id, chunks);
        writer.finish_slices(other.id);
        tx.commit();
    }
    int sliced = 0;
    for (int commit = 0; commit < 12; ++commit) {
        {
            Transaction tx(writer.db());
            std::vector<std::vector<Record>> held;
            std::vector<SessionStore::ChunkToStore> chunks;
            held.reserve(30);
            for (int c = 0; c < 30; ++c, ++seq) {
                w.last_ns += 1'000'000;
                chunks.push_back(
                    {seq, w.last_ns, {}, held.emplace_back(random_records(rng, 1000))});
            }
            writer.append_chunks(w.id, chunks);  // its slices stay open between commits
            tx.commit();
        }
        // The reader asks the same windows again after the commit, and windows reaching past
        // the newest row, so what it kept from the last window meets new rows and slices.
        sliced += check_windows(reader, w, rng);
        CHECK(check_windows(reader, other, rng) > 0);
        const auto whole =
            reader.aggregate_between(w.id, 0, std::numeric_limits<std::int64_t>::max());
        CHECK(whole ==
              writer.aggregate_between_rows(w.id, 0, std::numeric_limits<std::int64_t>::max()));
        if (commit == 6) {
            // A damaged slice: its window fails with a StorageError, and the next windows
            // (after the slice is repaired) are exact: nothing of the failed one is left.
            Statement damage = writer.db().prepare(
                "UPDATE record_slices SET sums = X'00' WHERE session_id = ? AND level = 1");
            damage.bind(1, w.id);
            damage.run();
            CHECK_THROWS_AS(
                reader.aggregate_between(w.id, 0, std::numeric_limits<std::int64_t>::max()),
                StorageError);
            writer.db().exec("DELETE FROM record_slices WHERE sums = X'00'");
        }
    }
    CHECK(sliced > 0);
}

TEST_CASE("record slices: rows of a rolled-back transaction are in no slice") {
    TempDb db;
    SessionStore store(db.path);
    std::mt19937_64 rng(8);
    NewSession spec;
    spec.board = "slices";
    spec.link = "sim://slices";
    WrittenSession w{store.create_session(spec), kT0, kT0};
    std::int64_t seq = 0;
    // Committed, rolled back while its rows are in the open level-1 slice, committed (closing
    // a slice): without forgetting, that slice would carry the lost rows' sums.
    for (const auto& [chunks, commit] :
         std::vector<std::pair<int, bool>>{{10, true}, {10, false}, {70, true}}) {
        Transaction tx(store.db());
        std::vector<std::vector<Record>> held;
        std::vector<SessionStore::ChunkToStore> batch;
        held.reserve(static_cast<std::size_t>(chunks));
        for (int c = 0; c < chunks; ++c, ++seq) {
            w.last_ns += 1'000'000;
            batch.push_back({seq, w.last_ns, {}, held.emplace_back(random_records(rng, 1000))});
        }
        store.append_chunks(w.id, batch);
        if (commit) {
            tx.commit();
        } else {
            store.forget_open_slices();  // ~Transaction rolls back
        }
    }
    store.finish_slices(w.id);
    CHECK(check_windows(store, w, rng) > 0);
    Statement records = store.db().prepare(
        "SELECT (SELECT SUM(records) FROM record_slices WHERE session_id = ?1 AND level = 1), "
        "(SELECT SUM(count) FROM record_batches WHERE session_id = ?1)");
    records.bind(1, w.id);
    REQUIRE(records.step());
    CHECK(records.column_int(0) == 70'000);  // the first transaction's rows are in no slice
    CHECK(records.column_int(1) == 80'000);
}

TEST_CASE("record slices: a session written before schema 11 is answered from its rows") {
    TempDb db;
    std::mt19937_64 rng(9);
    WrittenSession old;
    {
        SessionStore store(db.path);
        old = write_session(store, rng, 300'000, true);
        // As a version 10 database had it: no record_slices table.
        store.db().exec(
            "DROP TABLE session_tasks; ALTER TABLE sessions DROP COLUMN arch; "
            "ALTER TABLE sessions DROP COLUMN "
            "samples_halted_ns; "
            "ALTER TABLE sessions DROP COLUMN "
            "stack_unwind_failures; ALTER TABLE sessions DROP COLUMN cct_unit; "
            "DROP TABLE session_sums; DROP TABLE record_slices; ALTER TABLE sessions DROP COLUMN "
            "summed_seq; ALTER TABLE "
            "sessions DROP COLUMN raw_pruned_ns; ALTER TABLE sessions DROP COLUMN "
            "raw_pruned_keep_days; PRAGMA user_version = 10");
    }
    SessionStore store(db.path);  // migrates to 10
    CHECK(schema_version(store.db()) == kSchemaVersion);
    CHECK(slice_rows(store, old.id).empty());
    CHECK(check_windows(store, old, rng) == 0);
    const auto fresh = write_session(store, rng, 300'000, true);
    CHECK(!slice_rows(store, fresh.id).empty());
    CHECK(check_windows(store, fresh, rng) > 0);
}

TEST_CASE("record slices: written by the storage writer, closed with the session") {
    TempDb db;
    WrittenSession w;
    {
        StorageWriter writer(db.path);
        w.id = writer.reserve_session_id();
        NewSession spec;
        spec.board = "slices";
        spec.link = "sim://slices";
        REQUIRE(writer.submit(OpenSessionOp{w.id, spec}));
        std::mt19937_64 rng(10);
        w.first_ns = w.last_ns = kT0;
        for (int i = 0; i < 300; ++i) {
            w.last_ns += 1'000'000;
            ChunkOp op{w.id, w.last_ns, {}, random_records(rng, 1000), {}, {}, {}, {}};
            op.delta.emplace().add(op.records);  // its sender sums a chunk
            REQUIRE(writer.submit(std::move(op)));
            if (i % 50 == 0) writer.flush();  // several commits
        }
        REQUIRE(writer.submit(CloseSessionOp{w.id, "completed", w.last_ns, {}}));
        writer.stop();
    }
    SessionStore store(db.path);
    const auto slices = slice_rows(store, w.id);
    CHECK(slices.size() >= 4);
    std::mt19937_64 rng(11);
    CHECK(check_windows(store, w, rng) > 0);
}

}  // namespace
}  // namespace rackprof::storage
