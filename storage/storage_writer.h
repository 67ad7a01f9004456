// The single writer: one thread owns the read-write connection and applies what the capture
// loop submits, many operations per transaction, committing at least every commit_interval.
// The capture loop never waits on the disk: submit() only queues, and refuses (returns
// false) when the queue is over its byte budget, so the caller can count the loss.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <span>
#include <thread>
#include <variant>
#include <vector>

#include "storage/session_store.h"

namespace rackprof::storage {

// Sessions are named by a handle the capture side picks; the writer maps it to the row id.
using SessionHandle = std::uint64_t;

struct OpenSessionOp {
    SessionHandle handle;
    NewSession spec;
};
struct ChunkOp {
    SessionHandle handle;
    std::int64_t received_ns;
    std::vector<std::uint8_t> raw;
    std::vector<protocol::Record> records;
    SessionCounters counters;                // the session's counters after this chunk
    std::vector<ConsoleLine> console;        // lines completed by this chunk
    std::vector<ExceptionCount> exceptions;  // the totals, when they changed; else empty
};
struct GapOp {
    SessionHandle handle;
    Gap gap;
    SessionCounters counters;
};
struct CloseSessionOp {
    SessionHandle handle;
    std::string state;
    std::int64_t ended_ns;
    SessionCounters counters;
};
struct DeleteSessionOp {
    std::int64_t id;  // a stored session, not capturing
};
struct SetFirmwareOp {
    std::int64_t id;  // a stored session
    std::string elf_path;
    std::string build_id;
    std::string sha256;
};
// A framed target's HELLO; with the firmware image picked by its build-id, if one was.
struct TargetOp {
    SessionHandle handle;
    TargetInfo target;
    std::string elf_path;  // empty: the session's firmware stays as it is
    std::string elf_build_id;
    std::string elf_sha256;
};
struct SaveBoardOp {
    std::string name;
    std::string config_json;  // empty: delete the board
};
using WriteOp = std::variant<OpenSessionOp, ChunkOp, GapOp, CloseSessionOp, DeleteSessionOp,
                             SetFirmwareOp, SaveBoardOp, TargetOp>;

struct StorageWriterOptions {
    std::chrono::milliseconds commit_interval{100};
    std::size_t queue_budget_bytes = 256u << 20;
};

// The writer as /metrics shows it: what waits, what was committed, what failed.
struct WriterStats {
    std::uint64_t queued_ops = 0;
    std::uint64_t queued_bytes = 0;
    std::uint64_t committed_ops = 0;
    std::uint64_t failed_transactions = 0;
};

class StorageWriter {
  public:
    // Opens (creating or migrating) the database; sessions left 'capturing' by a crash
    // become 'interrupted'. Throws StorageError.
    StorageWriter(const std::filesystem::path& path, StorageWriterOptions options = {});
    ~StorageWriter();
    StorageWriter(const StorageWriter&) = delete;
    StorageWriter& operator=(const StorageWriter&) = delete;

    int interrupted_at_start() const { return interrupted_at_start_; }

    // Queues an operation. Open, gap and close operations are always accepted (they are
    // small and carry state); a chunk is refused when the queue is over budget.
    bool submit(WriteOp op);
    // Blocks until everything submitted so far is committed.
    void flush();
    // Commits what is queued and stops the thread.
    void stop();

    // Called on the writer thread after a failed transaction (the ops are lost; logged).
    void on_error(std::function<void(const std::string&)> callback) {
        on_error_ = std::move(callback);
    }
    std::int64_t session_id(SessionHandle handle);  // 0 until the open op is committed
    WriterStats stats();

  private:
    void run();
    void apply(std::vector<WriteOp>& ops);
    void apply_in_transaction(std::span<WriteOp> ops);

    StorageWriterOptions options_;
    SessionStore store_;
    int interrupted_at_start_ = 0;

    std::mutex mutex_;
    std::condition_variable wake_;
    std::condition_variable drained_;
    std::deque<WriteOp> queue_;
    std::size_t queued_bytes_ = 0;
    std::uint64_t submitted_ = 0;
    std::uint64_t committed_ = 0;
    std::atomic<std::uint64_t> failed_transactions_{0};
    bool stopping_ = false;
    std::map<SessionHandle, std::int64_t> ids_;
    std::map<std::int64_t, std::int64_t> next_seq_;  // writer thread only
    std::function<void(const std::string&)> on_error_;
    std::thread thread_;
};

}  // namespace rackprof::storage
