#include "gmon/tasks.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace rackprof::gmon {

std::string task_label(const TaskStats& task) {
    if (task.number == kNoTask) return "(no task)";
    if (task.number == kUnknownTask) return "(unknown)";
    if (!task.name.empty()) return task.name;
    char text[24];
    std::snprintf(text, sizeof text, "task@0x%08x", task.handle);
    return text;
}

std::vector<ExceptionTime> exception_times(const std::vector<ExceptionInvocations>& all) {
    std::vector<ExceptionTime> out;
    for (const auto& inv : all) {
        ExceptionTime t;
        t.exception = inv.exception;
        t.incomplete = inv.incomplete;
        t.count = inv.cycles.size();
        if (t.count > 0) {
            std::vector<std::uint64_t> sorted = inv.cycles;
            std::sort(sorted.begin(), sorted.end());
            for (const auto c : sorted) t.total += c;
            t.max = sorted.back();
            // Nearest rank: the smallest value with at least 99 % of the invocations at or
            // below it.
            const auto rank =
                static_cast<std::size_t>(std::ceil(0.99 * static_cast<double>(t.count)));
            t.p99 = sorted[std::max<std::size_t>(rank, 1) - 1];
            t.mean = static_cast<double>(t.total) / static_cast<double>(t.count);
        }
        out.push_back(t);
    }
    return out;
}

std::uint64_t TaskSplit::Clock::at(std::uint32_t stamp) {
    if (!started) {
        started = true;
        raw = stamp;
        return latest = 0;
    }
    const auto delta = static_cast<std::int32_t>(stamp - raw);
    if (delta < 0) {
        const auto back = static_cast<std::uint64_t>(-static_cast<std::int64_t>(delta));
        return latest > back ? latest - back : 0;
    }
    raw = stamp;
    return latest += static_cast<std::uint64_t>(delta);
}

TaskSplit::TaskSplit(TaskSplitOptions options) : options_(options) {
    tasks_.resize(2);
    tasks_[kUnknownTask].number = kUnknownTask;
    aggregates_.resize(2);
    builder_.split_by_task(true);
    builder_.record_invocations(options_.events);
}

void TaskSplit::on_records(std::span<const protocol::Record> batch) {
    TaskStats& task = tasks_[current_];
    for (const auto& r : batch) {
        if (r.kind == protocol::RecordKind::kArc) {
            task.calls += r.count;
        } else {
            task.samples += r.count;
        }
    }
    if (options_.aggregates) aggregates_[current_].add(batch);
}

void TaskSplit::on_event(const protocol::StreamEvent& event) {
    if (const auto* f = std::get_if<protocol::FunctionEvent>(&event)) {
        if (!options_.events) return;
        builder_.on_event(*f);
        const std::uint64_t time = f->stamp_bits >= 32 ? clock_.at(f->timestamp) : clock_.latest;
        keep({f->enter ? TimelineEvent::Kind::kEnter : TimelineEvent::Kind::kExit, time, current_,
              f->exception, f->callee});
    } else if (const auto* s = std::get_if<protocol::TaskSwitch>(&event)) {
        switch_in(*s);
    } else if (const auto* d = std::get_if<protocol::TaskDeleted>(&event)) {
        deleted(*d);
    } else if (const auto* l = std::get_if<protocol::EventsLost>(&event)) {
        lost(l->count);
    } else if (const auto* h = std::get_if<protocol::TargetHello>(&event)) {
        if (h->core_clock_hz) core_clock_hz_ = h->core_clock_hz;
    }
}

void TaskSplit::switch_in(const protocol::TaskSwitch& s) {
    const std::uint64_t time = clock_.at(s.stamp);
    if (switched_at_) tasks_[current_].cycles += time - std::min(time, *switched_at_);
    auto [it, fresh] = live_.try_emplace(s.task, static_cast<std::uint32_t>(tasks_.size()));
    if (fresh) {
        TaskStats t;
        t.number = it->second;
        t.handle = s.task;
        tasks_.push_back(t);
        aggregates_.emplace_back();
    }
    TaskStats& task = tasks_[it->second];
    if (task.name.empty()) task.name = s.name;
    ++task.switches;
    current_ = it->second;
    switched_at_ = time;
    if (options_.events) builder_.on_task_switch(current_, s.stamp);
    keep({TimelineEvent::Kind::kSwitch, time, current_, 0, 0});
}

void TaskSplit::deleted(const protocol::TaskDeleted& d) {
    const auto it = live_.find(d.task);
    if (it == live_.end()) return;  // its switch-in was lost: nothing is charged to it
    tasks_[it->second].deleted = true;
    if (options_.events) builder_.on_task_deleted(it->second);
    keep({TimelineEvent::Kind::kDeleted, clock_.at(d.stamp), it->second, 0, 0});
    live_.erase(it);
}

void TaskSplit::lost(std::uint64_t count) {
    ++losses_;
    if (options_.events) builder_.mark_lost(count);
    keep({TimelineEvent::Kind::kLost, clock_.latest, current_, 0, 0});
    if (!has_tasks()) return;
    // A switch may have been among what was lost: nobody is known to run until the next.
    if (switched_at_)
        tasks_[current_].cycles += clock_.latest - std::min(clock_.latest, *switched_at_);
    switched_at_.reset();
    current_ = kUnknownTask;
    if (options_.events) builder_.on_task_switch(kUnknownTask, 0, false);
}

void TaskSplit::keep(const TimelineEvent& event) {
    if (!options_.timeline) return;
    const double ns = core_clock_hz_ ? static_cast<double>(event.time) * 1e9 / core_clock_hz_
                                     : static_cast<double>(event.time);
    if (ns < static_cast<double>(options_.timeline_from_ns) ||
        ns >= static_cast<double>(options_.timeline_to_ns))
        return;
    if (timeline_.size() >= options_.max_timeline_events) {
        ++timeline_dropped_;
        return;
    }
    timeline_.push_back(event);
}

std::vector<TaskStats> TaskSplit::tasks() const {
    std::vector<TaskStats> out = tasks_;
    if (switched_at_)
        out[current_].cycles += clock_.latest - std::min(clock_.latest, *switched_at_);
    return out;
}

const Aggregate& TaskSplit::task_aggregate(std::uint32_t task) const {
    static const Aggregate empty;
    return task < aggregates_.size() ? aggregates_[task] : empty;
}

std::vector<std::uint32_t> TaskSplit::tasks_named(const std::string& label) const {
    std::vector<std::uint32_t> out;
    for (const auto& t : tasks_) {
        if (task_label(t) == label) out.push_back(t.number);
    }
    return out;
}

std::vector<ExceptionTime> TaskSplit::exceptions() const {
    return exception_times(builder_.invocations());
}

}  // namespace rackprof::gmon
