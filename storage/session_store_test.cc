#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>

#include "protocol/legacy_decoder.h"
#include "protocol/legacy_format.h"
#include "protocol/record_sink.h"
#include "storage/session_store.h"
#include "storage/storage_writer.h"
#include "storage/temp_db_test.h"

namespace rackprof::storage {
namespace {

using protocol::Record;

TEST_CASE("records pack and unpack, with counts") {
    const std::vector<Record> records = {Record::arc(0x153D, 0x14E5), Record::pc_sample(0x14B4),
                                         Record::arc(0xFFFFFFFF, 0, 7),
                                         Record::pc_sample(0x08000000, 70000)};
    const auto blob = pack_records(records);
    CHECK(blob.size() == 9 + 5 + 13 + 9);
    CHECK(unpack_records(blob) == records);
    auto cut = blob;
    cut.pop_back();
    CHECK_THROWS_AS(unpack_records(cut), StorageError);
}

TEST_CASE("a session round trip: chunks, batches, aggregates, gaps, counters") {
    TempDb db;
    std::int64_t id = 0;
    {
        SessionStore store(db.path);
        NewSession spec;
        spec.board = "blinky-1";
        spec.link = "serial:///dev/ttyUSB0";
        spec.started_ns = 1000;
        id = store.create_session(spec);
        const std::vector<std::uint8_t> raw = {0x50, 0x00, 0x14, 0xB4};
        const std::vector<Record> records = {Record::pc_sample(0x14B4)};
        store.append_chunk(id, 0, 2000, raw, records);
        store.append_chunk(id, 1, 3000, raw, records);
        gmon::Aggregate delta;
        delta.add(records);
        delta.add(records);
        store.add_to_aggregate(id, delta);
        store.add_to_aggregate(id, delta);
        store.add_gap(id, {2500, 2600, "device disappeared", {}, {}});
        store.add_gap(id, {2700, 2800, "storage: database or disk is full", 12, 4096});
        store.update_counters(id, {8, 0, 0, 0, 2, 1, 0, 0});
    }
    SessionStore store(db.path, Database::Mode::kReadOnly);
    const auto info = store.session(id);
    REQUIRE(info);
    CHECK(info->state == "capturing");
    CHECK(info->spec.board == "blinky-1");
    CHECK(info->counters.pc_samples == 2);
    CHECK(store.aggregate(id).pc_samples() == std::vector<gmon::PcCount>{{0x14B4, 4}});
    std::vector<std::int64_t> times;
    store.for_each_chunk(id, [&](std::int64_t t, std::span<const std::uint8_t> raw) {
        times.push_back(t);
        CHECK(raw.size() == 4);
    });
    CHECK(times == std::vector<std::int64_t>{2000, 3000});
    CHECK(store.gaps(id) ==
          std::vector<Gap>{{2500, 2600, "device disappeared", {}, {}},
                           {2700, 2800, "storage: database or disk is full", 12, 4096}});
    CHECK_FALSE(store.session(id + 1));
}

TEST_CASE("the writer batches, commits, and marks crashed sessions interrupted on reopen") {
    TempDb db;
    {
        StorageWriter writer(db.path, {std::chrono::milliseconds(20), 1 << 20});
        NewSession spec;
        spec.board = "b";
        spec.link = "sim://blinky";
        const SessionId id = writer.reserve_session_id();
        CHECK(id == 1);  // the first in a new database
        writer.submit(OpenSessionOp{id, spec});
        for (int i = 0; i < 100; ++i) {
            ChunkOp chunk{id, i, {0x50, 0, 0, 2}, {Record::pc_sample(2)}, {}, {}, {}, {}};
            chunk.delta.emplace().add(chunk.records);
            chunk.counters.pc_samples = static_cast<std::uint64_t>(i) + 1;
            REQUIRE(writer.submit(std::move(chunk)));
        }
        writer.flush();
        // A chunk bigger than the whole budget is refused, for the caller to count.
        ChunkOp huge{id, 0, std::vector<std::uint8_t>(2 << 20), {}, {}, {}, {}, {}};
        CHECK_FALSE(writer.submit(std::move(huge)));
        writer.stop();  // no close op: as if the daemon died
    }
    StorageWriter reopened(db.path);
    CHECK(reopened.interrupted_at_start() == 1);
    CHECK(reopened.reserve_session_id() == 2);  // ids go on from the highest stored
    reopened.stop();
    SessionStore store(db.path, Database::Mode::kReadOnly);
    const auto sessions = store.sessions();
    REQUIRE(sessions.size() == 1);
    CHECK(sessions[0].state == "interrupted");
    CHECK(sessions[0].counters.pc_samples == 100);
    CHECK(store.aggregate(sessions[0].id).total_samples() == 100);
    std::uint64_t batches = 0;
    store.for_each_record_batch(
        sessions[0].id, [&](std::int64_t, std::span<const Record> r) { batches += r.size(); });
    CHECK(batches == 100);
}

TEST_CASE("a database from a newer rackprof is refused") {
    TempDb db;
    {
        Database raw(db.path);
        raw.exec("PRAGMA user_version = 99");
    }
    CHECK_THROWS_WITH_AS(SessionStore(db.path), doctest::Contains("newer"), StorageError);
}

}  // namespace
}  // namespace rackprof::storage

