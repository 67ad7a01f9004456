// Sessions in SQLite: the writes the storage writer makes, and the readers everything else
// uses. The schema and its migrations are schema.h's, the record blob's bytes record_codec.h's,
// the counters' list counters.h's; this header includes them all, so it is the one to include.
//
// What a session keeps: raw received bytes in chunks with host timestamps (lossless,
// re-decodable), the decoded records of each chunk packed into one blob, running aggregates
// (arc -> count, PC -> count) updated per transaction, gaps, and counters.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gmon/aggregate.h"
#include "gmon/calling_context.h"
#include "gmon/gmon_data.h"
#include "protocol/decoder_stats.h"
#include "protocol/record.h"
#include "storage/chunk_blocks.h"
#include "storage/counters.h"
#include "storage/record_codec.h"
#include "storage/record_slices.h"
#include "storage/schema.h"
#include "storage/sqlite.h"
#include "storage/storage_types.h"

namespace rackprof::storage {

struct NewSession {
    std::string board;
    std::string link;
    std::string protocol = "legacy";
    std::string format = "bin";
    int addr_bytes = 3;
    std::string elf_path;
    std::string elf_build_id;
    std::string elf_sha256;
    std::string arch;             // "armv7-m", "rv32imac", ...; "" when unknown
    std::int64_t started_ns = 0;  // Unix time, nanoseconds
    std::string wire_options;     // the wire's further settings (itm: JSON), the daemon's to read
    // The histograms an imported gmon.out had, to bin its samples into again exactly (their
    // ranges, bin counts and rate); unset: binned over the code range.
    std::optional<std::vector<gmon::HistogramSpec>> histograms;
};

// Histogram shapes as the sessions table keeps them ("" for none given, else a JSON list), also
// the fleet store's form. histograms_of throws StorageError for text that is not such a list.
std::string histograms_text(const std::optional<std::vector<gmon::HistogramSpec>>& shapes);
std::optional<std::vector<gmon::HistogramSpec>> histograms_of(const std::string& text);

// One exception's trace so far: how often it was entered and the target cycles spent in it.
struct ExceptionCount {
    std::uint16_t number = 0;  // ARMv7-M: 1 reset ... 15 SysTick, 16+ external interrupts
    std::uint64_t entries = 0;
    std::uint64_t cycles = 0;
    friend bool operator==(const ExceptionCount&, const ExceptionCount&) = default;
};

// What a framed target said about itself in its last HELLO (empty for the legacy protocol).
struct TargetInfo {
    std::string build_id;  // lower-case hex
    std::uint32_t text_lo = 0;
    std::uint32_t text_hi = 0;
    std::string arch;  // the HELLO's architecture ("rv32imac"); "" when it did not say
    bool has_text_range() const { return text_hi > text_lo; }
    friend bool operator==(const TargetInfo&, const TargetInfo&) = default;
};

// Retention dropped a finished session's raw data (retention.h): when, under which rule.
struct RawPruned {
    std::int64_t at_ns = 0;
    std::int64_t keep_days = 0;
    friend bool operator==(const RawPruned&, const RawPruned&) = default;
};

struct SessionInfo {
    std::int64_t id = 0;
    NewSession spec;
    TargetInfo target;
    std::string state;  // capturing | completed | interrupted
    std::int64_t ended_ns = 0;
    SessionCounters counters;
    std::vector<ExceptionCount> exceptions;   // itm sessions' exception trace
    std::vector<TaskSummary> tasks;           // framed (and itm) sessions' RTOS tasks
    std::uint64_t calling_context_nodes = 0;  // the stored calling-context tree's (0: none)
    // Set once retention began dropping its raw data (raw chunks, record batches, slices):
    // re-decoding, the raw and ndjson exports and time windows are gone; its aggregate is not.
    std::optional<RawPruned> raw_pruned;
};

// A stretch of a session with data missing, and what it lost where that is known: a failed
// commit knows its chunks' records and bytes; a link that went away knows only the time
// (unset: unknown, not zero).
struct Gap {
    std::int64_t started_ns = 0;
    std::int64_t ended_ns = 0;
    std::string reason;
    std::optional<std::uint64_t> records_lost;
    std::optional<std::uint64_t> bytes_lost;
    friend bool operator==(const Gap&, const Gap&) = default;
};

class SessionStore {
  public:
    // Opens the database, creating or migrating the schema. Throws StorageError, e.g. for a
    // database from a newer rackprof.
    explicit SessionStore(const std::filesystem::path& path,
                          Database::Mode mode = Database::Mode::kReadWrite);

    Database& db() { return db_; }

