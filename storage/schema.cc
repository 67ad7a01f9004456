#include "storage/schema.h"

#include <iterator>
#include <string>

namespace rackprof::storage {
namespace {

// Forward migrations: entry i takes the schema from version i to i + 1.
const char* const kMigrations[] = {
    R"sql(
    CREATE TABLE sessions (
        id              INTEGER PRIMARY KEY,
        board           TEXT NOT NULL,
        link            TEXT NOT NULL,
        protocol        TEXT NOT NULL,
        format          TEXT NOT NULL,
        addr_bytes      INTEGER NOT NULL,
        elf_path        TEXT NOT NULL DEFAULT '',
        elf_build_id    TEXT NOT NULL DEFAULT '',
        elf_sha256      TEXT NOT NULL DEFAULT '',
        state           TEXT NOT NULL CHECK (state IN ('capturing', 'completed', 'interrupted')),
        started_ns      INTEGER NOT NULL,
        ended_ns        INTEGER,
        bytes_in        INTEGER NOT NULL DEFAULT 0,
        bytes_discarded INTEGER NOT NULL DEFAULT 0,
        resyncs         INTEGER NOT NULL DEFAULT 0,
        arcs            INTEGER NOT NULL DEFAULT 0,
        pc_samples      INTEGER NOT NULL DEFAULT 0,
        gaps            INTEGER NOT NULL DEFAULT 0,
        records_lost    INTEGER NOT NULL DEFAULT 0,
        bytes_lost      INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX sessions_by_board ON sessions (board, started_ns);
    CREATE TABLE raw_chunks (
        session_id  INTEGER NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        seq         INTEGER NOT NULL,
        received_ns INTEGER NOT NULL,
        bytes       BLOB NOT NULL,
        PRIMARY KEY (session_id, seq)
    ) WITHOUT ROWID;
    CREATE TABLE record_batches (
        session_id  INTEGER NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        seq         INTEGER NOT NULL,
        received_ns INTEGER NOT NULL,
        count       INTEGER NOT NULL,
        records     BLOB NOT NULL,
        PRIMARY KEY (session_id, seq)
    ) WITHOUT ROWID;
    CREATE TABLE session_arcs (
        session_id INTEGER NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        from_pc    INTEGER NOT NULL,
        self_pc    INTEGER NOT NULL,
        count      INTEGER NOT NULL,
        PRIMARY KEY (session_id, from_pc, self_pc)
    ) WITHOUT ROWID;
    CREATE TABLE session_pcs (
        session_id INTEGER NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        pc         INTEGER NOT NULL,
        count      INTEGER NOT NULL,
        PRIMARY KEY (session_id, pc)
    ) WITHOUT ROWID;
    CREATE TABLE session_gaps (
        session_id INTEGER NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        started_ns INTEGER NOT NULL,
        ended_ns   INTEGER NOT NULL,
        reason     TEXT NOT NULL
    );
    )sql",
    // 2: chunk and batch blobs are kilobytes; WITHOUT ROWID tables store rows that large
    // poorly (several times the data on disk), so they become ordinary tables.
    R"sql(
    CREATE TABLE raw_chunks_v2 (
        session_id  INTEGER NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        seq         INTEGER NOT NULL,
        received_ns INTEGER NOT NULL,
        bytes       BLOB NOT NULL,
        UNIQUE (session_id, seq)
    );
    INSERT INTO raw_chunks_v2 SELECT session_id, seq, received_ns, bytes FROM raw_chunks ORDER BY session_id, seq;
    DROP TABLE raw_chunks;
    ALTER TABLE raw_chunks_v2 RENAME TO raw_chunks;
    CREATE TABLE record_batches_v2 (
        session_id  INTEGER NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        seq         INTEGER NOT NULL,
        received_ns INTEGER NOT NULL,
        count       INTEGER NOT NULL,
        records     BLOB NOT NULL,
        UNIQUE (session_id, seq)
    );
    INSERT INTO record_batches_v2 SELECT session_id, seq, received_ns, count, records FROM record_batches
        ORDER BY session_id, seq;
    DROP TABLE record_batches;
    ALTER TABLE record_batches_v2 RENAME TO record_batches;
    )sql",
    // 3: boards created through the API, kept across restarts (their configuration as JSON).
    R"sql(
    CREATE TABLE boards (
        name       TEXT PRIMARY KEY,
        config     TEXT NOT NULL,
        updated_ns INTEGER NOT NULL
    );
    )sql",
    // 4: the framed protocol's frame and loss counters, and what the target said in its HELLO.
    R"sql(
    ALTER TABLE sessions ADD COLUMN frames INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE sessions ADD COLUMN frames_bad INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE sessions ADD COLUMN frames_lost INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE sessions ADD COLUMN target_dropped INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE sessions ADD COLUMN target_build_id TEXT NOT NULL DEFAULT '';
    ALTER TABLE sessions ADD COLUMN target_text_lo INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE sessions ADD COLUMN target_text_hi INTEGER NOT NULL DEFAULT 0;
    )sql",
    // 5: SWO (itm) boards: their wire settings, ITM overflows and sleep samples, console text,
    // exception trace counts.
    R"sql(
    ALTER TABLE sessions ADD COLUMN wire_options TEXT NOT NULL DEFAULT '';
    ALTER TABLE sessions ADD COLUMN overflows INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE sessions ADD COLUMN sleep_samples INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE session_console (
        session_id  INTEGER NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        seq         INTEGER NOT NULL,
        line        INTEGER NOT NULL,
        received_ns INTEGER NOT NULL,
        port        INTEGER NOT NULL,
        text        TEXT NOT NULL,
        PRIMARY KEY (session_id, seq, line)
    ) WITHOUT ROWID;
    CREATE TABLE session_exceptions (
        session_id INTEGER NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        exception  INTEGER NOT NULL,
        entries    INTEGER NOT NULL,
        cycles     INTEGER NOT NULL,
        PRIMARY KEY (session_id, exception)
    ) WITHOUT ROWID;
    )sql",
    // 6: an imported gmon.out's histograms as it had them (ranges, bin counts, rate; JSON), so
    // its profile and its gmon.out come back exactly ('': binned over the code range).
    R"sql(
    ALTER TABLE sessions ADD COLUMN histograms TEXT NOT NULL DEFAULT '';
    )sql",
    // 7: records and raw bytes lost because their commit failed (disk full, I/O error).
    R"sql(
    ALTER TABLE sessions ADD COLUMN records_lost_storage INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE sessions ADD COLUMN bytes_lost_storage INTEGER NOT NULL DEFAULT 0;
    )sql",
    // 8: a row of raw_chunks / record_batches may be a zstd block of several chunks
    // (chunk_blocks.h): `seq`..`last_seq` are its chunks, `received_ns`..`last_ns` their
    // times. Older rows stay as they are (encoding 0, one chunk). `aggregate_version` counts
    // the commits that changed a session's aggregate, so a cached copy knows what it holds.
    R"sql(
    ALTER TABLE raw_chunks ADD COLUMN encoding INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE raw_chunks ADD COLUMN last_seq INTEGER;
    ALTER TABLE raw_chunks ADD COLUMN last_ns INTEGER;
    ALTER TABLE record_batches ADD COLUMN encoding INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE record_batches ADD COLUMN last_seq INTEGER;
    ALTER TABLE record_batches ADD COLUMN last_ns INTEGER;
    ALTER TABLE sessions ADD COLUMN aggregate_version INTEGER NOT NULL DEFAULT 0;
    )sql",
    // 9: what each gap lost, where known (a failed commit's records and raw bytes); NULL:
    // unknown (a link's gap, and every gap written before this version).
    R"sql(
    ALTER TABLE session_gaps ADD COLUMN records_lost INTEGER;
    ALTER TABLE session_gaps ADD COLUMN bytes_lost INTEGER;
    )sql",
    // 10: the calling-context tree measured from function entry/exit events
    // (gmon/calling_context.h), a row per path: `node` numbers a session's nodes parents first,
    // `parent` NULL for a root (thread mode or an exception, `exception`), `function` the
    // function's address (0 for a root), cycles inclusive and exclusive, `incomplete` 1 where
    // lost events may have made the numbers wrong.
    R"sql(
    CREATE TABLE session_cct (
        session_id INTEGER NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        node       INTEGER NOT NULL,
        parent     INTEGER,
        function   INTEGER NOT NULL,
        exception  INTEGER NOT NULL,
        calls      INTEGER NOT NULL,
        inclusive  INTEGER NOT NULL,
        exclusive  INTEGER NOT NULL,
        incomplete INTEGER NOT NULL,
        PRIMARY KEY (session_id, node)
    ) WITHOUT ROWID;
    )sql",
    // 11: record slices (record_slices.h): the sums of a run of whole record_batches rows
    // (seq first_seq..last_seq, chunks received min_ns..max_ns), so a time-window profile adds
    // the slices inside the window and decodes only the rows at its edges. Level 1 closes at
    // kSliceRecords records, level k + 1 spans kSliceFanout slices of level k. Sessions written
    // before have none and are answered from their rows, as before (nothing is rebuilt here, so
    // this step is instant on any database). `summed_seq`: the storage writer writes a capturing
    // session's sums once a second, not at every commit; until then this is the last chunk
    // they hold (NULL: all), so the rows after it are added at the next start after a crash.
    R"sql(
    ALTER TABLE sessions ADD COLUMN summed_seq INTEGER;
    CREATE TABLE record_slices (
        session_id INTEGER NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        level      INTEGER NOT NULL,
        first_seq  INTEGER NOT NULL,
        last_seq   INTEGER NOT NULL,
        min_ns     INTEGER NOT NULL,
        max_ns     INTEGER NOT NULL,
        records    INTEGER NOT NULL,
        sums       BLOB NOT NULL,
        UNIQUE (session_id, level, first_seq)
    );
    )sql",
    // 12: retention (storage/retention.h): when a finished session's raw data (raw_chunks,
    // record_batches, record_slices) was dropped and under which keep_raw_days; NULL: never.
    // Set before the first row goes, so a reader never takes a half-pruned session for whole.
    R"sql(
    ALTER TABLE sessions ADD COLUMN raw_pruned_ns INTEGER;
    ALTER TABLE sessions ADD COLUMN raw_pruned_keep_days INTEGER;
    )sql",
    // 13: blocks of encoding 2 (chunk_blocks.h): each chunk's seq, and raw chunks that are
    // exactly their records' wire encoding stored as a few bytes saying so (raw_derivation.h).
    // Nothing to convert: rows of encodings 0 and 1 stay as they are. The version is what keeps
    // an older rackprof, which would not know encoding 2, away from the file.
    R"sql(
    SELECT 1;
    )sql",
    // 14: blocks of encoding 3 (chunk_blocks.h): a record block's arc values and sample values
    // as two runs. Nothing to convert; the version keeps an older rackprof from the file.
    R"sql(
    SELECT 1;
    )sql",
    // 15: a finished session's whole aggregate as one sums block (chunk_blocks.h), so reading
    // it back is one row, not a row per distinct arc and PC. Good only while `aggregate_version`
    // equals the session's (every change of session_arcs / session_pcs counts that up) and the
    // session holds no records after its sums (summed_seq NULL); readers check both. Sessions
    // finished before are sealed by the storage writer in the background (seal_step).
    R"sql(
    CREATE TABLE session_sums (
        session_id        INTEGER PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
        aggregate_version INTEGER NOT NULL,
        sums              BLOB NOT NULL
    );
    )sql",
    // 16: probe links' counters (halted time, stacks unwound short), and what the stored
    // calling-context tree counts: 0 cycles measured from entry/exit events, 1 samples of
    // stacks unwound by a probe link (gmon::ContextUnit).
    R"sql(
    ALTER TABLE sessions ADD COLUMN samples_halted_ns INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE sessions ADD COLUMN stack_unwind_failures INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE sessions ADD COLUMN cct_unit INTEGER NOT NULL DEFAULT 0;
    )sql",
    // 17: the core's architecture ("armv7-m", "rv32imac", ...): the firmware ELF's build
    // attributes when the session starts, the target's HELLO when it says. '' when neither did.
    R"sql(
    ALTER TABLE sessions ADD COLUMN arch TEXT NOT NULL DEFAULT '';
    )sql",
    // 18: the RTOS tasks a session's stream switched to, as counted live (storage_types.h's
    // TaskSummary): replaced whole when they change.
    R"sql(
    CREATE TABLE session_tasks (
        session_id INTEGER NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        task       INTEGER NOT NULL,
        handle     INTEGER NOT NULL,
        name       TEXT NOT NULL,
        samples    INTEGER NOT NULL,
        switches   INTEGER NOT NULL,
        deleted    INTEGER NOT NULL,
        PRIMARY KEY (session_id, task)
    ) WITHOUT ROWID;
    )sql",
};
static_assert(std::size(kMigrations) == kSchemaVersion);

}  // namespace

int schema_version(Database& db) {
    Statement version = db.prepare("PRAGMA user_version");
    version.step();
    return static_cast<int>(version.column_int(0));
}

void migrate_schema(Database& db) {
    const int current = schema_version(db);
    if (current > kSchemaVersion) {
        throw StorageError(db.path().string() + " has schema version " + std::to_string(current) +
                           ", newer than this rackprof understands (" +
                           std::to_string(kSchemaVersion) + ")");
    }
    // One transaction per step: a failure leaves the database at the last version reached.
    for (int v = current; v < kSchemaVersion; ++v) {
        Transaction t(db);
        db.exec(kMigrations[v]);
        db.exec(("PRAGMA user_version = " + std::to_string(v + 1)).c_str());
        t.commit();
    }
}

}  // namespace rackprof::storage
