#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>

#include "storage/session_store.h"
#include "storage/storage_writer.h"

namespace rackprof::storage {
namespace {

using protocol::Record;

struct TempDb {
    std::filesystem::path path = std::filesystem::temp_directory_path() /
                                 ("rackprof-storage-test-" + std::to_string(::getpid()) + "-" +
                                  std::to_string(next++) + ".db");
    ~TempDb() {
        for (const char* suffix : {"", "-wal", "-shm"})
            std::filesystem::remove(path.string() + suffix);
    }
    static inline int next = 0;
};

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
        store.append_chunk(id, 0, 2000, raw, pack_records(records), 1);
        store.append_chunk(id, 1, 3000, raw, pack_records(records), 1);
        gmon::Aggregate delta;
        delta.add(records);
        delta.add(records);
        store.add_to_aggregate(id, delta);
        store.add_to_aggregate(id, delta);
        store.add_gap(id, {2500, 2600, "device disappeared"});
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
    CHECK(store.gaps(id).size() == 1);
    CHECK_FALSE(store.session(id + 1));
}

TEST_CASE("the writer batches, commits, and marks crashed sessions interrupted on reopen") {
    TempDb db;
    {
        StorageWriter writer(db.path, {std::chrono::milliseconds(20), 1 << 20});
        NewSession spec;
        spec.board = "b";
        spec.link = "sim://blinky";
        writer.submit(OpenSessionOp{1, spec});
        for (int i = 0; i < 100; ++i) {
            ChunkOp chunk{1, i, {0x50, 0, 0, 2}, {Record::pc_sample(2)}, {}};
            chunk.counters.pc_samples = static_cast<std::uint64_t>(i) + 1;
            REQUIRE(writer.submit(std::move(chunk)));
        }
        writer.flush();
        const std::int64_t id = writer.session_id(1);
        CHECK(id > 0);
        // A chunk bigger than the whole budget is refused, for the caller to count.
        ChunkOp huge{1, 0, std::vector<std::uint8_t>(2 << 20), {}, {}};
        CHECK_FALSE(writer.submit(std::move(huge)));
        writer.stop();  // no close op: as if the daemon died
    }
    StorageWriter reopened(db.path);
    CHECK(reopened.interrupted_at_start() == 1);
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
