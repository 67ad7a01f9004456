// The single writer: one thread owns the read-write connection and applies what the capture
// loop submits, many operations per transaction: chunks that arrive during one commit_interval
// go in one transaction (sooner on a flush, at stop, when half of the queue budget waits, or
// when anything but a chunk arrives), so each session's aggregate and counters are written once per
// interval, not once per chunk.
// The capture loop never waits on the disk: submit() only queues, and refuses (returns
// false) when the queue is over its byte budget, so the caller can count the loss.
//
// When a commit fails because storage as a whole cannot take writes (disk full, I/O error:
// StorageError::is_storage_failure), the writer keeps capture's promises as follows:
// - chunks in the failed transaction are lost, never retried: their records and bytes are
//   counted in the session's records_lost_storage / bytes_lost_storage, and the session gets
//   one gap (reason "storage: ...") from its first lost chunk to the first commit that
//   succeeds again, written with that commit;
// - every other operation (open, close, gap, HELLO, board, firmware, delete) is held and
//   retried with each later transaction, so none is lost; held operations are coalesced (the
//   newest HELLO, board or firmware change; at most kMaxHeldGaps link gaps a session, later
//   ones merged into the last), so memory stays bounded by the number of sessions and boards;
// - every commit_interval it tries again, with whatever arrived meanwhile;
// - it reports the episode once when it begins (with the database and its free space), at
//   most once per report_interval while it lasts, and once when it ends.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <thread>
#include <variant>
#include <vector>

#include "storage/aggregate_cache.h"
#include "storage/chunk_buffers.h"
#include "storage/integrity.h"
#include "storage/retention.h"
#include "storage/session_store.h"
#include "storage/storage_types.h"

namespace rackprof::storage {

struct OpenSessionOp {
    SessionId session;
    NewSession spec;
};
struct ChunkOp {
    SessionId session;
    std::int64_t received_ns;
    std::vector<std::uint8_t> raw;
    std::vector<protocol::Record> records;
    SessionCounters counters;                // the session's counters after this chunk
    std::vector<ConsoleLine> console;        // lines completed by this chunk
    std::vector<ExceptionCount> exceptions;  // the totals, when they changed; else empty
    // The chunk's records summed by its sender (gmon::Aggregate::add), whatever the writer's
    // load: required when the chunk has records (encoded or not). The writer adds it to the
    // session's aggregate and never sums records itself; a chunk with records but no delta is
    // lost alone (counted, reported).
    std::optional<gmon::Aggregate> delta;
    // The session's calling-context tree so far, when it changed (replaces the stored one).
    std::shared_ptr<const gmon::CallingContextTree> calling_context = nullptr;
    // Parts of the chunk the sender encoded already (while the writer is behind: behind()):
    // its records, its raw bytes, or both; an encoded part is empty in `raw` / `records`. Each
    // encoded part is stored as a row of its own.
    std::shared_ptr<const EncodedChunk> encoded = nullptr;
    // The wire's codec (raw_derivation.h): the writer stores the raw bytes as their records'
    // encoding where they are exactly that.
    RawCodec raw_codec = RawCodec::kVerbatim;
    std::vector<TaskSummary> tasks = {};  // the RTOS's tasks, when they changed; else empty

