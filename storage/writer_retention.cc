#include "storage/storage_writer.h"
#include "storage/writer_detail.h"

#include <sys/statvfs.h>

#include <chrono>
#include <cstdio>

// The writer's retention step: a pass over old sessions (retention.h), a few rows per step so
// captures never wait on it.
namespace rackprof::storage {

using namespace detail;

RetentionTotals StorageWriter::prune_now() {
    std::unique_lock lock(mutex_);
    if (stopping_) return {};
    // A pass that began before this call may have listed its sessions too early: wait for
    // one that begins after it.
    const std::uint64_t target = retention_started_ + 1;
    ++prune_wanted_;
    wake_.notify_one();
    drained_.wait(lock, [&] { return retention_finished_ >= target || stopping_; });
    return last_pass_;
}

void StorageWriter::retention_step() {
    const auto steady = std::chrono::steady_clock::now();
    const auto finish = [this](const RetentionTotals& totals) {
        {
            std::lock_guard lock(mutex_);
            ++retention_finished_;
            last_pass_ = totals;
            retention_totals_.add(totals);
        }
        drained_.notify_all();
    };
    if (!retention_pass_) {
        bool wanted = false;
        {
            std::lock_guard lock(mutex_);
            wanted = prune_wanted_ > 0;
            const bool due = options_.retention.rules.any() && steady >= next_retention_;
            if (!due && !wanted) return;
            prune_wanted_ = 0;  // this pass answers them
            ++retention_started_;
        }
        next_retention_ = steady + options_.retention.interval;
        try {
            retention_pass_.emplace(
                store_, options_.retention.rules,
                options_.retention.clock ? options_.retention.clock() : now_ns(), open_sessions_);
        } catch (const StorageError& e) {
            report(StorageEvent::Kind::kPruneFailed,
                   std::string("retention: listing what is due failed (tried again in an "
                               "interval): ") +
                       e.what());
            return finish({});
        }
    }
    try {
        const auto whole = retention_pass_->step(options_.retention.step_budget,
                                                 options_.retention.rows_per_transaction);
        // Their raw rows are gone; the rest goes as any deleted session goes.
        for (const SessionId id : whole) apply({DeleteSessionOp{id}});
    } catch (const StorageError& e) {
        const RetentionTotals partial = retention_pass_->totals();
        retention_pass_.reset();
        report(StorageEvent::Kind::kPruneFailed,
               std::string("retention: a pass stopped (tried again in an interval): ") + e.what());
        return finish(partial);
    }
    if (!retention_pass_->done()) return;
    const RetentionTotals totals = retention_pass_->totals();
    retention_pass_.reset();
    if (totals.rows > 0 || totals.sessions_deleted > 0) {
        std::uint64_t free_bytes = 0;
        try {
            Statement pages = store_.db().prepare("PRAGMA freelist_count");
            pages.step();
            Statement size = store_.db().prepare("PRAGMA page_size");
            size.step();
            free_bytes = static_cast<std::uint64_t>(pages.column_int(0) * size.column_int(0));
        } catch (const StorageError&) {
        }
        report(StorageEvent::Kind::kPruned,
               "retention: raw data of " + std::to_string(totals.sessions_raw_pruned) +
                   " session(s) pruned (keep_raw_days = " +
                   std::to_string(options_.retention.rules.keep_raw_days) + "), " +
                   std::to_string(totals.sessions_deleted) + " session(s) deleted (" +
                   "keep_sessions_days = " +
                   std::to_string(options_.retention.rules.keep_sessions_days) +
                   "): " + std::to_string(totals.rows) + " rows, " + human_bytes(totals.bytes) +
                   " freed; " + human_bytes(free_bytes) + " of " + path_.string() +
                   " now free for new data (the file does not shrink)");
    }
    finish(totals);
}

}  // namespace rackprof::storage
