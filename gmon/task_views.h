// Views of a stream split by task (gmon/tasks.h): the tasks' shares, the interrupt table and
// the timeline, for the API, `convert --report tasks` and the exports `tasks` and `trace`.
// They decode the input's raw bytes again (ExportInput::raw with ExportInput::wire): tasks,
// handler invocations and event order are not in any stored sum.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "gmon/calling_context_export.h"
#include "gmon/export.h"
#include "gmon/tasks.h"

namespace rackprof::gmon {

// Thrown when an input has no raw bytes to decode again (an imported gmon.out, a merged
// selection, a session whose raw data retention dropped).
class ExportNeedsRaw : public std::invalid_argument {
  public:
    using std::invalid_argument::invalid_argument;
};

// The input's raw bytes decoded again into a TaskSplit.
TaskSplit split_tasks(const ExportInput& input, const TaskSplitOptions& options = {});

// {"tasks": [...], "samples", "cycles", "losses"}: each task's PC samples, share of them with
// its 95 % Wilson interval, calls, cycles (from switch stamps) and share of those.
nlohmann::json tasks_json(const TaskSplit& split);
// {"exceptions": [...], "span_cycles", "core_clock_hz"}: per exception number, complete
// invocations, total / mean / max / p99 cycles, share of the span, incomplete invocations.
nlohmann::json interrupts_json(const TaskSplit& split);
// Both as text tables (the export "tasks", `convert --report tasks`).
std::string tasks_text(const TaskSplit& split);

// The Trace Event format (Perfetto UI, chrome://tracing, speedscope): a track per task with
// its function calls as slices, one for handlers, one for which task runs; "ts" in
// microseconds of the target's clock from its first stamp (cycles when the clock rate is not
// known: otherData.clock_hz is 0). Slices a loss or the end left open are closed there, with
// args.cut.
std::string trace_document(const TaskSplit& split, const ContextFrameNames& names,
                           const std::string& title);

ChunkStream open_tasks_text(const std::shared_ptr<const ExportInput>& input);
ChunkStream open_tasks_json(const std::shared_ptr<const ExportInput>& input);
ChunkStream open_trace(const std::shared_ptr<const ExportInput>& input);

}  // namespace rackprof::gmon
