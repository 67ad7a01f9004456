// The calling-context tree (CCT): exact cycles and calls per calling path, from function entry
// and exit events with cycle stamps (protocol::FunctionEvent). gprof's call graph splits a
// callee's time among its callers by call counts; the tree measures each path instead.
//
// A path is the sequence of functions from a root. Thread mode and every exception number are
// roots of their own: a handler's events start a stack of their own, a handler preempting
// another stacks its context on top, and a return to an interrupted context resumes its stack,
// so the cycles spent in a handler are never charged to the path it interrupted.
//
// Time between two consecutive events goes to the frame running after the first: the top of
// the innermost active context; when that context's stack is empty (a handler has returned),
// to the context the second event resumes (its top frame) or, for a context just entered (a
// tail-chained or new handler), to its root's own time. Stamps wrap at 2^stamp_bits; the
// difference of consecutive stamps is taken modulo that, so at most one wrap may pass between
// two events (2^24 cycles: 233 ms at 72 MHz).
//
// Loss never makes a path silently wrong: a node is marked `incomplete` when its numbers may be
// off — open frames at a loss (mark_lost: lost frames, ITM overflows) and every frame entered
// under them, frames whose exit was never seen (skipped by an outer exit, left open in a
// handler that returned, or open at the end), the frame running when an exit without a
// matching entry arrives. The interval across a loss is charged to no one.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "protocol/stream_event.h"

namespace rackprof::gmon {

inline constexpr std::uint32_t kNoParent = 0xFFFFFFFF;

// What a tree's `exclusive` and `inclusive` count: target cycles measured between entry and
// exit events, or samples of stacks a probe link unwound (protocol::StackSample; `calls` is 0
// there: a sample sees no call). The two are never added together.
enum class ContextUnit : std::uint8_t { kCycles = 0, kSamples = 1 };
// "cycles", "samples": the views' word for it.
std::string_view unit_name(ContextUnit unit);

struct ContextNode {
    std::uint32_t parent = kNoParent;  // index into nodes(); kNoParent for a root
    std::uint64_t function = 0;        // the function's address; 0 for a root
    std::uint16_t exception = 0;       // the root's context: 0 thread mode, else the IPSR number
    // Thread mode's roots of a tree split by task (CallingContextBuilder::split_by_task): the
    // task's number in its TaskList (gmon/tasks.h); 0 in every other tree.
    std::uint32_t task = 0;
    std::uint64_t calls = 0;      // entries of this path (a root: 0)
    std::uint64_t inclusive = 0;  // cycles in the path and below it
    std::uint64_t exclusive = 0;  // cycles in the path's own function (a root: outside any)
    bool incomplete = false;      // the numbers may be off (see above)
    friend bool operator==(const ContextNode&, const ContextNode&) = default;
};

class CallingContextTree {
  public:
    // Parents come before their children.
    const std::vector<ContextNode>& nodes() const { return nodes_; }
    bool empty() const { return nodes_.empty(); }
    std::size_t incomplete_nodes() const;

    // Found or added.
    std::uint32_t root(std::uint16_t exception, std::uint32_t task = 0);
    std::uint32_t child(std::uint32_t parent, std::uint64_t function);
    ContextNode& at(std::uint32_t node) { return nodes_[node]; }

    // Adds a stored node: its parent (an earlier index, or kNoParent) as given. Throws
    // std::invalid_argument for a parent not yet added.
    void add_stored(const ContextNode& node);
    // Inclusive = exclusive + the children's inclusive, for every node.
    void sum_inclusive();
    // Addition by path: calls and cycles add, incomplete is or-ed. An empty tree takes the
    // other's unit; trees of different units throw std::invalid_argument.
    void merge(const CallingContextTree& other);
    // The paths under thread mode's root of `task` (as a tree of one thread-mode root of task
    // 0), inclusive times summed; empty when the task has none.
    CallingContextTree task_tree(std::uint32_t task) const;

    ContextUnit unit() const { return unit_; }
    void set_unit(ContextUnit unit) { unit_ = unit; }

    friend bool operator==(const CallingContextTree& a, const CallingContextTree& b) {
        return a.unit_ == b.unit_ && a.nodes_ == b.nodes_;
    }

  private:
    ContextUnit unit_ = ContextUnit::kCycles;
    std::vector<ContextNode> nodes_;
    std::map<std::pair<std::uint16_t, std::uint32_t>, std::uint32_t> roots_;
    std::map<std::pair<std::uint32_t, std::uint64_t>, std::uint32_t> children_;
};

struct CallingContextStats {
    std::uint64_t events = 0;
    std::uint64_t losses = 0;             // mark_lost counts
    std::uint64_t unmatched_exits = 0;    // exits with no matching entry on their stack
    std::uint64_t unfinished_frames = 0;  // frames left open by a returned handler
    std::uint64_t too_deep = 0;           // entries past kMaxDepth, not followed
    std::uint64_t stacks = 0;             // sampled stacks added (on_stack)
    // Stacks that came after entry/exit events, or events after stacks: one tree holds one
    // unit, so the later kind is counted here and left out.
    std::uint64_t mixed_ignored = 0;
    std::uint64_t task_switches = 0;  // on_task_switch calls
    friend bool operator==(const CallingContextStats&, const CallingContextStats&) = default;
};

// One exception's invocations, from the time charged to its context (CallingContextBuilder
// with record_invocations): an invocation runs from the handler's first entry event until its
// outermost function returns, less the time of handlers that preempted it (so a handler that
// is not itself instrumented counts each outermost call it makes). `cycles` holds each
// invocation's, in order.
struct ExceptionInvocations {
    std::uint16_t exception = 0;
    std::vector<std::uint64_t> cycles;
    std::uint64_t incomplete = 0;  // invocations a loss or the stream's end cut
};

// Builds the tree from events in stream order, across chunks.
class CallingContextBuilder {
  public:
    static constexpr std::size_t kMaxDepth = 1024;
    static constexpr std::size_t kMaxContexts = 64;

