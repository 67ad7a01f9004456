#include "storage/storage_writer.h"

#include <chrono>

namespace rackprof::storage {

namespace {

std::int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::size_t op_bytes(const WriteOp& op) {
    if (const auto* chunk = std::get_if<ChunkOp>(&op)) {
        std::size_t text = 0;
        for (const auto& line : chunk->console) text += line.text.size();
        return chunk->raw.size() + chunk->records.size() * sizeof(protocol::Record) + text +
               sizeof(ChunkOp);
    }
    return sizeof(WriteOp);
}

}  // namespace

StorageWriter::StorageWriter(const std::filesystem::path& path, StorageWriterOptions options)
    : options_(options), store_(path) {
    interrupted_at_start_ = store_.interrupt_unfinished(now_ns());
    thread_ = std::thread([this] { run(); });
}

StorageWriter::~StorageWriter() {
    stop();
}

bool StorageWriter::submit(WriteOp op) {
    const std::size_t bytes = op_bytes(op);
    {
        std::lock_guard lock(mutex_);
        if (stopping_) return false;
        if (std::holds_alternative<ChunkOp>(op) &&
            queued_bytes_ + bytes > options_.queue_budget_bytes)
            return false;
        queued_bytes_ += bytes;
        queue_.push_back(std::move(op));
        ++submitted_;
    }
    wake_.notify_one();
    return true;
}

void StorageWriter::flush() {
    std::unique_lock lock(mutex_);
    const std::uint64_t target = submitted_;
    wake_.notify_one();
    drained_.wait(lock, [&] { return committed_ >= target || !thread_.joinable(); });
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

std::int64_t StorageWriter::session_id(SessionHandle handle) {
    std::lock_guard lock(mutex_);
    const auto it = ids_.find(handle);
    return it == ids_.end() ? 0 : it->second;
}

void StorageWriter::run() {
    while (true) {
        std::vector<WriteOp> ops;
        {
            std::unique_lock lock(mutex_);
            wake_.wait_for(lock, options_.commit_interval,
                           [&] { return !queue_.empty() || stopping_; });
            if (queue_.empty()) {
                if (stopping_) return;
                continue;
            }
            ops.reserve(queue_.size());
            for (auto& op : queue_) ops.push_back(std::move(op));
            queue_.clear();
            queued_bytes_ = 0;
        }
        apply(ops);
        {
            std::lock_guard lock(mutex_);
            committed_ += ops.size();
        }
        drained_.notify_all();
    }
}

WriterStats StorageWriter::stats() {
    std::lock_guard lock(mutex_);
    return {queue_.size(), queued_bytes_, committed_, failed_transactions_.load()};
}

// One transaction for everything that queued up while the previous one committed. If it
// fails, each operation is retried alone, so one bad operation cannot take others with it.
void StorageWriter::apply(std::vector<WriteOp>& ops) {
    try {
        apply_in_transaction(std::span<WriteOp>(ops));
        return;
    } catch (const StorageError& e) {
        ++failed_transactions_;
        if (on_error_)
            on_error_(std::string(e.what()) + "; retrying the batch one operation at a time");
    }
    for (WriteOp& op : ops) {
        try {
            apply_in_transaction(std::span<WriteOp>(&op, 1));
        } catch (const StorageError& e) {
            ++failed_transactions_;
            if (on_error_) on_error_(std::string("operation lost: ") + e.what());
        }
    }
}

void StorageWriter::apply_in_transaction(std::span<WriteOp> ops) {
    struct Pending {
        gmon::Aggregate delta;
        SessionCounters counters;
        bool counters_changed = false;
    };
    std::map<std::int64_t, Pending> pending;
    std::map<std::int64_t, std::int64_t> next_seq =
        next_seq_;  // committed only with the transaction
    std::map<SessionHandle, std::int64_t> opened;
    Transaction t(store_.db());
    for (WriteOp& op : ops) {
        if (auto* open = std::get_if<OpenSessionOp>(&op)) {
            const std::int64_t id = store_.create_session(open->spec);
            next_seq[id] = 0;
            opened[open->handle] = id;
            continue;
        }
        if (auto* del = std::get_if<DeleteSessionOp>(&op)) {
            store_.delete_session(del->id);
            continue;
        }
        if (auto* board = std::get_if<SaveBoardOp>(&op)) {
            if (board->config_json.empty()) {
                store_.delete_board(board->name);
            } else {
                store_.save_board(board->name, board->config_json, now_ns());
            }
            continue;
        }
        if (auto* fw = std::get_if<SetFirmwareOp>(&op)) {
            store_.set_firmware(fw->id, fw->elf_path, fw->build_id, fw->sha256);
            continue;
        }
        std::int64_t id = 0;
        std::visit(
            [&](auto& o) {
                using Op = std::decay_t<decltype(o)>;
                if constexpr (std::is_same_v<Op, ChunkOp> || std::is_same_v<Op, GapOp> ||
                              std::is_same_v<Op, CloseSessionOp> || std::is_same_v<Op, TargetOp>) {
                    if (const auto it = opened.find(o.handle); it != opened.end()) {
                        id = it->second;
                    } else {
                        std::lock_guard lock(mutex_);
                        id = ids_[o.handle];
                    }
                }
            },
            op);
        if (id == 0) throw StorageError("an operation for a session that was never opened");
        if (auto* chunk = std::get_if<ChunkOp>(&op)) {
            const std::int64_t seq = next_seq[id]++;  // chunk order within the session
            const auto packed = pack_records(chunk->records);
            store_.append_chunk(id, seq, chunk->received_ns, chunk->raw, packed,
                                chunk->records.size());
            for (std::size_t i = 0; i < chunk->console.size(); ++i) {
                store_.append_console(id, seq, static_cast<std::int64_t>(i), chunk->console[i]);
            }
            if (!chunk->exceptions.empty()) store_.set_exceptions(id, chunk->exceptions);
            Pending& p = pending[id];
            p.delta.add(chunk->records);
            p.counters = chunk->counters;
            p.counters_changed = true;
        } else if (auto* gap = std::get_if<GapOp>(&op)) {
            store_.add_gap(id, gap->gap);
            pending[id].counters = gap->counters;
            pending[id].counters_changed = true;
        } else if (auto* target = std::get_if<TargetOp>(&op)) {
            store_.set_target(id, target->target);
            if (!target->elf_path.empty()) {
                store_.set_firmware(id, target->elf_path, target->elf_build_id, target->elf_sha256);
            }
        } else if (auto* close = std::get_if<CloseSessionOp>(&op)) {
            pending[id].counters = close->counters;
            pending[id].counters_changed = true;
            store_.end_session(id, close->state, close->ended_ns);
        }
    }
    for (auto& [id, p] : pending) {
        store_.add_to_aggregate(id, p.delta);
        if (p.counters_changed) store_.update_counters(id, p.counters);
    }
    t.commit();
    next_seq_ = std::move(next_seq);
    std::lock_guard lock(mutex_);
    for (const auto& [handle, id] : opened) ids_[handle] = id;
}

}  // namespace rackprof::storage
