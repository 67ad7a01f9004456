#include "storage/storage_writer.h"
#include "storage/writer_detail.h"

#include <sys/statvfs.h>

#include <chrono>
#include <cstdio>

namespace rackprof::storage {

namespace detail {

std::int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::string human_bytes(std::uint64_t bytes) {
    const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double value = static_cast<double>(bytes);
    std::size_t unit = 0;
    while (value >= 1024 && unit + 1 < std::size(units)) {
        value /= 1024;
        ++unit;
    }
    char text[32];
    std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
    return text;
}

// "1.2 MiB free of 2.0 MiB" for the file system holding the database.
std::string free_space(const std::filesystem::path& database) {
    const auto dir = database.has_parent_path() ? database.parent_path() : ".";
    struct statvfs fs {};
    if (::statvfs(dir.c_str(), &fs) != 0) return "free space unknown";
    return human_bytes(static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize) + " free of " +
           human_bytes(static_cast<std::uint64_t>(fs.f_blocks) * fs.f_frsize);
}

// The session an operation belongs to (0: none, e.g. a board).
SessionId session_of(const WriteOp& op) {
    return std::visit(
        [](const auto& o) -> SessionId {
            if constexpr (requires { o.session; }) {
                return o.session;
            } else {
                return 0;
            }
        },
        op);
}

// A held operation the new one replaces: the newest HELLO, board or firmware change wins.
bool replaces(const WriteOp& held, const WriteOp& op) {
    if (held.index() != op.index()) return false;
    if (const auto* board = std::get_if<SaveBoardOp>(&op))
        return std::get<SaveBoardOp>(held).name == board->name;
    if (std::holds_alternative<TargetOp>(op) || std::holds_alternative<SetFirmwareOp>(op))
        return session_of(held) == session_of(op);
    return false;
}

}  // namespace detail

using namespace detail;

namespace {

std::size_t op_bytes(const WriteOp& op) {
    if (const auto* chunk = std::get_if<ChunkOp>(&op)) {
        std::size_t text = 0;
        for (const auto& line : chunk->console) text += line.text.size();
        const std::size_t delta =
            chunk->delta ? (chunk->delta->distinct_arcs() + chunk->delta->distinct_pcs()) * 24 : 0;
        const std::size_t encoded =
            chunk->encoded ? chunk->encoded->raw_block.size() + chunk->encoded->record_block.size()
                           : 0;
        return chunk->raw.size() + chunk->records.size() * sizeof(protocol::Record) + encoded +
               text + delta + sizeof(ChunkOp);
    }
    return sizeof(WriteOp);
}

void limit_size(Database& db, std::uint64_t max_bytes) {
    Statement page_size = db.prepare("PRAGMA page_size");
    page_size.step();
    const auto pages = max_bytes / static_cast<std::uint64_t>(page_size.column_int(0));
    db.exec(
        ("PRAGMA max_page_count = " + std::to_string(std::max<std::uint64_t>(pages, 1))).c_str());
}

}  // namespace

// One transaction's bookkeeping, applied to the writer's state only once it commits.
struct StorageWriter::Attempt {
    struct Pending {
        gmon::Aggregate delta;
        SessionCounters counters;
        bool counters_changed = false;
        // Chunks wait here to be stored together, as blocks (they point into the ops).
        std::vector<SessionStore::ChunkToStore> chunks;
        std::int64_t aggregate_version = 0;   // after this commit; 0: unchanged
        std::optional<gmon::Aggregate> sums;  // what this commit adds to the stored sums
    };
    std::chrono::steady_clock::time_point steady_now;
    std::int64_t now = 0;
    std::map<SessionId, Pending> pending;
    std::map<SessionId, std::int64_t> next_seq;
    std::set<SessionId> opened;
    std::set<SessionId> closed;
    std::set<SessionId> deleted;
    std::set<SessionId> gaps_written;  // storage gaps
};

namespace {

// The database's path, once the check at start found no damage; throws StorageError naming the
// problems (nothing has written to the file then, not even a migration). A check that could
// not read the file (a full disk, an I/O error) is no verdict: the start goes on, and says so.
std::filesystem::path refuse_if_damaged(const std::filesystem::path& path,
                                        IntegrityReport& report) {
    std::error_code ec;
    if (std::filesystem::file_size(path, ec) == 0 || ec) return path;  // new: nothing to check
    report = check_at_start(path);
    if (!report.damaged()) return path;
    std::string found;
    for (std::size_t i = 0; i < report.problems.size() && i < 3; ++i)
        found += (i ? "; " : "") + report.problems[i];
    throw StorageError(path.string() + " is damaged (PRAGMA quick_check: " + found +
                       (report.problems.size() > 3 ? "; ..." : "") +
                       "); nothing was written to it. `rackprof check --db " + path.string() +
                       "` lists every problem; move the file aside to start with a new database "
                       "(`sqlite3 FILE .recover` saves what is still readable)");
}

}  // namespace

StorageWriter::StorageWriter(const std::filesystem::path& path, StorageWriterOptions options)
    : path_(options.check_at_start ? refuse_if_damaged(path, check_at_start_) : path),
      options_(options),
      store_(path) {
    if (options_.max_database_bytes > 0) limit_size(store_.db(), options_.max_database_bytes);
    next_session_id_ = store_.max_session_id() + 1;
    first_id_of_run_ = next_session_id_;
    try {
        finish_earlier_run();
    } catch (const StorageError& e) {
        if (!e.is_storage_failure()) throw;
        // A full disk at start: capture starts all the same (its losses counted like any
        // storage failure's), and the writer finishes the earlier run's sessions once it can.
        earlier_run_unfinished_ = earlier_run_unfinished_at_start_ = e.what();
    }
    thread_ = std::thread([this] { run(); });
}

// Sums a crash left behind their records, and sessions it left 'capturing' marked interrupted:
// only the earlier run's (ids below this run's first), as this one's may be open by then.
void StorageWriter::finish_earlier_run() {
    store_.complete_sums(first_id_of_run_);
    interrupted_at_start_ = store_.interrupt_unfinished(now_ns(), first_id_of_run_);
}

// Writer thread: another try after a start on a full disk (a no-op once done).
void StorageWriter::retry_finishing_earlier_run() {
    if (earlier_run_unfinished_.empty()) return;
    try {
        finish_earlier_run();
    } catch (const StorageError& e) {
        if (!e.is_storage_failure()) throw;
        return;  // still failing: the commits' own failures are reported
    }
    earlier_run_unfinished_.clear();
    report(StorageEvent::Kind::kEarlierRunFinished,
           "storage: the earlier run's sessions are finished now (" +
               std::to_string(interrupted_at_start_) + " left capturing marked interrupted)");
}

StorageWriter::~StorageWriter() {
    stop();
}

SessionId StorageWriter::reserve_session_id() {
    return next_session_id_++;
}

bool StorageWriter::submit(WriteOp op) {
    const std::size_t bytes = op_bytes(op);
    bool wake = false;
    {
        std::lock_guard lock(mutex_);
        if (stopping_) return false;
        const bool chunk = std::holds_alternative<ChunkOp>(op);
        if (chunk && queued_bytes_ + bytes > options_.queue_budget_bytes) return false;
        // The writer sleeps through the interval; a queue half full wakes it early (once, as it
        // crosses the mark: a wake-up per chunk would cost more than the chunk), and so does
        // anything but a chunk (rare: a new session's row is there at once, as before).
        wake_now_ = wake_now_ || !chunk;
        wake = !chunk || (queued_bytes_ < commit_early_bytes() &&
                          queued_bytes_ + bytes >= commit_early_bytes());
        queued_bytes_ += bytes;
        queued_bytes_now_.store(queued_bytes_, std::memory_order_relaxed);
        queue_.push_back(std::move(op));
        ++submitted_;
    }
    if (wake) wake_.notify_one();
    return true;
}

bool StorageWriter::has_room() {
    {
        std::lock_guard lock(mutex_);
        source_waits_ = true;
        // An empty queue always has room: a budget below kRoomFor still makes progress.
        if (queued_bytes_ == 0 || queued_bytes_ + kRoomFor <= waiting_budget()) return true;
        // Below the early-commit mark the writer would sleep out its interval while the
        // source waits.
        wake_now_ = true;
    }
    wake_.notify_one();
    return false;
}

void StorageWriter::flush() {
    std::unique_lock lock(mutex_);
    const std::uint64_t target = submitted_;
    flush_wanted_ = true;
    wake_.notify_one();
    drained_.wait(lock, [&] { return applied_ >= target || !thread_.joinable(); });
}

void StorageWriter::stop() {
    {
        std::lock_guard lock(mutex_);
        if (stopping_ && !thread_.joinable()) return;
        stopping_ = true;
    }
    wake_.notify_one();
    if (thread_.joinable()) thread_.join();
    drained_.notify_all();
}

StorageHealth StorageWriter::health() {
    std::lock_guard lock(health_mutex_);
    return health_;
}

SessionCounters StorageWriter::with_storage_losses(SessionId session, SessionCounters counters) {
    std::lock_guard lock(health_mutex_);
    if (const auto it = losses_.find(session); it != losses_.end()) {
        counters.records_lost_storage = it->second.records;
        counters.bytes_lost_storage = it->second.bytes;
        counters.gaps += it->second.gaps;
    }
    return counters;
}

StorageLossTotals StorageWriter::loss_totals() {
    std::lock_guard lock(health_mutex_);
    return totals_;
}

WriterStats StorageWriter::stats() {
    WriterStats stats;
    {
        std::lock_guard lock(mutex_);
        stats.queued_ops = queue_.size();
        stats.queued_bytes = queued_bytes_;
        stats.committed_ops = applied_;
        stats.retention = retention_totals_;
    }
    stats.failed_transactions = failed_transactions_.load();
    std::lock_guard lock(health_mutex_);
    stats.failing = health_.failing;
    stats.records_lost = totals_.records;
    stats.bytes_lost = totals_.bytes;
    return stats;
}

void StorageWriter::run() {
    auto next_commit = std::chrono::steady_clock::now() + options_.commit_interval;
    while (true) {
        std::vector<WriteOp> ops;
        bool stopping = false, commit = false;
        {
            std::unique_lock lock(mutex_);
            // While retention has work, the loop does not sleep: a step (at most step_budget)
            // between commits, which still come every commit_interval.
            const bool retaining = retention_pass_.has_value() || prune_wanted_ > 0 ||
                                   !sealing_done_ ||
                                   (options_.retention.rules.any() &&
                                    std::chrono::steady_clock::now() >= next_retention_);
            wake_.wait_until(lock, retaining ? std::chrono::steady_clock::now() : next_commit, [&] {
                return stopping_ || flush_wanted_ || wake_now_ || prune_wanted_ > 0 ||
                       queued_bytes_ >= commit_early_bytes();
            });
            const auto now = std::chrono::steady_clock::now();
            if (stopping_ || flush_wanted_ || wake_now_ || queued_bytes_ >= commit_early_bytes() ||
                now >= next_commit) {
                sum_all_ = stopping_ || flush_wanted_;
                flush_wanted_ = wake_now_ = false;
                // A commit that took longer than the interval leaves the next one due at once.
                next_commit = now + options_.commit_interval;
                // Held operations are tried again every interval, with or without new ones;
                // sums waiting are written when due.
                if (queue_.empty() && held_.empty() && unsummed_.empty()) {
                    if (stopping_) return;
                } else {
                    commit = true;
                    ops.reserve(queue_.size());
                    for (auto& op : queue_) ops.push_back(std::move(op));
                    queue_.clear();
                    queued_bytes_ = 0;
                    source_waits_ = false;  // a source still reading asks again
                    queued_bytes_now_.store(0, std::memory_order_relaxed);
                    stopping = stopping_;
                }
            }
        }
        if (commit) {
            const std::size_t count = ops.size();
            retry_finishing_earlier_run();
            apply(std::move(ops));
            bool done = false, sums_failed = false;
            {
                std::lock_guard lock(mutex_);
                applied_ += count;
                done = stopping && queue_.empty() && !held_.empty();  // its last try failed too
                // Sums whose last try failed: SessionStore::complete_sums adds them at the next
                // start.
                sums_failed = stopping && queue_.empty() && held_.empty() && !unsummed_.empty();
            }
            drained_.notify_all();
            if (done) return report_uncommitted();
            if (sums_failed) return;
        }
        if (!stopping) retention_step();
        if (!stopping && !sealing_done_) sealing_done_ = !seal_step();
    }
}

// One transaction for what was held and everything that queued up meanwhile. If storage as a
// whole fails, chunks are lost (counted) and the rest is held; if one operation is at fault,
// each is tried alone, so it cannot take the others with it.
void StorageWriter::apply(std::vector<WriteOp> ops) {
    std::vector<WriteOp> batch = std::exchange(held_, {});
    batch.reserve(batch.size() + ops.size());
    for (auto& op : ops) batch.push_back(std::move(op));
    applying_.store(true, std::memory_order_relaxed);
    apply_batch(batch, now_ns());  // storage errors are caught and counted inside
    applying_.store(false, std::memory_order_relaxed);
    keep_buffers(batch);  // chunks are written or counted lost by now, never held
}

std::vector<protocol::Record> StorageWriter::record_buffer() {
    return buffers_.records();
}

std::vector<std::uint8_t> StorageWriter::raw_buffer() {
    return buffers_.raw();
}

void StorageWriter::keep_buffers(std::span<WriteOp> ops) {
    for (WriteOp& op : ops) {
        if (auto* chunk = std::get_if<ChunkOp>(&op)) buffers_.keep(chunk->records, chunk->raw);
    }
}

void StorageWriter::apply_batch(std::vector<WriteOp>& batch, std::int64_t now) {
    try {
        apply_in_transaction(batch, now);
        return;
    } catch (const StorageError& e) {
        store_.forget_open_slices();  // they may hold rows that were rolled back
        if (e.is_storage_failure()) return failed(batch, e, now);
    }
    for (WriteOp& op : batch) {
        try {
            apply_in_transaction(std::span<WriteOp>(&op, 1), now);
        } catch (const StorageError& e) {
            store_.forget_open_slices();
            if (e.is_storage_failure()) {
                failed(std::span<WriteOp>(&op, 1), e, now);
            } else {
                lost_alone(op, e, now);
            }
        }
    }
}

void StorageWriter::apply_in_transaction(std::span<WriteOp> ops, std::int64_t now) {
    Attempt attempt;
    attempt.now = now;
    attempt.steady_now = std::chrono::steady_clock::now();
    attempt.next_seq = next_seq_;
    Transaction t(store_.db());
    for (WriteOp& op : ops) write_op(op, attempt);
    write_storage_gaps(attempt);
    for (auto& [id, p] : attempt.pending) store_.append_chunks(id, p.chunks, &p.delta);
    write_sums(attempt);
    for (auto& [id, p] : attempt.pending) {
        if (p.counters_changed) {
            SessionCounters counters = p.counters;
            if (const auto it = ledgers_.find(id); it != ledgers_.end()) {
                counters.records_lost_storage = it->second.records;
                counters.bytes_lost_storage = it->second.bytes;
                counters.gaps += it->second.gaps;
            }
            store_.update_counters(id, counters);
        }
    }
    for (const SessionId id : attempt.closed) {
        store_.finish_slices(id);
        seal_at_close(store_, id);
    }
    t.commit();
    // Committed: from here on nothing throws.
    for (auto& [id, p] : attempt.pending) {
        if (p.sums) {
            unsummed_.erase(id);
            if (options_.aggregates && p.aggregate_version > 0)
                options_.aggregates->committed(id, p.aggregate_version, p.delta);
        } else if (!p.delta.empty()) {
            if (options_.aggregates && p.aggregate_version > 0)
                options_.aggregates->committed(id, p.aggregate_version, p.delta);
            auto [waiting, first] = unsummed_.try_emplace(id);
            if (first) waiting->second.since = attempt.steady_now;
            waiting->second.delta.merge(p.delta);
        }
    }
    for (const SessionId id : attempt.deleted) {
        unsummed_.erase(id);
        if (options_.aggregates) options_.aggregates->erase(id);
    }
    next_seq_ = std::move(attempt.next_seq);
    open_sessions_.insert(attempt.opened.begin(), attempt.opened.end());
    for (const SessionId id : attempt.gaps_written) {
        Ledger& l = ledgers_[id];
        l.gap_since_ns.reset();
        l.gap_records = l.gap_bytes = 0;
    }
    for (const SessionId id : attempt.closed) {
        open_sessions_.erase(id);
        next_seq_.erase(id);
        if (const auto it = ledgers_.find(id); it != ledgers_.end()) {
            const Ledger& l = it->second;
            report(StorageEvent::Kind::kSessionLosses,
                   "storage: session " + std::to_string(id) + " closed with " +
                       std::to_string(l.records) + " records (" + human_bytes(l.bytes) +
                       ") lost to failed commits, in " + std::to_string(l.gaps) + " gap(s)");
            ledgers_.erase(it);
        }
        publish_losses(id);
    }
    for (const SessionId id : attempt.deleted) {
        open_sessions_.erase(id);
        ledgers_.erase(id);
        publish_losses(id);
    }
    for (const SessionId id : attempt.gaps_written) publish_losses(id);
    end_episode(now);
}

// Each session's sums when due: what waited since its last sums and this commit's records
// together, once per sums_interval (at once for a closing session, on flush and at stop); else
// only its aggregate_version counts on (readers add the rows after the sums). The cache takes
// every commit's delta either way. The writer's memory of what waits changes only once the
// transaction commits.
void StorageWriter::write_sums(Attempt& a) {
    const auto due = [&](SessionId id) {
        if (sum_all_ || options_.sums_interval.count() == 0 || a.closed.count(id)) return true;
        const auto waiting = unsummed_.find(id);
        return waiting != unsummed_.end() &&
               a.steady_now - waiting->second.since >= options_.sums_interval;
    };
    for (const auto& [id, waiting] : unsummed_) {
        if (!a.deleted.count(id) && !a.pending.count(id) && due(id)) a.pending[id];
    }
    for (auto& [id, p] : a.pending) {
        const auto waiting = unsummed_.find(id);
        if (p.delta.empty() && waiting == unsummed_.end()) continue;
        if (!due(id)) {
            // A delta comes with chunks: the first is the first not summed (or a later one).
            if (!p.delta.empty())
                p.aggregate_version = store_.defer_sums(id, p.chunks.front().seq - 1);
            continue;
        }
        p.sums = waiting == unsummed_.end() ? gmon::Aggregate{} : waiting->second.delta;
        p.sums->merge(p.delta);
        p.aggregate_version = store_.add_to_aggregate(id, *p.sums);
    }
}

void StorageWriter::write_op(WriteOp& op, Attempt& a) {
    if (auto* open = std::get_if<OpenSessionOp>(&op)) {
        store_.create_session(open->spec, open->session);
        a.next_seq[open->session] = 0;
        a.opened.insert(open->session);
        return;
    }
    if (auto* del = std::get_if<DeleteSessionOp>(&op)) {
        a.pending.erase(del->session);  // nothing of it is written after it is gone
        store_.delete_session(del->session);
        a.deleted.insert(del->session);
        return;
    }
    if (auto* board = std::get_if<SaveBoardOp>(&op)) {
        if (board->config_json.empty()) {
            store_.delete_board(board->name);
        } else {
            store_.save_board(board->name, board->config_json, a.now);
        }
        return;
    }
    if (auto* fw = std::get_if<SetFirmwareOp>(&op)) {
        store_.set_firmware(fw->session, fw->elf_path, fw->build_id, fw->sha256);
        return;
    }
    const SessionId id = session_of(op);
    if (!open_sessions_.count(id) && !a.opened.count(id))
        throw StorageError("an operation for session " + std::to_string(id) +
                           ", which is not open");
    if (auto* chunk = std::get_if<ChunkOp>(&op)) {
        // Its sender summed its records (ChunkOp::delta); the writer never sums them itself.
        if (!chunk->delta && chunk->record_count() > 0)
            throw StorageError("a chunk whose records its sender did not sum (ChunkOp::delta)");
        const std::int64_t seq = a.next_seq[id]++;  // chunk order within the session
        auto& p = a.pending[id];
        p.chunks.push_back({seq, chunk->received_ns, chunk->raw, chunk->records,
                            chunk->encoded.get(), chunk->raw_codec});
        for (std::size_t i = 0; i < chunk->console.size(); ++i) {
            store_.append_console(id, seq, static_cast<std::int64_t>(i), chunk->console[i]);
        }
        if (!chunk->exceptions.empty()) store_.set_exceptions(id, chunk->exceptions);
        if (!chunk->tasks.empty()) store_.set_tasks(id, chunk->tasks);
        if (chunk->calling_context) store_.set_calling_context(id, *chunk->calling_context);
        if (chunk->delta) p.delta.merge(*chunk->delta);
        p.counters = chunk->counters;
        p.counters_changed = true;
    } else if (auto* gap = std::get_if<GapOp>(&op)) {
        store_.add_gap(id, gap->gap);
        a.pending[id].counters = gap->counters;
        a.pending[id].counters_changed = true;
    } else if (auto* target = std::get_if<TargetOp>(&op)) {
        store_.set_target(id, target->target);
        if (!target->elf_path.empty() || target->clear_elf) {
            store_.set_firmware(id, target->elf_path, target->elf_build_id, target->elf_sha256);
        }
    } else if (auto* close = std::get_if<CloseSessionOp>(&op)) {
        a.pending[id].counters = close->counters;
        a.pending[id].counters_changed = true;
        if (close->calling_context) store_.set_calling_context(id, *close->calling_context);
        if (!close->tasks.empty()) store_.set_tasks(id, close->tasks);
        store_.end_session(id, close->state, close->ended_ns);
        a.closed.insert(id);
    }
}

// Each session that lost chunks since the last commit gets its gap, from its first lost chunk
// to now, and its counters (the newest the capture side sent, lost or not) with the losses.
void StorageWriter::write_storage_gaps(Attempt& a) {
    for (const auto& [id, ledger] : ledgers_) {
        if (!ledger.gap_since_ns) continue;
        if (!open_sessions_.count(id) && !a.opened.count(id)) continue;  // no row to attach to
        store_.add_gap(id, Gap{*ledger.gap_since_ns, a.now, "storage: " + ledger.gap_reason,
                               ledger.gap_records, ledger.gap_bytes});
        a.gaps_written.insert(id);
        auto& p = a.pending[id];
        // bytes_in only grows: the larger is the newer of the two.
        if (!p.counters_changed || ledger.last_counters.bytes_in > p.counters.bytes_in) {
            p.counters = ledger.last_counters;
            p.counters_changed = true;
        }
    }
}

}  // namespace rackprof::storage
