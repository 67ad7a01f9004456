// The fleet store: many benches' completed sessions in one PostgreSQL database, shaped like
// pprof's data (firmware images by build-id with their functions, sessions with labels, arcs
// and PC-histogram counts as rows), partitioned by month of the session's start.
//
// Benches push (push_session: one transaction per session, keyed by (bench, local id, start
// time), so a push repeated after an outage never doubles anything); any rackprof with the URL
// reads (sessions, sum: the merge of a selection's aggregates done by the server).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gmon/aggregate.h"
#include "gmon/function_index.h"
#include "gmon/symbolizer.h"
#include "storage/fleet/fleet_url.h"
#include "storage/fleet/pg.h"
#include "storage/session_store.h"

namespace rackprof::storage::fleet {

// The schema version this rackprof writes; migrate() brings older databases up to it.
inline constexpr int kFleetSchemaVersion = 4;

// What names a fleet's sessions (selection.h's keys, plus bench). Empty lists match all.
struct FleetFilter {
    std::vector<std::int64_t> sessions;  // the fleet's own ids
    std::vector<std::string> benches;
    std::vector<std::string> boards;  // a board's name, or "bench/board"
    std::vector<std::string> tags;    // the board's tags when its session was pushed
    std::vector<std::string> build_ids;
    std::int64_t from_ns = 0;  // 0: no bound
    std::int64_t to_ns = 0;
};

// A session as a bench pushes it.
struct PushedSession {
    std::string bench;
    storage::SessionInfo info;      // its local id, spec, target, state, counters
    std::vector<std::string> tags;  // its board's, now
    std::string build_id;           // the fleet's key (service::build_id_of); "" unknown
};

// What `FleetStore::prune` removed.
struct FleetPruned {
    std::vector<std::string> months_dropped;  // partitions dropped whole (yYYYYmMM)
    std::int64_t sessions_deleted = 0;        // in them and row by row
};

// One board's part of a selection: what a fleet profile's per-board spread reads.
struct FleetBoardSum {
    std::string board;  // "bench/board"
    std::uint64_t calls = 0;
    std::uint64_t samples = 0;  // all its PC samples
    // PC samples by the start address of the function holding them: only the functions asked.
    std::map<std::uint64_t, std::uint64_t> function_samples;
};

// When a session counts as over for fleet retention: its end, or its start when it has none.
std::int64_t fleet_session_end(const storage::SessionInfo& info);

class FleetStore {
  public:
    // Connects and brings the schema up to kFleetSchemaVersion (serialised between benches by
    // an advisory lock). Throws PgError, std::runtime_error (password file).
    explicit FleetStore(const FleetConnection& connection);

    // The (local id, start time) of every session `bench` has pushed.
    std::set<std::pair<std::int64_t, std::int64_t>> pushed(const std::string& bench);
    // One transaction: the firmware (ELF bytes and function table, once per build-id), the
    // session's row and its counts. False when it was there already (nothing written).
    bool push_session(const PushedSession& session, const gmon::Aggregate& aggregate,
                      const std::shared_ptr<const gmon::Symbolizer>& elf);

    // The sessions a filter names, in id order, as storage's SessionInfo: id is the fleet's,
    // board "bench/board", spec.elf_build_id the fleet key, spec.elf_path empty (see elf_file).
    std::vector<storage::SessionInfo> sessions(const FleetFilter& filter);
    // How many sessions a filter names, and a fingerprint that changes whenever they change:
    // their count, largest and summed ids (ids only grow; a pushed session's rows never
    // change; a prune lowers the count). One aggregate query: a reader counts a selection
    // before it loads it, and keeps sessions() under the fingerprint.
    struct SelectionState {
        std::int64_t sessions = 0;
        std::string fingerprint;
    };
    SelectionState selection_state(const FleetFilter& filter);
    // The connection is sound (a failed query on it was the server's answer, not an outage).
    bool connected() const;
    // The sessions' aggregates added, by the server (SUM … GROUP BY): from the build sums kept
    // at push time for every (build, bench, month) whose sessions are all named, from the
    // sessions' own rows for the others.
    gmon::Aggregate sum(const std::vector<std::int64_t>& session_ids);
    // Per board of the sessions, in board order: its calls, samples, and samples in the
    // functions starting at `functions`. From the board sums kept at push time for every whole
    // (build, bench, board, month) whose sessions are all named, from the sessions' own rows
    // for the others (`index` gives their PCs to functions). One snapshot.
    std::vector<FleetBoardSum> board_sums(const std::vector<std::int64_t>& session_ids,
                                          const gmon::FunctionIndex& index,
                                          const std::vector<std::uint64_t>& functions);
    // The same sum from the sessions' own rows only (what sum() did before schema 2): the
    // benchmark's baseline, and a check of the build sums.
    gmon::Aggregate sum_of_session_rows(const std::vector<std::int64_t>& session_ids);
    // The ELF stored for a build-id, written once into `dir` as BUILD_ID.elf; "" when none is.
    std::filesystem::path elf_file(const std::string& build_id, const std::filesystem::path& dir);
    // Retention: removes every session that ended before `before_ns` with its counts (a
    // month's partitions dropped whole when all of it is that old, rows deleted otherwise),
    // and records the cutoff, so pushes of such sessions are refused from now on (a bench
    // keeps its own copy). One transaction, under the partition lock. `keep_days` is recorded
    // beside it. Firmware stays (other sessions, or later ones, may name it).
    FleetPruned prune(std::int64_t before_ns, std::int64_t keep_days);
    // The cutoff of the last prune (Unix ns; 0: never pruned): older sessions are not taken.
    std::int64_t retained_from();
    // The fleet's rows: for figures and tests.
    std::int64_t count(const std::string& table);
    // Bytes on disk of the sessions, arcs, PC-count and build-sum partitions (with indexes).
    std::int64_t session_bytes();

  private:
    void migrate();
    void ensure_month(std::int64_t started_ns);
    void add_to_build_sums(const PushedSession& session, const std::string& arc_from,
                           const std::string& arc_self, const std::string& arc_counts,
                           const std::string& pcs, const std::string& pc_counts);
    void add_to_board_sums(const PushedSession& session, const gmon::Aggregate& aggregate,
                           const gmon::Symbolizer* elf);
    void store_firmware(const std::string& build_id, const gmon::Symbolizer& elf,
                        const std::string& sha256);

    PgConnection db_;
};

}  // namespace rackprof::storage::fleet
