// Storage's plain data that code outside storage/ holds: a session's id, a console line, what
// retention dropped, the writer's totals. No SQLite and no threads, so that capture's board
// status and the rack service's types (daemon/service/rack_types.h, included by every web/
// file) need not include storage_writer.h.
#pragma once

#include <cstdint>
#include <string>

namespace rackprof::storage {

// A session's id: its row id in the database, reserved by the writer (reserve_session_id)
// before the row is written, so logs and live views name the id the API serves.
using SessionId = std::int64_t;

// A line of console text the target printed (ITM stimulus port), as received.
// An RTOS task a session's stream switched to (framed protocol v5), as the capture counted it
// live: the task list for session views. Shares with intervals, cycles and per-task profiles
// are decoded from the raw bytes when asked for (gmon/task_views.h).
struct TaskSummary {
    std::uint32_t number = 0;  // gmon/tasks.h's numbering: 2 and up, in the order first seen
    std::uint32_t handle = 0;
    std::string name;  // "" when its naming switch was lost
    std::uint64_t samples = 0;
    std::uint64_t switches = 0;
    bool deleted = false;
    friend bool operator==(const TaskSummary&, const TaskSummary&) = default;
};

struct ConsoleLine {
    std::int64_t received_ns = 0;
    std::uint16_t port = 0;
    std::string text;
    friend bool operator==(const ConsoleLine&, const ConsoleLine&) = default;
};

// What retention did (one pass, or a run's total).
struct RetentionTotals {
    std::uint64_t sessions_raw_pruned = 0;  // sessions whose raw data is now gone
    std::uint64_t sessions_deleted = 0;
    std::uint64_t rows = 0;   // raw_chunks, record_batches and record_slices rows deleted
    std::uint64_t bytes = 0;  // their blobs' bytes (as stored, compressed)
    void add(const RetentionTotals& o) {
        sessions_raw_pruned += o.sessions_raw_pruned;
        sessions_deleted += o.sessions_deleted;
        rows += o.rows;
        bytes += o.bytes;
    }
};

// The writer as /metrics shows it: what waits, what was committed, what failed, and whether
// storage is failing now.
struct WriterStats {
    std::uint64_t queued_ops = 0;
    std::uint64_t queued_bytes = 0;
    std::uint64_t committed_ops = 0;
    std::uint64_t failed_transactions = 0;
    bool failing = false;
    std::uint64_t records_lost = 0;  // to storage failures, this run
    std::uint64_t bytes_lost = 0;
    RetentionTotals retention;  // what retention dropped this run
};

}  // namespace rackprof::storage
