// Retention: how long a finished session keeps its raw data and the session itself.
//
// "Raw data" is what only re-decoding, the raw and ndjson exports and time-window queries need:
// `raw_chunks` (the wire bytes), `record_batches` (the decoded records with receive times) and
// `record_slices` (their sums by time, useless without the rows at a window's edges). A session
// that ended more than keep_raw_days ago loses them; it keeps everything a whole-session answer
// is made from: its row and counters, `session_arcs` / `session_pcs` (the aggregate: profile,
// gmon.out and every non-paged export stay exactly as they were), gaps, console lines,
// exception counts and the calling-context tree. Its row says when and under which
// keep_raw_days (schema v12: raw_pruned_ns, raw_pruned_keep_days), set in the first transaction
// of the pruning, before any row goes, so a reader never takes a half-pruned session for a
// whole one: what needs raw data answers `raw_pruned_reason` instead.
// A session that ended more than keep_sessions_days ago is deleted whole (its raw rows first,
// a few at a time, then the row, as a delete over the API).
//
// Capturing sessions are never touched, nor sessions whose sums still wait on their rows
// (summed_seq set: a crash's leftovers until complete_sums). The work is done by the storage
// writer (storage_writer.h) in small transactions between its commits; SQLite puts the freed
// pages on its freelist and later writes reuse them (the file does not shrink).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "storage/session_store.h"
#include "storage/storage_types.h"

namespace rackprof::storage {

// Days after a session ended; 0: forever. The configuration allows at most 100 years
// (daemon/config's kMaxRetentionDays), far inside Unix ns arithmetic.
struct RetentionRules {
    std::int64_t keep_raw_days = 0;
    std::int64_t keep_sessions_days = 0;
    bool any() const { return keep_raw_days > 0 || keep_sessions_days > 0; }
    friend bool operator==(const RetentionRules&, const RetentionRules&) = default;
};

inline constexpr std::int64_t kNsPerDay = 86'400'000'000'000;

// "raw data pruned on 2026-10-01 by retention (keep_raw_days = 30)": what a request that needs
// a pruned session's raw data is answered.
std::string raw_pruned_reason(const RawPruned& pruned);

struct RetentionOptions {
    RetentionRules rules{};
    // How often the writer looks for sessions the rules reach (also once at start).
    std::chrono::milliseconds interval{3'600'000};
    // Unix ns now; null: the system clock. Tests set it.
    std::function<std::int64_t()> clock{};
    // Rows of one table deleted per transaction (a raw row holds up to 256 KiB of wire bytes).
    int rows_per_transaction = 16;
    // The writer's time for retention between two of its commits.
    std::chrono::milliseconds step_budget{20};
};

// One pass over the sessions the rules reach at `now_ns`, done a little at a time by `step`.
// Every transaction is its own (BEGIN IMMEDIATE on the store's connection).
class RetentionPass {
  public:
    // Lists what is due. `open`: sessions the writer has open (never touched, whatever the
    // table says).
    RetentionPass(SessionStore& store, const RetentionRules& rules, std::int64_t now_ns,
                  const std::set<std::int64_t>& open);

    // Works (at least one transaction) until `budget` is spent or nothing is left, `rows` rows of a
    // table per transaction. Returns the sessions whose raw data is gone and which are due to be
    // deleted whole: the caller deletes them as any session is deleted. Throws StorageError.
    std::vector<std::int64_t> step(std::chrono::steady_clock::duration budget, int rows);
    bool done() const { return todo_.empty(); }
    const RetentionTotals& totals() const { return totals_; }

  private:
    struct Due {
        std::int64_t session = 0;
        bool whole = false;  // deleted after its raw data
        bool marked = false;
    };
    // Deletes up to `rows` rows of one of the session's raw tables; false when none was left.
    bool delete_rows(std::int64_t session, int rows);

    SessionStore& store_;
    RetentionRules rules_;
    std::int64_t now_ns_ = 0;
    std::deque<Due> todo_;
    RetentionTotals totals_;
};

}  // namespace rackprof::storage