    void on_event(const protocol::FunctionEvent& event);
    // A probe link's sampled stack: one sample at its path (thread mode or its exception,
    // then its functions from the outermost in), marked incomplete when it was cut short.
    void on_stack(const protocol::StackSample& sample);
    // Events were lost here (frames lost, an overflow): `count` of them, 0 if unknown.
    void mark_lost(std::uint64_t count = 0);
    // An RTOS switched `task` in at `stamp` (32-bit, the events' clock): thread mode's stack
    // becomes that task's (each task keeps its own, parked while it does not run). With
    // split_by_task, each task's thread-mode paths hang under a root of its own.
    // `stamped` false: the switch's time is unknown (a loss put it there); no time is charged.
    void on_task_switch(std::uint32_t task, std::uint32_t stamp, bool stamped = true);
    // The task is gone: its parked frames are unfinished.
    void on_task_deleted(std::uint32_t task);
    void split_by_task(bool on) { split_by_task_ = on; }
    // Keeps every handler invocation's cycles (invocations()); off by default, since a live
    // session's builder must stay bounded.
    void record_invocations(bool on) { record_invocations_ = on; }
    // Per exception number, in number order; invocations still open are counted incomplete.
    std::vector<ExceptionInvocations> invocations() const;
    bool has_events() const { return stats_.events > 0 || stats_.stacks > 0; }
    const CallingContextStats& stats() const { return stats_; }
    // The tree so far, inclusive times summed; frames still open are marked incomplete (their
    // time up to the last event counted).
    CallingContextTree snapshot() const;

  private:
    struct Frame {
        std::uint32_t node;
        bool uncertain;  // open at a loss, or entered under such a frame
    };
    struct Context {
        std::uint16_t exception;
        std::uint32_t root;
        std::vector<Frame> stack;
        std::uint64_t cycles = 0;  // charged to its running invocation (a handler's)
        bool running = false;      // a handler's invocation is open (entered, not yet returned)
        bool cut = false;          // a loss fell inside the running invocation
    };

    void charge(std::uint64_t cycles, std::uint16_t next_exception);
    void advance(std::uint32_t stamp, std::uint32_t mask, std::uint16_t next_exception);
    Context new_context(std::uint16_t exception);
    void close(Context& context);  // a context ends: an open invocation is cut
    void record_invocation(Context& context);
    std::uint32_t thread_root();  // thread mode's root for the running task
    void switch_to(std::uint16_t exception);
    void end_context(Context& context);
    void enter(Context& context, std::uint64_t function);
    void exit(Context& context, std::uint64_t function);

    CallingContextTree tree_;
    std::vector<Context> active_;  // innermost last
    CallingContextStats stats_;
    std::uint32_t last_stamp_ = 0;
    bool have_stamp_ = false;
    std::uint32_t task_ = 0;                              // the task running
    std::map<std::uint32_t, std::vector<Frame>> parked_;  // other tasks' thread stacks
    bool split_by_task_ = false;
    bool deleted_running_ = false;  // the running task was deleted: its frames end at the switch
    bool record_invocations_ = false;
    std::uint64_t pending_root_cycles_ = 0;  // charged to a context about to start
    std::map<std::uint16_t, ExceptionInvocations> invocations_;
};

// A caller -> callee arc with its measured inclusive cycles beside gprof's estimate: the
// callee's measured total times this arc's share of its calls from functions (what gprof's
// call graph propagates). Recursion is counted once per path (the outermost occurrence of an
// arc, and of a callee for its total); self-calls get no estimate, as in gprof.
struct AttributedArc {
    std::uint64_t caller = 0;
    std::uint64_t callee = 0;
    std::uint64_t calls = 0;
    std::uint64_t callee_calls = 0;  // from functions, self-calls excluded
    std::uint64_t measured = 0;      // cycles
    std::uint64_t callee_total = 0;  // cycles
    double estimated = 0;            // cycles, gprof's way
    bool incomplete = false;         // a node it sums is incomplete
};

// Sorted by caller, then callee.
std::vector<AttributedArc> attributed_arcs(const CallingContextTree& tree);

// ARMv7-M's exception numbers (B1.5.2): "Thread" (0), "NMI", ..., "SysTick"; 16 and up
// "IRQ<n - 16>"; a RISC-V interrupt (0x8000 | mcause code): "MachineTimer", ...
std::string exception_name(std::uint16_t number);

}  // namespace rackprof::gmon
