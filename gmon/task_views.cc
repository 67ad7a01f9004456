#include "gmon/task_views.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <utility>
#include <vector>

#include "gmon/sampling_stats.h"
#include "protocol/wire_format.h"

namespace rackprof::gmon {

namespace {

void require_raw(const ExportInput& input) {
    if (!input.raw || !input.wire)
        throw ExportNeedsRaw(
            "tasks, interrupts and timelines are decoded from raw bytes, and this input has none "
            "(a gmon.out, a merged selection, or raw data retention dropped)");
}

// A raw-bytes decoder feeding the split (what an import's sink would see).
void decode_raw(const ExportInput& input, TaskSplit& split) {
    require_raw(input);
    RawPages pages = input.raw;
    const auto decoder = protocol::make_decoder(*input.wire);
    while (const auto page = pages()) {
        const auto* bytes = reinterpret_cast<const std::uint8_t*>(page->data());
        decoder->feed(std::span(bytes, page->size()), split);
    }
    decoder->finish(split);
    std::vector<ExceptionTime> traced;
    for (const auto& [number, stats] : protocol::exceptions_of(*decoder)) {
        ExceptionTime t;
        t.exception = number;
        t.count = stats.completed;
        t.total = stats.cycles;
        t.max = stats.max_cycles;
        t.p99 = stats.p99_cycles;
        t.mean = stats.completed
                     ? static_cast<double>(stats.cycles) / static_cast<double>(stats.completed)
                     : 0.0;
        t.incomplete = stats.entries - std::min(stats.entries, stats.completed);
        traced.push_back(t);
    }
    split.set_traced_exceptions(std::move(traced));
}

double percent(double part, double whole) {
    return whole > 0 ? 100.0 * part / whole : 0.0;
}

}  // namespace

TaskSplit split_tasks(const ExportInput& input, const TaskSplitOptions& options) {
    TaskSplit split(options);
    decode_raw(input, split);
    return split;
}

nlohmann::json tasks_json(const TaskSplit& split) {
    const auto tasks = split.tasks();
    std::uint64_t samples = 0, cycles = 0;
    for (const auto& t : tasks) {
        samples += t.samples;
        cycles += t.cycles;
    }
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& t : tasks) {
        if (t.number <= kUnknownTask && t.samples == 0 && t.calls == 0 && t.cycles == 0) continue;
        const auto [lo, hi] = wilson_interval(t.samples, samples);
        char handle[16];
        std::snprintf(handle, sizeof handle, "0x%08x", t.handle);
        rows.push_back({{"number", t.number},
                        {"name", task_label(t)},
                        {"handle", t.number > kUnknownTask ? nlohmann::json(handle) : nullptr},
                        {"deleted", t.deleted},
                        {"switches", t.switches},
                        {"samples", t.samples},
                        {"share_percent", share_percent(t.samples, samples)},
                        {"share_interval", {100.0 * lo, 100.0 * hi}},
                        {"calls", t.calls},
                        {"cycles", t.cycles},
                        {"cycles_percent",
                         percent(static_cast<double>(t.cycles), static_cast<double>(cycles))}});
    }
    return {{"tasks", std::move(rows)},
            {"samples", samples},
            {"cycles", cycles},
            {"losses", split.losses()},
            {"core_clock_hz", split.core_clock_hz()}};
}

namespace {
// One row of the interrupt table; `share` null where no span is known.
nlohmann::json exception_row(const ExceptionTime& e, const char* source, nlohmann::json share) {
    return {{"exception", e.exception},
            {"source", source},
            {"name", exception_name(e.exception)},
            {"count", e.count},
            {"total_cycles", e.total},
            {"mean_cycles", e.mean},
            {"max_cycles", e.max},
            {"p99_cycles", e.p99},
            {"share_percent", std::move(share)},
            {"incomplete", e.incomplete}};
}
}  // namespace

nlohmann::json interrupts_json(const TaskSplit& split) {
    nlohmann::json rows = nlohmann::json::array();
    const auto span = static_cast<double>(split.span_cycles());
    for (const auto& e : split.exceptions())
        rows.push_back(exception_row(e, "events", percent(static_cast<double>(e.total), span)));
    // The DWT's trace (SWO captures): its clock is its local timestamps', so no share.
    for (const auto& e : split.traced_exceptions())
        rows.push_back(exception_row(e, "dwt", nullptr));
    return {{"exceptions", std::move(rows)},
            {"span_cycles", split.span_cycles()},
            {"core_clock_hz", split.core_clock_hz()}};
}

