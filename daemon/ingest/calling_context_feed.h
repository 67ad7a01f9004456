// A decoded stream's function entry/exit events (or a probe link's sampled stacks) into a
// calling-context tree
// (gmon/calling_context.h), for the capture loop and for imports alike. Loss is marked from
// the decoder's counters after each chunk: frames lost or bad, ITM overflows, resyncs, bytes
// discarded, records the target dropped. Where in the chunk the loss fell is not known, so the
// frames open at the chunk's end are what is marked; a decoder that reports loss in stream
// order (an event) should call mark_lost() at that place instead.
#pragma once

#include <memory>
#include <variant>

#include "gmon/calling_context.h"
#include "protocol/decoder_stats.h"
#include "protocol/stream_event.h"

namespace rackprof::daemon::ingest {

class CallingContextFeed {
  public:
    void on_event(const protocol::StreamEvent& event) {
        if (const auto* f = std::get_if<protocol::FunctionEvent>(&event)) {
            builder_.on_event(*f);
            changed_ = true;
        } else if (const auto* stack = std::get_if<protocol::StackSample>(&event)) {
            builder_.on_stack(*stack);  // a probe link's sampled stack
            changed_ = true;
        } else if (const auto* task = std::get_if<protocol::TaskSwitch>(&event)) {
            // Each RTOS task runs on a stack of its own: thread mode's frames follow the task.
            builder_.on_task_switch(task->task, task->stamp);
        } else if (const auto* gone = std::get_if<protocol::TaskDeleted>(&event)) {
            builder_.on_task_deleted(gone->task);
        } else if (const auto* lost = std::get_if<protocol::EventsLost>(&event)) {
            // The framed decoder says where in the stream events went missing.
            mark_lost(lost->count);
            loss_placed_ = true;
        }
    }
    // Events were lost here (in stream order), or across a link's gap.
    void mark_lost(std::uint64_t count = 0) {
        builder_.mark_lost(count);
        changed_ = true;
    }
    // After each chunk fed: a loss counter that grew marks a loss.
    void after_chunk(const protocol::DecoderStats& stats) {
        const std::uint64_t lost = stats.frames_lost + stats.frames_bad + stats.overflows +
                                   stats.resyncs + stats.bytes_discarded + stats.target_dropped;
        if (lost != lost_seen_ && builder_.has_events() && !loss_placed_) mark_lost(0);
        lost_seen_ = lost;
        loss_placed_ = false;
    }

    bool has_events() const { return builder_.has_events(); }
    const gmon::CallingContextStats& stats() const { return builder_.stats(); }
    // The tree so far (open frames marked incomplete); null when no event arrived.
    std::shared_ptr<const gmon::CallingContextTree> tree() const {
        if (!builder_.has_events()) return nullptr;
        return std::make_shared<const gmon::CallingContextTree>(builder_.snapshot());
    }
    // The tree when it changed since the last call, else null.
    std::shared_ptr<const gmon::CallingContextTree> take_changed() {
        if (!changed_) return nullptr;
        changed_ = false;
        return tree();
    }

  private:
    gmon::CallingContextBuilder builder_;
    std::uint64_t lost_seen_ = 0;
    bool loss_placed_ = false;  // an EventsLost in this chunk already marked where
    bool changed_ = false;
};

}  // namespace rackprof::daemon::ingest
