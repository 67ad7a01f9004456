#include "storage/storage_writer.h"
#include "storage/writer_detail.h"

#include <sys/statvfs.h>

#include <chrono>
#include <cstdio>

// The writer's failure policy: when a commit fails (disk full, I/O error), chunks are lost and
// counted with a storage gap, everything else is held and tried again, and each episode is
// reported once when it begins and once when commits succeed again.
namespace rackprof::storage {

using namespace detail;

void StorageWriter::failed(std::span<WriteOp> ops, const StorageError& error, std::int64_t now) {
    ++failed_transactions_;
    if (!health().failing) begin_episode(error, now);
    for (WriteOp& op : ops) {
        if (const auto* chunk = std::get_if<ChunkOp>(&op)) {
            lose_chunk(*chunk, episode_reason_, now);
        } else {
            hold(std::move(op));
        }
    }
    const auto since = std::chrono::steady_clock::now() - last_report_;
    if (since >= options_.report_interval) {
        report(StorageEvent::Kind::kStillFailing,
               "storage: still failing (" + std::string(error.what()) + "); " +
                   std::to_string(episode_records_) + " records (" + human_bytes(episode_bytes_) +
                   ") lost so far; " + path_.string() + ": " + free_space(path_));
    }
}

void StorageWriter::begin_episode(const StorageError& error, std::int64_t now) {
    episode_records_ = episode_bytes_ = 0;
    episode_reason_ = sqlite3_errstr(error.sqlite_code());
    {
        std::lock_guard lock(health_mutex_);
        health_ = {true, error.what(), now};
    }
    report(StorageEvent::Kind::kFailing,
           "storage: commits fail: " + std::string(error.what()) + "; database " + path_.string() +
               ", " + free_space(path_) +
               " on its file system. Capture goes on: what cannot be committed is counted lost "
               "(records_lost_storage) with a gap in each session, and commits are retried every " +
               std::to_string(options_.commit_interval.count()) + " ms");
}

void StorageWriter::end_episode(std::int64_t now) {
    StorageHealth was;
    {
        std::lock_guard lock(health_mutex_);
        if (!health_.failing) return;
        was = std::exchange(health_, {});
    }
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.1f", static_cast<double>(now - was.since_ns) / 1e9);
    report(StorageEvent::Kind::kRecovered,
           "storage: commits succeed again after " + std::string(seconds) + " s; " +
               std::to_string(episode_records_) + " records (" + human_bytes(episode_bytes_) +
               ") were lost meanwhile (counted in records_lost_storage, a gap in each session)");
}

void StorageWriter::lose_chunk(const ChunkOp& chunk, const std::string& reason, std::int64_t now) {
    Ledger& l = ledgers_[chunk.session];
    l.records += chunk.record_count();
    l.bytes += chunk.raw_bytes();
    if (!l.gap_since_ns) {
        l.gap_since_ns = chunk.received_ns > 0 ? chunk.received_ns : now;
        l.gap_reason = reason;
        ++l.gaps;
    }
    l.gap_records += chunk.record_count();
    l.gap_bytes += chunk.raw_bytes();
    if (chunk.counters.bytes_in >= l.last_counters.bytes_in) l.last_counters = chunk.counters;
    episode_records_ += chunk.record_count();
    episode_bytes_ += chunk.raw_bytes();
    {
        std::lock_guard lock(health_mutex_);
        totals_.records += chunk.record_count();
        totals_.bytes += chunk.raw_bytes();
        totals_.sessions.insert(chunk.session);
    }
    publish_losses(chunk.session);
}

// Keeps an operation for the next transaction, coalesced so that memory stays bounded.
void StorageWriter::hold(WriteOp op) {
    for (WriteOp& held : held_) {
        if (replaces(held, op)) {
            held = std::move(op);
            return;
        }
    }
    if (const auto* gap = std::get_if<GapOp>(&op)) {
        GapOp* last = nullptr;
        std::size_t count = 0;
        for (WriteOp& held : held_) {
            if (auto* g = std::get_if<GapOp>(&held); g && g->session == gap->session) {
                last = g;
                ++count;
            }
        }
        if (last && count >= kMaxHeldGaps) {
            last->gap.ended_ns = gap->gap.ended_ns;
            last->gap.reason = "several link gaps while storage was failing";
            last->counters = gap->counters;
            return;
        }
    }
    held_.push_back(std::move(op));
}

// One operation failed on its own (not storage as a whole): it is lost, and said so, at most
// once per report interval.
void StorageWriter::lost_alone(WriteOp& op, const StorageError& error, std::int64_t now) {
    ++failed_transactions_;
    if (const auto* chunk = std::get_if<ChunkOp>(&op)) lose_chunk(*chunk, error.what(), now);
    const auto at = std::chrono::steady_clock::now();
    if (last_op_report_ != std::chrono::steady_clock::time_point{} &&
        at - last_op_report_ < options_.report_interval) {
        ++unreported_lost_operations_;
        return;
    }
    std::string message = std::string("storage: operation lost: ") + error.what();
    if (unreported_lost_operations_ > 0)
        message += " (and " + std::to_string(unreported_lost_operations_) + " more since)";
    unreported_lost_operations_ = 0;
    last_op_report_ = at;
    report(StorageEvent::Kind::kOperationLost, message);
}

void StorageWriter::report_uncommitted() {
    std::set<SessionId> sessions;
    for (const WriteOp& op : held_) {
        if (const SessionId id = session_of(op)) sessions.insert(id);
    }
    std::string names;
    for (const SessionId id : sessions) names += (names.empty() ? "" : ", ") + std::to_string(id);
    {
        std::lock_guard lock(health_mutex_);
        totals_.operations_uncommitted = held_.size();
        totals_.sessions.insert(sessions.begin(), sessions.end());
    }
    report(StorageEvent::Kind::kUncommitted,
           "storage: stopping with " + std::to_string(held_.size()) +
               " operation(s) never written (" + health().error + ")" +
               (names.empty() ? std::string()
                              : "; session(s) " + names +
                                    " stay as last written (a capturing one becomes "
                                    "'interrupted' at the next start)"));
}

void StorageWriter::report(StorageEvent::Kind kind, const std::string& message) {
    if (kind == StorageEvent::Kind::kFailing || kind == StorageEvent::Kind::kStillFailing)
        last_report_ = std::chrono::steady_clock::now();
    if (on_event_) on_event_({kind, message});
}

void StorageWriter::publish_losses(SessionId session) {
    std::lock_guard lock(health_mutex_);
    if (const auto it = ledgers_.find(session); it != ledgers_.end()) {
        losses_[session] = it->second;
    } else {
        losses_.erase(session);
    }
}

}  // namespace rackprof::storage