    // Writes (the storage writer's thread).
    // `id` 0: the next free row id; else this id (the storage writer reserves them).
    std::int64_t create_session(const NewSession& spec, std::int64_t id = 0);
    // One chunk as the writer hands it over: its order in the session, receive time, raw bytes
    // (empty: records flushed at a break or the end; their bytes came earlier) and records.
    struct ChunkToStore {
        std::int64_t seq = 0;
        std::int64_t received_ns = 0;
        std::span<const std::uint8_t> raw;
        std::span<const protocol::Record> records;
        // Parts of the chunk already encoded as blocks of their own (raw bytes, records or both;
        // such a part is then empty above): stored as they are, a row each.
        const EncodedChunk* encoded = nullptr;
        // How the raw bytes may be rebuilt from the records (raw_derivation.h): tried when both
        // are here; a chunk they rebuild exactly is stored as a few bytes saying so.
        RawCodec raw_codec = RawCodec::kVerbatim;
        std::size_t raw_bytes() const { return raw.size() + (encoded ? encoded->raw_bytes : 0); }
        std::size_t record_count() const {
            return records.size() + (encoded ? encoded->records : 0);
        }
    };
    // Stores chunks of one session, in order, as zstd blocks (chunk_blocks.h): consecutive
    // chunks share a row up to kBlockRawBytes raw bytes / kBlockRecords records (a part
    // encoded already has its row alone); and adds them to the session's record slices
    // (record_slices.h). `sums`: their records summed, when the caller has that anyway (else
    // summed here).
    void append_chunks(std::int64_t session, std::span<const ChunkToStore> chunks,
                       const gmon::Aggregate* sums = nullptr);
    // Writes the session's open record slices (after its last chunk).
    void finish_slices(std::int64_t session) { slices_.finish(session); }
    // After a transaction was rolled back: open slices may hold rows that are not there.
    void forget_open_slices() { slices_.forget_all(); }
    void append_chunk(std::int64_t session, std::int64_t seq, std::int64_t received_ns,
                      std::span<const std::uint8_t> raw,
                      std::span<const protocol::Record> records) {
        const ChunkToStore one{seq, received_ns, raw, records};
        append_chunks(session, std::span(&one, 1));
    }
    // Adds to the stored aggregate and counts one more aggregate_version; returns it. The sums
    // then hold every chunk stored (summed_seq NULL).
    std::int64_t add_to_aggregate(std::int64_t session, const gmon::Aggregate& delta);
    // Counts one more aggregate_version without writing the sums: the chunks after `seq` (or
    // after an earlier mark) are stored but not yet summed; aggregate() adds them from their
    // rows until add_to_aggregate writes them. Returns the version.
    std::int64_t defer_sums(std::int64_t session, std::int64_t seq);
    // At start, after a crash: adds to each session's sums the records stored after its
    // summed_seq, for the sessions with an id below `below_id` (the earlier run's). Returns how
    // many sessions it completed.
    int complete_sums(std::int64_t below_id = INT64_MAX);
    void update_counters(std::int64_t session, const SessionCounters& counters);
    void add_gap(std::int64_t session, const Gap& gap);
    void end_session(std::int64_t session, const std::string& state, std::int64_t ended_ns);
    // Attaches a firmware image to a session after the fact.
    void set_firmware(std::int64_t session, const std::string& elf_path,
                      const std::string& build_id, const std::string& sha256);
    void set_target(std::int64_t session, const TargetInfo& target);
    // The index-th console line decoded from chunk `seq`.
    void append_console(std::int64_t session, std::int64_t seq, std::int64_t index,
                        const ConsoleLine& line);
    // Replaces the session's exception counts with these totals.
    void set_exceptions(std::int64_t session, std::span<const ExceptionCount> exceptions);
    void set_tasks(std::int64_t session, std::span<const TaskSummary> tasks);
    // Replaces the session's calling-context tree with this one.
    void set_calling_context(std::int64_t session, const gmon::CallingContextTree& tree);
    // Boards created through the API: name -> configuration (JSON, the daemon's to interpret).
    void save_board(const std::string& name, const std::string& config_json, std::int64_t at_ns);
    void delete_board(const std::string& name);
    std::vector<std::pair<std::string, std::string>> stored_boards();
    // A finished session's aggregate as it stands, written as one sums block (session_sums)
    // at its aggregate_version, so readers load it whole instead of row by row. Nothing is
    // written for a session that holds records after its sums. Returns whether it was sealed.
    bool seal_sums(std::int64_t session);
    // Finished sessions without a sealed aggregate, newest first, at most `limit`, with ids
    // below `below_id`: what the writer seals in the background.
    std::vector<std::int64_t> unsealed_sessions(std::int64_t below_id, int limit);
    // Deletes a session and everything it holds.
    void delete_session(std::int64_t session);
    // After a crash: sessions still 'capturing' with an id below `below_id` (the earlier
    // run's) become 'interrupted'. Returns how many.
    int interrupt_unfinished(std::int64_t now_ns, std::int64_t below_id = INT64_MAX);

