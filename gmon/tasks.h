// Tasks and time: a stream's records and events split by the RTOS task that ran
// (protocol::TaskSwitch), each handler invocation's cycles, and the events in time order for a
// timeline. Everything here is computed from a decoded stream on demand (an import, or a stored
// session's raw bytes decoded again); nothing is stored.
//
// Attribution follows the stream (framed-protocol.md, "Tasks"): what comes after a
// TASK_SWITCH and before the next is its task's; before the first, no task's; after a loss,
// until the next switch, nobody's ("unknown"), never the task that ran before.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gmon/aggregate.h"
#include "gmon/calling_context.h"
#include "protocol/record_sink.h"
#include "protocol/stream_event.h"

namespace rackprof::gmon {

// Task numbers: the two pseudo-tasks, then the target's tasks in the order first seen (a
// handle deleted and used again is a new task).
inline constexpr std::uint32_t kNoTask = 0;
inline constexpr std::uint32_t kUnknownTask = 1;

struct TaskStats {
    std::uint32_t number = 0;
    std::uint32_t handle = 0;  // the target's handle (0 for the pseudo-tasks)
    std::string name;          // as the target sent it; "" when its naming switch was lost
    bool deleted = false;
    std::uint64_t switches = 0;  // times switched in
    std::uint64_t samples = 0;  // PC samples while it ran (handlers it was interrupted by included)
    std::uint64_t calls = 0;    // calls (arc counts) while it ran
    std::uint64_t cycles = 0;   // from its switch-ins to the next switches, where both are known
};

// "(no task)", "(unknown)", the task's name, or "task@0x20001000" when its name was lost.
std::string task_label(const TaskStats& task);

// One exception's handler time (orbtop -E's columns): from ExceptionInvocations.
struct ExceptionTime {
    std::uint16_t exception = 0;
    std::uint64_t count = 0;  // complete invocations
    std::uint64_t total = 0;  // cycles, of those
    std::uint64_t max = 0;
    std::uint64_t p99 = 0;  // the 99th percentile invocation (nearest rank)
    double mean = 0;
    std::uint64_t incomplete = 0;  // invocations a loss or the end cut (not in the others)
};
std::vector<ExceptionTime> exception_times(const std::vector<ExceptionInvocations>& all);

// One event of the timeline, in stream order. `time`: cycles since the stream's first stamp
// (stamps unwrapped: consecutive stamps are less than 2^31 cycles apart).
struct TimelineEvent {
    enum class Kind : std::uint8_t { kEnter, kExit, kSwitch, kDeleted, kLost };
    Kind kind = Kind::kEnter;
    std::uint64_t time = 0;
    std::uint32_t task = 0;       // the running task (kSwitch: the one switched in)
    std::uint16_t exception = 0;  // kEnter/kExit: 0 in thread mode, else the handler's
    std::uint32_t function = 0;   // kEnter/kExit
};

struct TaskSplitOptions {
    bool aggregates = false;  // keep each task's aggregate (task_aggregate)
    bool timeline = false;    // keep the timeline: events in [from, to) only
    // In ns of the target's clock from its first stamp (the HELLO's core_clock_hz); in cycles
    // when the clock is not known.
    std::uint64_t timeline_from_ns = 0;
    std::uint64_t timeline_to_ns = UINT64_MAX;
    std::size_t max_timeline_events = std::size_t{1} << 20;  // more are counted, not kept
    // Entry/exit events followed (trees, handler invocations, the timeline); off, a live
    // session's count of tasks stays small and bounded.
    bool events = true;
};

// A record sink that splits a decoded stream by task.
class TaskSplit final : public protocol::RecordSink {
  public:
    explicit TaskSplit(TaskSplitOptions options = {});

    void on_records(std::span<const protocol::Record> batch) override;
    void on_event(const protocol::StreamEvent& event) override;

    // Every task seen, by number (the pseudo-tasks first, always there); the running task's
    // cycles run to the last stamp seen.
    std::vector<TaskStats> tasks() const;
    bool has_tasks() const { return tasks_.size() > 2; }
    // The records of `task`; empty without TaskSplitOptions::aggregates.
    const Aggregate& task_aggregate(std::uint32_t task) const;
    // The tasks numbered by `label` (task_label): a name may belong to several tasks.
    std::vector<std::uint32_t> tasks_named(const std::string& label) const;
    // Thread mode's paths split by task (ContextNode::task), handlers as roots of their own.
    CallingContextTree tree() const { return builder_.snapshot(); }
    const CallingContextStats& tree_stats() const { return builder_.stats(); }
    std::vector<ExceptionTime> exceptions() const;
    // The DWT exception trace's own table (an SWO capture with local timestamps), kept beside
    // the one from entry/exit events: its p99 is a histogram bucket's bound.
    void set_traced_exceptions(std::vector<ExceptionTime> traced) { traced_ = std::move(traced); }
    const std::vector<ExceptionTime>& traced_exceptions() const { return traced_; }
    const std::vector<TimelineEvent>& timeline() const { return timeline_; }
    std::uint64_t timeline_dropped() const { return timeline_dropped_; }
    std::uint64_t span_cycles() const { return clock_.latest; }  // first stamp to the last
    std::uint32_t core_clock_hz() const { return core_clock_hz_; }
    std::uint64_t losses() const { return losses_; }

  private:
    // 32-bit stamps to a 64-bit time; a stamp behind the latest (queued out of stamp order
    // across contexts) is placed behind it, not a wrap ahead.
    struct Clock {
        bool started = false;
        std::uint32_t raw = 0;
        std::uint64_t latest = 0;
        std::uint64_t at(std::uint32_t stamp);
    };

    void switch_in(const protocol::TaskSwitch& s);
    void deleted(const protocol::TaskDeleted& d);
    void lost(std::uint64_t count);
    void keep(const TimelineEvent& event);

    TaskSplitOptions options_;
    std::vector<TaskStats> tasks_;
    std::vector<Aggregate> aggregates_;
    std::map<std::uint32_t, std::uint32_t> live_;  // handle -> number, until deleted
    std::uint32_t current_ = kNoTask;
    std::optional<std::uint64_t> switched_at_;  // the running task's switch-in, when known
    CallingContextBuilder builder_;
    Clock clock_;
    std::vector<TimelineEvent> timeline_;
    std::uint64_t timeline_dropped_ = 0;
    std::uint32_t core_clock_hz_ = 0;
    std::uint64_t losses_ = 0;
    std::vector<ExceptionTime> traced_;
};

}  // namespace rackprof::gmon