namespace rackprof::storage {
namespace {

TEST_CASE("a version-1 database migrates forward with its data") {
    TempDb db;
    {
        Database raw(db.path);
        // Version 1 as the first release wrote it, reduced to the tables that change.
        raw.exec(R"sql(
            CREATE TABLE sessions (id INTEGER PRIMARY KEY, board TEXT NOT NULL, link TEXT NOT NULL,
                protocol TEXT NOT NULL, format TEXT NOT NULL, addr_bytes INTEGER NOT NULL,
                elf_path TEXT NOT NULL DEFAULT '', elf_build_id TEXT NOT NULL DEFAULT '',
                elf_sha256 TEXT NOT NULL DEFAULT '', state TEXT NOT NULL, started_ns INTEGER NOT NULL,
                ended_ns INTEGER, bytes_in INTEGER NOT NULL DEFAULT 0, bytes_discarded INTEGER NOT NULL DEFAULT 0,
                resyncs INTEGER NOT NULL DEFAULT 0, arcs INTEGER NOT NULL DEFAULT 0, pc_samples INTEGER NOT NULL DEFAULT 0,
                gaps INTEGER NOT NULL DEFAULT 0, records_lost INTEGER NOT NULL DEFAULT 0, bytes_lost INTEGER NOT NULL DEFAULT 0);
            CREATE TABLE raw_chunks (session_id INTEGER NOT NULL, seq INTEGER NOT NULL, received_ns INTEGER NOT NULL,
                bytes BLOB NOT NULL, PRIMARY KEY (session_id, seq)) WITHOUT ROWID;
            CREATE TABLE record_batches (session_id INTEGER NOT NULL, seq INTEGER NOT NULL, received_ns INTEGER NOT NULL,
                count INTEGER NOT NULL, records BLOB NOT NULL, PRIMARY KEY (session_id, seq)) WITHOUT ROWID;
            CREATE TABLE session_arcs (session_id INTEGER NOT NULL, from_pc INTEGER NOT NULL, self_pc INTEGER NOT NULL,
                count INTEGER NOT NULL, PRIMARY KEY (session_id, from_pc, self_pc)) WITHOUT ROWID;
            CREATE TABLE session_pcs (session_id INTEGER NOT NULL, pc INTEGER NOT NULL, count INTEGER NOT NULL,
                PRIMARY KEY (session_id, pc)) WITHOUT ROWID;
            CREATE TABLE session_gaps (session_id INTEGER NOT NULL, started_ns INTEGER NOT NULL, ended_ns INTEGER NOT NULL,
                reason TEXT NOT NULL);
            INSERT INTO sessions (id, board, link, protocol, format, addr_bytes, state, started_ns)
                VALUES (1, 'b', 'sim://blinky', 'legacy', 'bin', 3, 'completed', 5);
            INSERT INTO raw_chunks VALUES (1, 0, 10, x'500000AA'), (1, 1, 20, x'500000BB');
            INSERT INTO session_gaps VALUES (1, 12, 18, 'unplugged');
            PRAGMA user_version = 1;
        )sql");
    }
    SessionStore store(db.path);
    Statement version = store.db().prepare("PRAGMA user_version");
    version.step();
    CHECK(version.column_int(0) == kSchemaVersion);
    version.reset();
    std::vector<std::int64_t> times;
    store.for_each_chunk(
        1, [&](std::int64_t t, std::span<const std::uint8_t>) { times.push_back(t); });
    CHECK(times == std::vector<std::int64_t>{10, 20});
    const std::vector<std::uint8_t> raw = {0x50, 0, 0, 0xCC};
    store.append_chunk(1, 2, 30, raw, std::vector<Record>{Record::pc_sample(0xCC)});
    CHECK_THROWS_AS(store.append_chunk(1, 2, 30, raw, {}),
                    StorageError);  // (session, seq) stays unique
    // Version 4: the old session has zero frame counters and no target; both can be written.
    auto info = store.session(1);
    REQUIRE(info);
    CHECK(info->spec.board == "b");
    CHECK(info->counters == SessionCounters{});
    CHECK(info->target == TargetInfo{});
    SessionCounters framed;
    framed.bytes_in = 100;
    framed.frames = 7;
    framed.frames_bad = 1;
    framed.frames_lost = 2;
    framed.target_dropped = 3;
    store.update_counters(1, framed);
    store.set_target(1, {"deadbeef", 0x400, 0x2000, "rv32imac"});
    info = store.session(1);
    CHECK(info->counters == framed);
    CHECK(info->target == TargetInfo{"deadbeef", 0x400, 0x2000, ""});
    CHECK(info->spec.arch == "rv32imac");  // the HELLO's, kept as the session's
    // Version 5: no wire options, console or exceptions on the old session; all can be written.
    CHECK(info->spec.wire_options.empty());
    CHECK(store.console(1).empty());
    CHECK(store.exceptions(1).empty());
    SessionCounters itm = framed;
    itm.overflows = 4;
    itm.sleep_samples = 9;
    store.update_counters(1, itm);
    store.append_console(1, 2, 0, {30, 0, "late line\n"});
    const std::vector<ExceptionCount> exceptions = {{15, 3, 120}};
    store.set_exceptions(1, exceptions);
    CHECK(store.session(1)->counters == itm);
    CHECK(store.console(1) == std::vector<ConsoleLine>{{30, 0, "late line\n"}});
    CHECK(store.exceptions(1) == exceptions);
    // Version 9: the old gap lost an unknown amount (null, not 0); new gaps say what they lost.
    store.add_gap(1, {40, 50, "storage: disk I/O error", 3, 96});
    CHECK(store.gaps(1) == std::vector<Gap>{{12, 18, "unplugged", {}, {}},
                                            {40, 50, "storage: disk I/O error", 3, 96}});
}

TEST_CASE("the writer stores console lines in order and the newest exception totals") {
    TempDb db;
    std::int64_t id = 0;
    {
        StorageWriter writer(db.path);
        NewSession spec;
        spec.board = "swo-1";
        spec.protocol = "itm";
        spec.wire_options = R"({"console_port":0})";
        id = writer.reserve_session_id();
        writer.submit(OpenSessionOp{id, spec});
        ChunkOp first{id,           10, {1, 2}, {}, {}, {{10, 0, "one\n"}, {10, 0, "two\n"}},
                      {{15, 1, 7}}, {}};
        writer.submit(std::move(first));
        writer.submit(
            ChunkOp{id, 20, {3}, {}, {}, {{20, 0, "three\n"}}, {}, {}});  // totals unchanged
        writer.submit(ChunkOp{id, 30, {4}, {}, {}, {}, {{11, 1, 0}, {15, 2, 14}}, {}});
        writer.submit(CloseSessionOp{id, "completed", 40, {}});
        writer.flush();
    }
    SessionStore store(db.path);
    const auto info = store.session(id);
    REQUIRE(info);
    CHECK(info->spec.wire_options == R"({"console_port":0})");
    const std::vector<ConsoleLine> all = {{10, 0, "one\n"}, {10, 0, "two\n"}, {20, 0, "three\n"}};
    CHECK(store.console(id) == all);
    CHECK(store.console(id, 2) == std::vector<ConsoleLine>(all.begin() + 1, all.end()));
    const std::vector<ExceptionCount> totals = {{11, 1, 0}, {15, 2, 14}};
    CHECK(store.exceptions(id) == totals);
    CHECK(info->exceptions == totals);
    store.delete_session(id);
    CHECK(store.console(id).empty());
    CHECK(store.exceptions(id).empty());
}

TEST_CASE("the writer stores a target's HELLO and the firmware picked for it") {
    TempDb db;
    std::int64_t id = 0;
    {
        StorageWriter writer(db.path);
        NewSession spec;
        spec.board = "framed-1";
        spec.protocol = "framed";
        id = writer.reserve_session_id();
        writer.submit(OpenSessionOp{id, spec});
        writer.submit(TargetOp{id, {"0a1b", 0x8000, 0x9000, ""}, "/fw/0a1b.elf", "0a1b", "abc"});
        SessionCounters c;
        c.frames_lost = 5;
        writer.submit(CloseSessionOp{id, "completed", 10, c});
        writer.flush();
    }
    SessionStore store(db.path, Database::Mode::kReadOnly);
    const auto info = store.session(id);
    REQUIRE(info);
    CHECK(info->target == TargetInfo{"0a1b", 0x8000, 0x9000, ""});
    CHECK(info->spec.elf_path == "/fw/0a1b.elf");
    CHECK(info->spec.elf_build_id == "0a1b");
    CHECK(info->counters.frames_lost == 5);
}

}  // namespace
}  // namespace rackprof::storage