    std::size_t raw_bytes() const { return raw.size() + (encoded ? encoded->raw_bytes : 0); }
    std::size_t record_count() const { return records.size() + (encoded ? encoded->records : 0); }
};
struct GapOp {
    SessionId session;
    Gap gap;
    SessionCounters counters;
};
struct CloseSessionOp {
    SessionId session;
    std::string state;
    std::int64_t ended_ns;
    SessionCounters counters;
    // The final calling-context tree, if the session measured one (held and retried like the
    // close itself, so a chunk's lost snapshot is made good).
    std::shared_ptr<const gmon::CallingContextTree> calling_context = nullptr;
    std::vector<TaskSummary> tasks = {};  // the final task list, when it changed; else empty
};
struct DeleteSessionOp {
    SessionId session;  // a stored session, not capturing
};
struct SetFirmwareOp {
    SessionId session;  // a stored session
    std::string elf_path;
    std::string build_id;
    std::string sha256;
};
// A framed target's HELLO; with the firmware image picked by its build-id, if one was.
struct TargetOp {
    SessionId session;
    TargetInfo target;
    std::string elf_path;  // empty: the session's firmware stays as it is
    std::string elf_build_id;
    std::string elf_sha256;
    bool clear_elf = false;  // the session's firmware is none after all (the target refused it)
};
struct SaveBoardOp {
    std::string name;
    std::string config_json;  // empty: delete the board
};
using WriteOp = std::variant<OpenSessionOp, ChunkOp, GapOp, CloseSessionOp, DeleteSessionOp,
                             SetFirmwareOp, SaveBoardOp, TargetOp>;

struct StorageWriterOptions {
    // How long chunks gather before a commit (from the start of the last one).
    std::chrono::milliseconds commit_interval{100};
    // What may wait in the queue; the transaction being written holds at most as much again,
    // so the writer's memory stays under twice this whatever the input rate.
    std::size_t queue_budget_bytes = 32u << 20;
    // While storage keeps failing, a reminder at most this often.
    std::chrono::milliseconds report_interval{60'000};
    // A cap on the database file (PRAGMA max_page_count; 0: none). Reaching it is a storage
    // failure like a full disk; pages freed by deleting sessions are used again.
    std::uint64_t max_database_bytes = 0;
    // Sessions' aggregates in memory, kept current with every commit (not owned; may be null).
    AggregateCache* aggregates = nullptr;
    // Refuse a damaged database at start (integrity.h's check_at_start), before writing to it.
    bool check_at_start = true;
    // How often a capturing session's sums (its arcs and PCs) are written: rewriting a few
    // hundred rows per session at every commit would be much of the writer's work on a large
    // rack. Its records are committed at every commit all the same, and readers add those after
    // the sums (SessionStore::aggregate), so nothing lags; the sums are also written at its
    // close, on flush() and at stop, and after a crash at the next start
    // (SessionStore::complete_sums). 0: at every commit.
    std::chrono::milliseconds sums_interval{1000};
    // Retention (retention.h): a pass at start and every retention.interval, done a few rows per
    // transaction between commits (at most retention.step_budget each time), so capture never
    // waits on it. Rules of 0: nothing is pruned.
    RetentionOptions retention{};
};

// Storage as a whole: failing from a failed commit until one succeeds again.
struct StorageHealth {
    bool failing = false;
    std::string error;          // what the episode's first failure said
    std::int64_t since_ns = 0;  // when the episode began (Unix ns)
};

// What the writer reports, rate-limited (see the top of this file); `message` is a log line.
struct StorageEvent {
    enum class Kind {
        kFailing,             // an episode began (error)
        kStillFailing,        // a reminder while it lasts (error)
        kRecovered,           // commits succeed again (warning)
        kSessionLosses,       // a session that lost records to storage was closed (warning)
        kOperationLost,       // one operation failed on its own, not storage as a whole (error)
        kUncommitted,         // at stop: held operations that could not be written (error)
        kPruned,              // a retention pass dropped something (info)
        kPruneFailed,         // a retention pass failed; tried again at the next interval (error)
        kEarlierRunFinished,  // after a start on a full disk: the last run's sessions (warning)
        kSealed,              // earlier sessions' sums were sealed in the background (info)
        kSealFailed,  // sealing stopped; readers use the rows, tried again next start (warning)
    };
    Kind kind;
    std::string message;
};

// What storage failures cost this run, over every session.
struct StorageLossTotals {
    std::uint64_t records = 0;
    std::uint64_t bytes = 0;
    std::uint64_t operations_uncommitted = 0;  // held at stop, never written
    std::set<SessionId> sessions;              // the sessions that lost something
    bool all_committed() const { return records == 0 && bytes == 0 && operations_uncommitted == 0; }
};

class StorageWriter {
  public:
    // Opens (creating or migrating) the database, first refusing a damaged one (StorageError
    // naming the problems; a check that cannot read the file refuses nothing); sessions left
    // 'capturing' by a crash become 'interrupted' (on a full disk, at the first commit that
    // succeeds).
    StorageWriter(const std::filesystem::path& path, StorageWriterOptions options = {});
    ~StorageWriter();
    StorageWriter(const StorageWriter&) = delete;
    StorageWriter& operator=(const StorageWriter&) = delete;

    int interrupted_at_start() const { return interrupted_at_start_; }
    // The check at start (integrity.h): whole_file false when the database was too large for
    // the whole check; cannot_check when it could not read the file (then no verdict).
    const IntegrityReport& check_at_start() const { return check_at_start_; }
    // Not empty when the earlier run's sessions could not be finished at start (a full disk:
    // SQLite's words); the writer tries again at every commit. Read before the first submit.
    const std::string& earlier_run_unfinished_at_start() const {
        return earlier_run_unfinished_at_start_;
    }
    const std::filesystem::path& path() const { return path_; }

