// One capture window on one board, as the capture loop sees it: decodes each chunk inline,
// keeps the counters, and hands raw bytes and records to the storage writer. A refused hand-off
// (storage queue full) is counted as loss, never silent. The session sums every chunk's records
// itself, whatever the writer's load: the sums are the live aggregate's changes and go to
// storage with the chunk (ChunkOp::delta), so the live view and storage agree by construction.
//
// Reads are gathered before they are handed on: a serial line gives a few KiB per read, and
// summing, queueing and storing each as a chunk of its own cost more than decoding it. A
// session hands over when it holds kHandOverBytes, and whenever its board says (hand_over(),
// at every live publish), so storage sees every byte within that period, and the live view
// within the writer's commit interval after it.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "daemon/ingest/calling_context_feed.h"
#include "daemon/ingest/capture_import.h"
#include "daemon/ingest/wire_settings.h"
#include "gmon/aggregate.h"
#include "gmon/symbolizer.h"
#include "gmon/tasks.h"
#include "protocol/stream_event.h"
#include "storage/storage_writer.h"

namespace rackprof::daemon::capture {

// A stream's tasks as sessions keep them (storage::TaskSummary), the pseudo-tasks left out.
std::vector<storage::TaskSummary> task_summaries(const gmon::TaskSplit& split);

std::int64_t unix_now_ns();
// The firmware a board picks for a target that introduced itself (empty: it stays as it is).
struct PickedFirmware {
    std::string elf_path;
    std::string build_id;
    std::string sha256;
    bool refused = false;  // the session's ELF is not this target's (another core): none
};
using FirmwareForHello = std::function<PickedFirmware(const protocol::TargetHello&)>;

class CaptureSession {
  public:
    // `id`: reserved from the writer (the session's row id). Throws std::invalid_argument for a
    // wire it cannot decode. A HELLO goes one way: the
    // session records what the target said, asking `firmware_for` which image names it.
    CaptureSession(storage::SessionId id, storage::NewSession spec, const protocol::WireSpec& wire,
                   storage::StorageWriter& writer, FirmwareForHello firmware_for = {});

    storage::SessionId id() const { return id_; }
    const storage::NewSession& spec() const { return spec_; }
    const storage::SessionCounters& counters() const { return counters_; }
    // The records aggregated since the last call (what the live snapshot has not seen yet): the
    // sums of every chunk handed to storage (a refused one is in neither).
    gmon::Aggregate take_changes();
    bool in_gap() const { return open_gap_.has_value(); }
    // The most recent arcs received, newest last (for the live view).
    const std::deque<protocol::Record>& newest_arcs() const { return newest_arcs_; }
    // The most recent console lines (itm), newest last (for the live view).
    const std::deque<storage::ConsoleLine>& newest_console() const { return newest_console_; }
    // The exception trace so far (itm), by exception number.
    const std::vector<storage::ExceptionCount>& exceptions() const { return exceptions_; }

    // Decodes the chunk and keeps it for the next hand-over; hands over when enough is
    // gathered. Returns false if a hand-off could not be queued (and was counted as lost).
    bool on_chunk(std::span<const std::uint8_t> raw, std::int64_t received_ns);
    // Hands what was gathered to storage and the live aggregate; false as on_chunk.
    bool hand_over();
    // Raw bytes that start a hand-over by themselves (a quarter of a storage block).
    static constexpr std::size_t kHandOverBytes = 64 * 1024;
    // What the target said about itself in its last HELLO (empty without one).
    const storage::TargetInfo& target() const { return target_; }
    // The link went away: the stream is broken here (a partial record is counted as discarded).
    void gap_started(const std::string& reason, std::int64_t at_ns);
    // The link is back: the gap is recorded.
    void gap_ended(std::int64_t at_ns);
    void end(const std::string& state, std::int64_t at_ns);

  private:
    struct Collector : protocol::RecordSink {
        std::vector<protocol::Record> records;
        std::vector<protocol::ConsoleText> console;
        std::optional<protocol::TargetHello> hello;  // the newest not yet taken
        ingest::CallingContextFeed calling_context;  // function entry/exit events
        // An RTOS's tasks as the stream names them, their samples counted once one ran.
        gmon::TaskSplit tasks{gmon::TaskSplitOptions{.events = false}};
        void on_records(std::span<const protocol::Record> batch) override {
            records.insert(records.end(), batch.begin(), batch.end());
            if (tasks.has_tasks()) tasks.on_records(batch);
        }
        void on_event(const protocol::StreamEvent& event) override {
            if (const auto* h = std::get_if<protocol::TargetHello>(&event)) hello = *h;
            if (const auto* c = std::get_if<protocol::ConsoleText>(&event)) console.push_back(*c);
            calling_context.on_event(event);
            tasks.on_event(event);
        }
        bool empty() const { return records.empty() && console.empty(); }
    };
    std::vector<storage::ConsoleLine> take_console(std::int64_t received_ns);
    // The exception totals when they changed since the last call, else empty.
    std::vector<storage::ExceptionCount> changed_exceptions();
    // The task list when it changed since the last call (at most once a second unless `now`),
    // else empty.
    std::vector<storage::TaskSummary> changed_tasks(std::int64_t received_ns, bool now = false);
    // After the decoder's finish(): all that is gathered goes now, nothing being undecided;
    // records that came with no bytes (what finish() decided) are dated `at_ns`.
    void hand_over_decided(std::int64_t at_ns);
    // `held_back`: received bytes kept for the next hand-over (not in the row's bytes_in).
    bool submit_records(std::vector<std::uint8_t> raw, std::int64_t received_ns,
                        std::size_t held_back = 0);
    void on_hello(const protocol::TargetHello& hello);
    void refresh_counters();

    storage::SessionId id_;
    storage::NewSession spec_;
    storage::StorageWriter& writer_;
    std::unique_ptr<protocol::StreamDecoder> decoder_;
    storage::RawCodec raw_codec_;  // how storage may rebuild this wire's bytes
    Collector collector_;
    gmon::Aggregate changes_;
    FirmwareForHello firmware_for_;
    storage::TargetInfo target_;
    storage::SessionCounters counters_;
    std::optional<storage::Gap> open_gap_;
    std::vector<std::uint8_t> gathered_;  // raw bytes since the last hand-over
    std::int64_t gathered_since_ns_ = 0;  // when the first of them arrived
    std::int64_t last_chunk_ns_ = 0;      // when the latest chunk arrived (a kept tail's time)
    std::deque<protocol::Record> newest_arcs_;
    std::deque<storage::ConsoleLine> newest_console_;
    std::vector<storage::ExceptionCount> exceptions_;
    std::vector<storage::TaskSummary> tasks_;
    std::int64_t tasks_stored_ns_ = 0;
    bool tasks_due_ = false;  // the next chunk carries the task list whatever its age
    std::int64_t calling_context_stored_ns_ = 0;  // when a tree last went with a chunk
};

}  // namespace rackprof::daemon::capture