namespace rackprof::storage {
namespace {

TEST_CASE("deleting a session takes its chunks, batches, aggregates and gaps with it") {
    TempDb db;
    SessionStore store(db.path);
    NewSession spec;
    spec.board = "b";
    spec.link = "sim://blinky";
    const auto keep = store.create_session(spec);
    const auto gone = store.create_session(spec);
    const std::vector<std::uint8_t> raw = {0x50, 0, 0, 2};
    const std::vector<Record> records = {Record::pc_sample(2)};
    gmon::Aggregate delta;
    delta.add(records);
    for (auto id : {keep, gone}) {
        store.append_chunk(id, 0, 1, raw, records);
        store.add_to_aggregate(id, delta);
        store.add_gap(id, {1, 2, "unplugged", {}, {}});
    }
    store.delete_session(gone);
    CHECK_FALSE(store.session(gone));
    CHECK(store.aggregate(gone).pc_samples().empty());
    CHECK(store.gaps(gone).empty());
    CHECK(store.chunk_page(gone, -1, 10).empty());
    CHECK(store.batch_page(gone, -1, 10).empty());
    CHECK(store.aggregate(keep).total_samples() == 1);
    CHECK(store.chunk_page(keep, -1, 10).size() == 1);
    CHECK(store.aggregate_between(keep, 0, 0).total_samples() == 0);
    CHECK(store.aggregate_between(keep, 0, 5).total_samples() == 1);
}

TEST_CASE("every counter is written and read back in its own column") {
    SessionStore store(":memory:");
    NewSession spec;
    spec.board = "b";
    const auto id = store.create_session(spec);
    SessionCounters counters;
    std::uint64_t n = 1000;
    for (const auto& counter : kSessionCounters) counters.*counter.member = ++n;
    store.update_counters(id, counters);
    CHECK(store.session(id)->counters == counters);
    REQUIRE(store.sessions().size() == 1);
    CHECK(store.sessions()[0].counters == counters);
    // The columns carry the counters' names.
    Statement columns = store.db().prepare("SELECT bytes_in, gaps, sleep_samples FROM sessions");
    REQUIRE(columns.step());
    CHECK(columns.column_int(0) == 1001);
    CHECK(columns.column_int(1) == 1006);
    CHECK(columns.column_int(2) == 1014);
}

}  // namespace
}  // namespace rackprof::storage