std::string tasks_text(const TaskSplit& split) {
    std::ostringstream out;
    const auto tasks = tasks_json(split);
    char line[256];
    out << "Tasks (" << tasks["samples"].get<std::uint64_t>() << " samples, "
        << tasks["cycles"].get<std::uint64_t>() << " cycles between switches, " << split.losses()
        << " losses):\n\n";
    out << "  share %   95 % interval      samples        calls           cycles  cycles %  "
           "switches  task\n";
    for (const auto& t : tasks["tasks"]) {
        std::snprintf(line, sizeof line,
                      "%9.2f  %6.2f - %6.2f  %11llu  %11llu  %15llu  %8.2f  %8llu  ",
                      t["share_percent"].get<double>(), t["share_interval"][0].get<double>(),
                      t["share_interval"][1].get<double>(),
                      static_cast<unsigned long long>(t["samples"].get<std::uint64_t>()),
                      static_cast<unsigned long long>(t["calls"].get<std::uint64_t>()),
                      static_cast<unsigned long long>(t["cycles"].get<std::uint64_t>()),
                      t["cycles_percent"].get<double>(),
                      static_cast<unsigned long long>(t["switches"].get<std::uint64_t>()));
        out << line << t["name"].get<std::string>()
            << (t["deleted"].get<bool>() ? " (deleted)" : "") << "\n";
    }
    const auto irq = interrupts_json(split);
    out << "\nInterrupts (handler cycles from entry/exit events, " << split.span_cycles()
        << " cycles in all):\n\n";
    out << "     count     total cycles       mean        max        p99   share %  incomplete  "
           "exception\n";
    for (const auto& e : irq["exceptions"]) {
        if (e["source"] != "events") continue;
        std::snprintf(line, sizeof line, "%10llu  %15llu  %9.1f  %9llu  %9llu  %8.3f  %10llu  ",
                      static_cast<unsigned long long>(e["count"].get<std::uint64_t>()),
                      static_cast<unsigned long long>(e["total_cycles"].get<std::uint64_t>()),
                      e["mean_cycles"].get<double>(),
                      static_cast<unsigned long long>(e["max_cycles"].get<std::uint64_t>()),
                      static_cast<unsigned long long>(e["p99_cycles"].get<std::uint64_t>()),
                      e["share_percent"].get<double>(),
                      static_cast<unsigned long long>(e["incomplete"].get<std::uint64_t>()));
        out << line << e["name"].get<std::string>() << "\n";
    }
    if (split.traced_exceptions().empty()) return out.str();
    out << "\nInterrupts from the DWT exception trace (local timestamps; p99 to an eighth of an "
           "octave):\n\n";
    out << "     count     total cycles       mean        max        p99  incomplete  exception\n";
    for (const auto& e : split.traced_exceptions()) {
        std::snprintf(
            line, sizeof line, "%10llu  %15llu  %9.1f  %9llu  %9llu  %10llu  ",
            static_cast<unsigned long long>(e.count), static_cast<unsigned long long>(e.total),
            e.mean, static_cast<unsigned long long>(e.max), static_cast<unsigned long long>(e.p99),
            static_cast<unsigned long long>(e.incomplete));
        out << line << exception_name(e.exception) << "\n";
    }
    return out.str();
}

namespace {

constexpr int kSchedulerTrack = 1;
constexpr int kHandlerTrack = 2;
constexpr int kFirstTaskTrack = 10;

// Writes B/E pairs per track, each track's open slices on a stack so every E closes a B.
class TraceWriter {
  public:
    TraceWriter(const TaskSplit& split, const ContextFrameNames& names)
        : split_(split), names_(names), hz_(split.core_clock_hz()) {}

    nlohmann::json run(const std::string& title) {
        const auto tasks = split_.tasks();
        events_.push_back(meta("process_name", 0, title));
        events_.push_back(meta("thread_name", kSchedulerTrack, "running task"));
        events_.push_back(meta("thread_name", kHandlerTrack, "interrupts"));
        for (const auto& t : tasks)
            events_.push_back(meta("thread_name", track_of(t.number), "task " + task_label(t)));
        for (const auto& e : split_.timeline()) add(e, tasks);
        for (auto& [track, open] : open_)
            close_all(track, last_, track == kSchedulerTrack ? nullptr : "end");
        return {{"traceEvents", std::move(events_)},
                {"displayTimeUnit", "ns"},
                {"otherData",
                 {{"clock_hz", hz_},
                  {"span_cycles", split_.span_cycles()},
                  {"events_left_out", split_.timeline_dropped()}}}};
    }