    // Reads.
    std::int64_t max_session_id();  // 0 for none
    std::vector<SessionInfo> sessions() { return sessions_after(0); }
    // Those with an id above `id`, in id order: what a reader that saw up to `id` has not seen.
    std::vector<SessionInfo> sessions_after(std::int64_t id);
    // Newest first from below `before_id` (0: from the newest), those `wanted` says yes to, at
    // most `limit`: one page of a listing, read no further than it needs.
    std::vector<SessionInfo> sessions_before(std::int64_t before_id, std::size_t limit,
                                             const std::function<bool(const SessionInfo&)>& wanted);
    std::optional<SessionInfo> session(std::int64_t id);
    // The session's sums, with the records stored after them (defer_sums), from one snapshot.
    gmon::Aggregate aggregate(std::int64_t session);
    // The aggregate with its aggregate_version, read in one transaction (a consistent pair).
    struct VersionedAggregate {
        gmon::Aggregate aggregate;
        std::int64_t version = 0;
    };
    std::optional<VersionedAggregate> versioned_aggregate(std::int64_t session);
    // The records received within [from_ns, to_ns]: the record slices wholly inside, and the
    // record batches no such slice holds (decoded, each chunk counted by its receive time).
    // Added up in a WindowSums this store keeps for the next window (its memory bounded by
    // WindowSums::kKeptSlots; dropped if a window fails part way).
    gmon::Aggregate aggregate_between(std::int64_t session, std::int64_t from_ns,
                                      std::int64_t to_ns);
    // The same from the record batches alone (every row in the window decoded): what slices
    // are checked against.
    gmon::Aggregate aggregate_between_rows(std::int64_t session, std::int64_t from_ns,
                                           std::int64_t to_ns);
    std::vector<Gap> gaps(std::int64_t session);
    // Console lines in the order received; at most `limit` of the newest when limit > 0.
    std::vector<ConsoleLine> console(std::int64_t session, int limit = 0);
    std::vector<ExceptionCount> exceptions(std::int64_t session);
    std::vector<TaskSummary> tasks(std::int64_t session);
    // Empty when none was stored. Throws StorageError for rows that are not a tree.
    gmon::CallingContextTree calling_context(std::int64_t session);
    void for_each_chunk(
        std::int64_t session,
        const std::function<void(std::int64_t received_ns, std::span<const std::uint8_t> raw)>& f);
    // Pages for streaming exports: the chunks of rows with seq > after_seq, in order, at most
    // `limit` rows. A chunk's `seq` is its row's last, what the next page's after_seq takes.
    struct ChunkRow {
        std::int64_t seq = 0;
        std::int64_t received_ns = 0;
        std::vector<std::uint8_t> bytes;
    };
    struct BatchRow {
        std::int64_t seq = 0;
        std::int64_t received_ns = 0;
        std::vector<protocol::Record> records;
    };
    std::vector<ChunkRow> chunk_page(std::int64_t session, std::int64_t after_seq, int limit);
    std::vector<BatchRow> batch_page(std::int64_t session, std::int64_t after_seq, int limit);

    void for_each_record_batch(
        std::int64_t session,
        const std::function<void(std::int64_t received_ns, std::span<const protocol::Record>)>& f);

  private:
    SessionInfo read_info(Statement& s);
    // The sums from session_arcs / session_pcs, plus the records after them.
    gmon::Aggregate aggregate_from_rows(std::int64_t session);
    // The sealed sums, when they are the session's current ones.
    std::optional<gmon::Aggregate> sealed_aggregate(std::int64_t session);
    // A statement prepared once and reused: the write path runs for every chunk.
    Statement& cached(std::optional<Statement>& slot, const char* sql);

    Database db_;
    bool has_cct_ = false;        // schema v10's session_cct is there
    bool has_slices_ = false;     // schema v11's record_slices and sessions.summed_seq are there
    bool has_retention_ = false;  // schema v12's sessions.raw_pruned_ns is there
    bool has_sums_ = false;       // schema v15's session_sums is there
    bool has_probe_counters_ = false;  // v16: probe counters, cct_unit
    bool has_arch_ = false;            // v17: sessions.arch
    bool has_tasks_ = false;           // v18: session_tasks
    SliceBuilder slices_{db_};
    std::unique_ptr<WindowSums> window_sums_;  // aggregate_between's, kept between windows
    std::optional<Statement> insert_raw_;
    std::optional<Statement> insert_records_;
    std::optional<Statement> bump_aggregate_version_;
    std::optional<Statement> defer_sums_;
    std::optional<Statement> upsert_arc_;
    std::optional<Statement> upsert_pc_;
    std::optional<Statement> update_counters_;
    std::optional<Statement> insert_console_;
};

}  // namespace rackprof::storage