namespace rackprof::storage {
namespace {

// A tree of a main that called f and a SysTick handler; main never returned (incomplete).
gmon::CallingContextTree stored_tree_sample(std::uint32_t cycles) {
    gmon::CallingContextBuilder b;
    b.on_event({true, 0, 0x100, 0, 32, 0});
    b.on_event({true, 0, 0x200, 10, 32, 0});
    b.on_event({false, 0, 0x200, 10 + cycles, 32, 0});
    b.on_event({true, 0, 0x300, 20 + cycles, 32, 15});
    b.on_event({false, 0, 0x300, 25 + cycles, 32, 15});
    return b.snapshot();
}

TEST_CASE("the writer stores a session's calling-context tree: a chunk's copy, then the close's") {
    TempDb db;
    std::int64_t id = 0;
    const auto early = std::make_shared<const gmon::CallingContextTree>(stored_tree_sample(50));
    gmon::CallingContextTree sampled_tree = stored_tree_sample(90);
    SUBCASE("measured in cycles") {}
    SUBCASE("sampled stacks: the unit comes back with the tree") {
        sampled_tree.set_unit(gmon::ContextUnit::kSamples);
    }
    const auto final_tree = std::make_shared<const gmon::CallingContextTree>(sampled_tree);
    {
        StorageWriter writer(db.path);
        NewSession spec;
        spec.board = "swo-1";
        spec.protocol = "itm";
        id = writer.reserve_session_id();
        writer.submit(OpenSessionOp{id, spec});
        writer.submit(ChunkOp{id, 10, {1}, {}, {}, {}, {}, {}, early});
        writer.flush();
        SessionStore mid(db.path, Database::Mode::kReadOnly);
        CHECK(mid.calling_context(id) == *early);
        CHECK(mid.session(id)->calling_context_nodes == early->nodes().size());
        writer.submit(CloseSessionOp{id, "completed", 40, {}, final_tree});
        writer.flush();
    }
    SessionStore store(db.path);
    const auto tree = store.calling_context(id);
    CHECK(tree == *final_tree);  // == compares the unit too
    CHECK(tree.unit() == final_tree->unit());
    CHECK(tree.incomplete_nodes() == 1);  // main, never returned
    store.delete_session(id);
    CHECK(store.calling_context(id).empty());
}

TEST_CASE("chunks their sender encoded are stored as the writer would, in order with the rest") {
    // Two sessions get the same chunks: one as plain chunks, one with parts encoded by the
    // sender (ChunkOp::encoded): of every three chunks one whole, one only its records (what the
    // capture thread does while the writer is behind), one plain. Raw bytes, records, times,
    // sums and window sums must read back the same.
    TempDb db;
    std::vector<ChunkOp> plain;
    for (int i = 0; i < 12; ++i) {
        std::vector<std::uint8_t> raw(100 + static_cast<std::size_t>(i) * 37);
        for (std::size_t b = 0; b < raw.size(); ++b) raw[b] = static_cast<std::uint8_t>(b * i);
        std::vector<Record> records;
        for (std::uint32_t r = 0; r < 50 + static_cast<std::uint32_t>(i) * 11; ++r) {
            records.push_back(
                r % 3 ? Record::pc_sample(0x1000 + r * 4 + static_cast<std::uint32_t>(i))
                      : Record::arc(0x2000 + r, 0x3000 - r, r % 7 + 1));
        }
        gmon::Aggregate delta;
        delta.add(records);
        plain.push_back(ChunkOp{
            0, 1000 * (i + 1), std::move(raw), std::move(records), {}, {}, {}, std::move(delta)});
    }
    SessionId as_plain = 0, as_encoded = 0;
    {
        StorageWriter writer(db.path, {std::chrono::milliseconds(20), 1 << 20});
        as_plain = writer.reserve_session_id();
        as_encoded = writer.reserve_session_id();
        writer.submit(OpenSessionOp{as_plain, {}});
        writer.submit(OpenSessionOp{as_encoded, {}});
        for (std::size_t i = 0; i < plain.size(); ++i) {
            ChunkOp a = plain[i];
            a.session = as_plain;
            REQUIRE(writer.submit(std::move(a)));
            ChunkOp b = plain[i];
            b.session = as_encoded;
            if (i % 3 == 1) {
                b.encoded = std::make_shared<const EncodedChunk>(
                    encode_chunk(b.received_ns, b.raw, b.records));
                b.raw.clear();
                b.records.clear();
            } else if (i % 3 == 2) {
                b.encoded = std::make_shared<const EncodedChunk>(
                    encode_chunk(b.received_ns, {}, b.records));
                b.records.clear();
            }
            REQUIRE(writer.submit(std::move(b)));
            if (i % 5 == 4) writer.flush();  // some transactions hold several chunks
        }
        writer.submit(CloseSessionOp{as_plain, "completed", 20000, {}});
        writer.submit(CloseSessionOp{as_encoded, "completed", 20000, {}});
        writer.stop();
    }
    SessionStore store(db.path, Database::Mode::kReadOnly);
    const auto read = [&](SessionId id) {
        std::vector<std::pair<std::int64_t, std::vector<std::uint8_t>>> raw;
        store.for_each_chunk(id, [&](std::int64_t t, std::span<const std::uint8_t> bytes) {
            raw.emplace_back(t, std::vector<std::uint8_t>(bytes.begin(), bytes.end()));
        });
        std::vector<std::pair<std::int64_t, std::vector<Record>>> records;
        store.for_each_record_batch(id, [&](std::int64_t t, std::span<const Record> r) {
            records.emplace_back(t, std::vector<Record>(r.begin(), r.end()));
        });
        return std::pair(raw, records);
    };
    const auto [raw_plain, records_plain] = read(as_plain);
    const auto [raw_encoded, records_encoded] = read(as_encoded);
    REQUIRE(raw_plain.size() == plain.size());
    for (std::size_t i = 0; i < plain.size(); ++i) {
        CHECK(raw_plain[i].first == plain[i].received_ns);
        CHECK(raw_plain[i].second == plain[i].raw);
        CHECK(records_plain[i].second == plain[i].records);
    }
    CHECK(raw_encoded == raw_plain);
    CHECK(records_encoded == records_plain);
    gmon::Aggregate all;
    for (const auto& c : plain) all.add(c.records);
    CHECK(store.aggregate(as_plain) == all);
    CHECK(store.aggregate(as_encoded) == all);
    for (const auto& range : std::vector<std::pair<std::int64_t, std::int64_t>>{
             {0, 20000}, {2500, 9000}, {4000, 4000}}) {
        const std::int64_t from = range.first, to = range.second;  // CAPTURE takes no bindings
        CAPTURE(from);
        const auto expected = store.aggregate_between_rows(as_plain, from, to);
        CHECK(store.aggregate_between(as_plain, from, to) == expected);
        CHECK(store.aggregate_between(as_encoded, from, to) == expected);
        CHECK(store.aggregate_between_rows(as_encoded, from, to) == expected);
    }
}

TEST_CASE("a legacy stream's chunks are stored as their records and read back byte for byte") {
    // A clean thesis-format stream cut into chunks that end anywhere, with garbage in one: the
    // writer (and a sender encoding for it) stores the chunks the records rebuild as a few
    // bytes, the garbage chunk as it came; every reader gets the wire back exactly.
    std::vector<std::uint8_t> wire;
    for (std::uint32_t i = 0; i < 20000; ++i) {
        protocol::encode_legacy(i % 3 ? Record::arc(0x1000 + i % 97, 0x2000 + i % 13)
                                      : Record::pc_sample(0x1800 + i % 61),
                                3, wire);
    }
    wire.insert(wire.begin() + 70001, {0xEE, 0xEE, 0x07});
    protocol::LegacyDecoder decoder({3, protocol::LegacyEncoding::kBinary, std::nullopt});
    std::vector<ChunkOp> ops;
    for (std::size_t from = 0, i = 0; from < wire.size(); ++i) {
        const std::size_t to = std::min(wire.size(), from + 1000 + (i * 4099) % 9000);
        protocol::RecordCollector sink;
        decoder.feed(std::span(wire).subspan(from, to - from), sink);
        if (to == wire.size()) decoder.finish(sink);
        gmon::Aggregate delta;
        delta.add(sink.records);
        ChunkOp op{0,
                   1000 * static_cast<std::int64_t>(i + 1),
                   std::vector<std::uint8_t>(wire.begin() + static_cast<std::ptrdiff_t>(from),
                                             wire.begin() + static_cast<std::ptrdiff_t>(to)),
                   sink.records,
                   {},
                   {},
                   {},
                   std::move(delta)};
        op.raw_codec = RawCodec::kLegacy3;
        ops.push_back(std::move(op));
        from = to;
    }
    REQUIRE(decoder.stats().bytes_discarded > 0);
    TempDb db;
    SessionId id = 0;
    {
        StorageWriter writer(db.path, {std::chrono::milliseconds(20), 1 << 20});
        id = writer.reserve_session_id();
        writer.submit(OpenSessionOp{id, {}});
        for (std::size_t i = 0; i < ops.size(); ++i) {
            ChunkOp op = ops[i];
            op.session = id;
            if (i % 4 == 3) {  // what the capture thread does while the writer is behind
                op.encoded = std::make_shared<const EncodedChunk>(
                    encode_chunk(op.received_ns, op.raw, op.records, op.raw_codec));
                op.raw.clear();
                op.records.clear();
            }
            REQUIRE(writer.submit(std::move(op)));
            if (i % 3 == 2) writer.flush();
        }
        writer.submit(CloseSessionOp{id, "completed", 1'000'000, {}});
        writer.stop();
    }
    SessionStore store(db.path, Database::Mode::kReadOnly);
    std::vector<std::uint8_t> back;
    std::size_t chunks = 0;
    store.for_each_chunk(id, [&](std::int64_t t, std::span<const std::uint8_t> bytes) {
        REQUIRE(chunks < ops.size());
        CHECK(t == ops[chunks++].received_ns);
        back.insert(back.end(), bytes.begin(), bytes.end());
    });
    CHECK(chunks == ops.size());
    CHECK(back == wire);
    std::vector<std::uint8_t> paged;
    for (std::int64_t after = -1;;) {
        const auto page = store.chunk_page(id, after, 3);
        if (page.empty()) break;
        for (const auto& row : page) paged.insert(paged.end(), row.bytes.begin(), row.bytes.end());
        after = page.back().seq;
    }
    CHECK(paged == wire);
    // Only the garbage chunk's bytes are stored as they came (zstd still takes them down).
    Statement sizes = store.db().prepare(
        "SELECT SUM(length(bytes)), MAX(length(bytes)), COUNT(*) FROM raw_chunks WHERE "
        "session_id = ?");
    sizes.bind(1, id);
    REQUIRE(sizes.step());
    MESSAGE("raw rows: " << sizes.column_int(2) << ", " << sizes.column_int(0) << " bytes for "
                         << wire.size() << " wire bytes");
    CHECK(sizes.column_int(0) < static_cast<std::int64_t>(wire.size() / 20));
    // A damaged row is an error, never wrong bytes: the records a chunk is rebuilt from gone.
    {
        Database rw(db.path);
        rw.exec("DELETE FROM record_batches WHERE seq = (SELECT MIN(seq) FROM record_batches)");
    }
    SessionStore damaged(db.path, Database::Mode::kReadOnly);
    CHECK_THROWS_AS(damaged.for_each_chunk(id, [](std::int64_t, std::span<const std::uint8_t>) {}),
                    StorageError);
}

}  // namespace
}  // namespace rackprof::storage