    // The id the next session's row will have; any thread. Ids count up from the database's
    // highest at start.
    SessionId reserve_session_id();
    // Queues an operation. Open, gap and close operations are always accepted (they are
    // small and carry state); a chunk is refused when the queue is over budget.
    bool submit(WriteOp op);
    // Whether a source that can wait (a file) should read on: the queue holds less than
    // waiting_budget() with room for a typical read (kRoomFor bytes with its records). When
    // not, the writer is woken to commit what is queued at once. Any thread.
    bool has_room();
    static constexpr std::size_t kRoomFor = 1u << 20;
    // A quarter of the budget: live links keep the rest for bursts that cannot wait. A short
    // queue also keeps a file's records in cache between the capture thread that writes them
    // and the writer that reads them.
    std::size_t waiting_budget() const { return options_.queue_budget_bytes / 4; }
    // Whether the writer is behind: busy storing earlier chunks while more than an eighth of
    // its budget waits. A sender with time to spare (the capture thread) should then encode its
    // chunks' records itself (ChunkOp::encoded), so that the compression is shared between the
    // two threads. Not while the writer sleeps until its next commit: the sender's time would
    // then go to work the writer had time for. Any thread.
    bool behind() const {
        return applying_.load(std::memory_order_relaxed) &&
               queued_bytes_now_.load(std::memory_order_relaxed) > options_.queue_budget_bytes / 8;
    }
    // An empty buffer for a chunk's records or raw bytes, with the room of one the writer is
    // done with if it kept one (chunk_buffers.h). Any thread.
    std::vector<protocol::Record> record_buffer();
    std::vector<std::uint8_t> raw_buffer();
    // Blocks until everything submitted so far was applied: committed (sums included) or, while
    // storage fails, counted lost (chunks) or held for a retry (the rest).
    void flush();
    // Runs a retention pass now (as at start and every retention.interval) and blocks until it
    // is done; returns what it dropped. Nothing when the rules keep everything.
    RetentionTotals prune_now();
    // Commits what is queued (held operations get one more try) and stops the thread.
    void stop();

    // Called on the writer thread; set before submitting anything.
    void on_event(std::function<void(const StorageEvent&)> callback) {
        on_event_ = std::move(callback);
    }
    // Any thread.
    StorageHealth health();
    // `counters` (the capture side's) with this session's storage losses and storage gaps.
    SessionCounters with_storage_losses(SessionId session, SessionCounters counters);
    StorageLossTotals loss_totals();
    WriterStats stats();

    // At most this many link gaps of one session are held for a retry; later ones are merged
    // into the last (one row spanning them; the gaps counter still counts each).
    static constexpr std::size_t kMaxHeldGaps = 16;

  private:
    // A session's losses to failed commits (writer thread; published to losses_).
    struct Ledger {
        std::uint64_t records = 0;
        std::uint64_t bytes = 0;
        std::uint64_t gaps = 0;                    // storage gaps, the open one included
        std::optional<std::int64_t> gap_since_ns;  // the open gap: from the first lost chunk
        std::string gap_reason;
        std::uint64_t gap_records = 0;  // lost in the open gap
        std::uint64_t gap_bytes = 0;
        SessionCounters last_counters;  // the capture side's, from the newest lost op
    };
    struct Attempt;  // one transaction's bookkeeping (storage_writer.cc)

    void run();
    // Queued bytes that start a commit before the interval ends. Half, not a quarter: a
    // 256-board rack queues ~16 MiB of records and raw bytes per 100 ms, so a quarter mark
    // would commit twice as often, and each commit costs the daemon CPU.
    // While a source waits on has_room() (a file read flat out), half of waiting_budget():
    // the writer takes the queue before the source has to wait. (Under mutex_.)
    std::size_t commit_early_bytes() const {
        return source_waits_ ? waiting_budget() / 2 : options_.queue_budget_bytes / 2;
    }
    void apply(std::vector<WriteOp> ops);
    void apply_batch(std::vector<WriteOp>& batch, std::int64_t now);
    // The applied chunks' buffers, kept for record_buffer() / raw_buffer().
    void keep_buffers(std::span<WriteOp> ops);
    void apply_in_transaction(std::span<WriteOp> ops, std::int64_t now);
    void write_sums(Attempt& attempt);
    void write_op(WriteOp& op, Attempt& attempt);
    void committed(std::span<WriteOp> ops, std::int64_t now);
    void failed(std::span<WriteOp> ops, const StorageError& error, std::int64_t now);
    void lose_chunk(const ChunkOp& chunk, const std::string& reason, std::int64_t now);
    void hold(WriteOp op);
    void lost_alone(WriteOp& op, const StorageError& error, std::int64_t now);
    void report(StorageEvent::Kind kind, const std::string& message);
    void publish_losses(SessionId session);
    void write_storage_gaps(Attempt& attempt);
    void begin_episode(const StorageError& error, std::int64_t now);
    void end_episode(std::int64_t now);
    void report_uncommitted();
    // One retention step, when a pass is due or under way (writer thread).
    void retention_step();
    // Seals a few finished sessions that have no sealed sums (SessionStore::seal_sums), until
    // none is left (writer thread). Returns whether more may be waiting.
    bool seal_step();
    // The earlier run's sessions (see the constructor); the retry is the writer thread's.
    void finish_earlier_run();
    void retry_finishing_earlier_run();