  private:
    static int track_of(std::uint32_t task) { return kFirstTaskTrack + static_cast<int>(task); }
    double ts(std::uint64_t cycles) const {
        return hz_ ? static_cast<double>(cycles) * 1e6 / hz_ : static_cast<double>(cycles);
    }
    static nlohmann::json meta(const char* what, int tid, const std::string& name) {
        return {{"name", what}, {"ph", "M"}, {"pid", 1}, {"tid", tid}, {"args", {{"name", name}}}};
    }
    void begin(int track, std::uint64_t time, const std::string& name, std::uint32_t function,
               const char* cat) {
        events_.push_back({{"name", name},
                           {"cat", cat},
                           {"ph", "B"},
                           {"pid", 1},
                           {"tid", track},
                           {"ts", ts(time)}});
        open_[track].push_back({function, name});
    }
    // E events carry their slice's name: readers such as speedscope match an E to the open
    // slice by name and ignore one that names another.
    void end(int track, std::uint64_t time, const char* cut) {
        nlohmann::json e = {{"name", open_[track].back().second},
                            {"ph", "E"},
                            {"pid", 1},
                            {"tid", track},
                            {"ts", ts(time)}};
        if (cut) e["args"] = {{"cut", cut}};
        events_.push_back(std::move(e));
        open_[track].pop_back();
    }
    void close_all(int track, std::uint64_t time, const char* cut) {
        while (!open_[track].empty()) end(track, time, cut);
    }
    // An exit closes the innermost open slice of its function (those above it never saw theirs).
    void exit(int track, std::uint64_t time, std::uint32_t function) {
        auto& open = open_[track];
        const auto it = std::find_if(open.rbegin(), open.rend(),
                                     [&](const auto& slice) { return slice.first == function; });
        if (it == open.rend()) return;  // its entry was not seen
        const auto depth = static_cast<std::size_t>(open.rend() - it) - 1;
        while (open.size() > depth + 1) end(track, time, "exit not seen");
        end(track, time, nullptr);
    }
    void add(const TimelineEvent& e, const std::vector<TaskStats>& tasks) {
        using Kind = TimelineEvent::Kind;
        last_ = std::max(last_, e.time);
        const int track = e.exception ? kHandlerTrack : track_of(e.task);
        switch (e.kind) {
            case Kind::kEnter:
                begin(track, e.time, names_.function(e.function), e.function,
                      e.exception ? "interrupt" : "function");
                break;
            case Kind::kExit:
                exit(track, e.time, e.function);
                break;
            case Kind::kSwitch:
                close_all(kSchedulerTrack, e.time, nullptr);
                begin(kSchedulerTrack, e.time, task_label(tasks[e.task]), e.task, "task");
                break;
            case Kind::kDeleted:
                close_all(track_of(e.task), e.time, "task deleted");
                break;
            case Kind::kLost:
                for (auto& [t, open] : open_) close_all(t, e.time, "events lost");
                events_.push_back({{"name", "events lost"},
                                   {"ph", "i"},
                                   {"s", "p"},
                                   {"pid", 1},
                                   {"tid", kSchedulerTrack},
                                   {"ts", ts(e.time)}});
                break;
        }
    }

    const TaskSplit& split_;
    const ContextFrameNames& names_;
    double hz_;
    std::uint64_t last_ = 0;
    nlohmann::json events_ = nlohmann::json::array();
    std::map<int, std::vector<std::pair<std::uint32_t, std::string>>> open_;  // (function, name)
};

}  // namespace

std::string trace_document(const TaskSplit& split, const ContextFrameNames& names,
                           const std::string& title) {
    return TraceWriter(split, names).run(title).dump();
}

ChunkStream open_tasks_text(const std::shared_ptr<const ExportInput>& input) {
    require_raw(*input);
    auto done = std::make_shared<bool>(false);
    return [input, done]() -> std::optional<std::string> {
        if (*done) return std::nullopt;
        *done = true;
        return tasks_text(split_tasks(*input));
    };
}

ChunkStream open_tasks_json(const std::shared_ptr<const ExportInput>& input) {
    require_raw(*input);
    auto done = std::make_shared<bool>(false);
    return [input, done]() -> std::optional<std::string> {
        if (*done) return std::nullopt;
        *done = true;
        const TaskSplit split = split_tasks(*input);
        nlohmann::json out = tasks_json(split);
        out["interrupts"] = interrupts_json(split);
        return out.dump(2) + "\n";
    };
}

ChunkStream open_trace(const std::shared_ptr<const ExportInput>& input) {
    require_raw(*input);
    auto done = std::make_shared<bool>(false);
    return [input, done]() -> std::optional<std::string> {
        if (*done) return std::nullopt;
        *done = true;
        TaskSplitOptions options;
        options.timeline = true;
        const TaskSplit split = split_tasks(*input, options);
        // Without task switches or entry/exit events the document has its tracks' names only.
        const std::string title =
            input->summary.contains("input") && input->summary["input"].is_string()
                ? input->summary["input"].get<std::string>()
                : "rackprof";
        return trace_document(split, ContextFrameNames(input->source.elf.get()), title);
    };
}

}  // namespace rackprof::gmon