    IntegrityReport check_at_start_;  // before path_: set while path_ is initialised
    std::filesystem::path path_;
    StorageWriterOptions options_;
    SessionStore store_;
    int interrupted_at_start_ = 0;
    SessionId first_id_of_run_ = 1;
    std::string earlier_run_unfinished_;  // the writer thread's once started
    std::string earlier_run_unfinished_at_start_;
    std::atomic<SessionId> next_session_id_{1};

    std::mutex mutex_;
    std::condition_variable wake_;
    std::condition_variable drained_;
    std::deque<WriteOp> queue_;
    std::size_t queued_bytes_ = 0;
    std::atomic<bool> applying_{false};             // for behind(): a batch is being stored
    std::atomic<std::size_t> queued_bytes_now_{0};  // a copy of queued_bytes_ for behind()
    std::uint64_t submitted_ = 0;
    std::uint64_t applied_ = 0;
    bool flush_wanted_ = false;  // a flush() waits: commit now, not at the interval's end
    bool wake_now_ = false;      // something other than a chunk, or a source, waits: commit now
    bool source_waits_ = false;  // has_room() was asked since the writer last took the queue
    std::atomic<std::uint64_t> failed_transactions_{0};
    bool stopping_ = false;

    ChunkBuffers buffers_;  // applied chunks' buffers, for senders to fill again

    // Writer thread only.
    // Sessions' committed records not yet in their stored sums (sums_interval), since when.
    struct Unsummed {
        gmon::Aggregate delta;
        std::chrono::steady_clock::time_point since;
    };
    std::map<SessionId, Unsummed> unsummed_;
    bool sum_all_ = false;  // this transaction writes every session's sums (flush, stop)
    std::set<SessionId> open_sessions_;           // opened by this writer, not yet closed
    std::map<SessionId, std::int64_t> next_seq_;  // chunk order within each open session
    std::map<SessionId, Ledger> ledgers_;         // sessions that lost something to storage
    std::vector<WriteOp> held_;                   // to retry with the next transaction
    std::chrono::steady_clock::time_point last_report_{};     // of the failing episode
    std::chrono::steady_clock::time_point last_op_report_{};  // of an operation lost alone
    std::uint64_t unreported_lost_operations_ = 0;
    std::uint64_t episode_records_ = 0;  // lost in the current episode
    std::uint64_t episode_bytes_ = 0;
    std::string episode_reason_;  // SQLite's words for it, as the gaps say it

    // What other threads read (health, losses), under its own lock: never held across SQL.
    std::mutex health_mutex_;
    StorageHealth health_;
    std::map<SessionId, Ledger> losses_;  // copies of ledgers_
    StorageLossTotals totals_;

    // Retention (writer thread, but for the counts under mutex_).
    std::optional<RetentionPass> retention_pass_;
    std::chrono::steady_clock::time_point next_retention_{};  // the first pass: at once
    std::uint64_t prune_wanted_ = 0;        // prune_now() calls waiting for a pass (mutex_)
    std::uint64_t retention_started_ = 0;   // passes begun (mutex_)
    std::uint64_t retention_finished_ = 0;  // passes ended (mutex_)
    RetentionTotals last_pass_;             // (mutex_)
    RetentionTotals retention_totals_;      // this run's (mutex_)

    // Background sealing (writer thread): sessions below seal_below_ are still to look at.
    SessionId seal_below_ = INT64_MAX;
    bool sealing_done_ = false;
    std::uint64_t sealed_ = 0;
    std::chrono::steady_clock::time_point sealing_since_{};

    std::function<void(const StorageEvent&)> on_event_;
    std::thread thread_;
};

}  // namespace rackprof::storage
