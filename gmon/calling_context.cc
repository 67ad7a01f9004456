#include "gmon/calling_context.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace rackprof::gmon {

std::string_view unit_name(ContextUnit unit) {
    return unit == ContextUnit::kSamples ? "samples" : "cycles";
}

std::size_t CallingContextTree::incomplete_nodes() const {
    return static_cast<std::size_t>(
        std::count_if(nodes_.begin(), nodes_.end(), [](const auto& n) { return n.incomplete; }));
}

std::uint32_t CallingContextTree::root(std::uint16_t exception, std::uint32_t task) {
    const auto [it, fresh] =
        roots_.try_emplace({exception, task}, static_cast<std::uint32_t>(nodes_.size()));
    if (fresh) {
        ContextNode n;
        n.exception = exception;
        n.task = task;
        nodes_.push_back(n);
    }
    return it->second;
}

std::uint32_t CallingContextTree::child(std::uint32_t parent, std::uint64_t function) {
    const auto [it, fresh] =
        children_.try_emplace({parent, function}, static_cast<std::uint32_t>(nodes_.size()));
    if (fresh) {
        ContextNode n;
        n.parent = parent;
        n.function = function;
        n.exception = nodes_[parent].exception;
        n.task = nodes_[parent].task;
        nodes_.push_back(n);
    }
    return it->second;
}

void CallingContextTree::add_stored(const ContextNode& node) {
    if (node.parent != kNoParent && node.parent >= nodes_.size())
        throw std::invalid_argument("calling-context node " + std::to_string(nodes_.size()) +
                                    " names parent " + std::to_string(node.parent) +
                                    ", not an earlier node");
    const std::uint32_t index = node.parent == kNoParent ? root(node.exception, node.task)
                                                         : child(node.parent, node.function);
    ContextNode& n = nodes_[index];
    n.calls += node.calls;
    n.inclusive += node.inclusive;
    n.exclusive += node.exclusive;
    n.incomplete = n.incomplete || node.incomplete;
}

void CallingContextTree::sum_inclusive() {
    for (auto& n : nodes_) n.inclusive = n.exclusive;
    for (std::size_t i = nodes_.size(); i-- > 0;) {
        if (nodes_[i].parent != kNoParent)
            nodes_[nodes_[i].parent].inclusive += nodes_[i].inclusive;
    }
}

void CallingContextTree::merge(const CallingContextTree& other) {
    if (other.nodes_.empty()) return;
    if (nodes_.empty()) unit_ = other.unit_;
    if (unit_ != other.unit_)
        throw std::invalid_argument(
            "cannot add sampled stacks to calling contexts measured in cycles");
    std::vector<std::uint32_t> mapped(other.nodes_.size());
    for (std::size_t i = 0; i < other.nodes_.size(); ++i) {
        const ContextNode& o = other.nodes_[i];
        mapped[i] =
            o.parent == kNoParent ? root(o.exception, o.task) : child(mapped[o.parent], o.function);
        ContextNode& n = nodes_[mapped[i]];
        n.calls += o.calls;
        n.inclusive += o.inclusive;
        n.exclusive += o.exclusive;
        n.incomplete = n.incomplete || o.incomplete;
    }
}

CallingContextTree CallingContextTree::task_tree(std::uint32_t task) const {
    CallingContextTree out;
    out.unit_ = unit_;
    const auto found = roots_.find({0, task});
    if (found == roots_.end()) return out;
    std::vector<std::uint32_t> mapped(nodes_.size(), kNoParent);
    for (std::size_t i = found->second; i < nodes_.size(); ++i) {
        ContextNode n = nodes_[i];
        if (i != found->second && (n.parent == kNoParent || mapped[n.parent] == kNoParent))
            continue;  // not under the task's root
        n.parent = i == found->second ? kNoParent : mapped[n.parent];
        n.task = 0;
        mapped[i] = static_cast<std::uint32_t>(out.nodes_.size());
        out.add_stored(n);
    }
    return out;
}

void CallingContextBuilder::on_stack(const protocol::StackSample& sample) {
    if (stats_.events > 0) {
        ++stats_.mixed_ignored;
        return;
    }
    ++stats_.stacks;
    tree_.set_unit(ContextUnit::kSamples);
    std::uint32_t node = tree_.root(sample.exception);
    for (auto f = sample.functions.rbegin(); f != sample.functions.rend(); ++f)
        node = tree_.child(node, *f);
    ContextNode& leaf = tree_.at(node);
    ++leaf.exclusive;
    leaf.incomplete = leaf.incomplete || sample.truncated;
}

void CallingContextBuilder::on_event(const protocol::FunctionEvent& event) {
    if (stats_.stacks > 0) {
        ++stats_.mixed_ignored;
        return;
    }
    ++stats_.events;
    const std::uint32_t mask =
        event.stamp_bits >= 32 ? 0xFFFFFFFFu : (std::uint32_t{1} << event.stamp_bits) - 1;
    advance(event.timestamp, mask, event.exception);
    switch_to(event.exception);
    if (event.enter) {
        enter(active_.back(), event.callee);
    } else {
        exit(active_.back(), event.callee);
    }
}

void CallingContextBuilder::mark_lost(std::uint64_t count) {
    stats_.losses += std::max<std::uint64_t>(count, 1);
    have_stamp_ = false;  // the time across the loss is nobody's
    auto uncertain = [&](std::vector<Frame>& stack) {
        for (auto& frame : stack) {
            frame.uncertain = true;
            tree_.at(frame.node).incomplete = true;
        }
    };
    for (auto& context : active_) {
        uncertain(context.stack);
        context.cut = context.cut || context.running;
    }
    for (auto& [task, stack] : parked_) uncertain(stack);
}

void CallingContextBuilder::on_task_switch(std::uint32_t task, std::uint32_t stamp, bool stamped) {
    ++stats_.task_switches;
    // The time up to the switch is the running frame's (the switch happens in it).
    if (stamped) advance(stamp, 0xFFFFFFFFu, active_.empty() ? 0 : active_.back().exception);
    if (task == task_) return;
    const auto thread = std::find_if(active_.begin(), active_.end(),
                                     [](const Context& c) { return c.exception == 0; });
    std::vector<Frame> outgoing;
    if (thread != active_.end()) {
        outgoing = std::move(thread->stack);
        thread->stack.clear();
    } else if (const auto p = parked_.find(task_); p != parked_.end()) {
        outgoing = std::move(p->second);
        parked_.erase(p);
    }
    if (deleted_running_) {  // the task deleted itself: its frames never return
        for (const auto& frame : outgoing) tree_.at(frame.node).incomplete = true;
        stats_.unfinished_frames += outgoing.size();
        deleted_running_ = false;
    } else if (!outgoing.empty()) {
        parked_[task_] = std::move(outgoing);
    }
    task_ = task;
    if (thread != active_.end()) {
        thread->root = thread_root();
        if (const auto p = parked_.find(task); p != parked_.end()) {
            thread->stack = std::move(p->second);
            parked_.erase(p);
        }
    }
}

void CallingContextBuilder::on_task_deleted(std::uint32_t task) {
    if (task == task_) {
        deleted_running_ = true;
        return;
    }
    const auto p = parked_.find(task);
    if (p == parked_.end()) return;
    for (const auto& frame : p->second) tree_.at(frame.node).incomplete = true;
    stats_.unfinished_frames += p->second.size();
    parked_.erase(p);
}

std::vector<ExceptionInvocations> CallingContextBuilder::invocations() const {
    std::map<std::uint16_t, ExceptionInvocations> all = invocations_;
    for (const auto& context : active_) {
        if (context.exception == 0 || !context.running) continue;
        auto& open = all[context.exception];
        open.exception = context.exception;
        ++open.incomplete;
    }
    std::vector<ExceptionInvocations> out;
    for (auto& [number, inv] : all) out.push_back(std::move(inv));
    return out;
}

std::uint32_t CallingContextBuilder::thread_root() {
    return tree_.root(0, split_by_task_ ? task_ : 0);
}

void CallingContextBuilder::advance(std::uint32_t stamp, std::uint32_t mask,
                                    std::uint16_t next_exception) {
    if (have_stamp_) charge((stamp - last_stamp_) & mask, next_exception);
    last_stamp_ = stamp;
    have_stamp_ = true;
}

CallingContextBuilder::Context CallingContextBuilder::new_context(std::uint16_t exception) {
    Context context{exception, exception == 0 ? thread_root() : tree_.root(exception), {}};
    if (exception == 0) {
        if (const auto p = parked_.find(task_); p != parked_.end()) {
            context.stack = std::move(p->second);
            parked_.erase(p);
        }
    }
    context.cycles = pending_root_cycles_;
    pending_root_cycles_ = 0;
    return context;
}

void CallingContextBuilder::close(Context& context) {
    if (!context.stack.empty()) context.cut = true;  // its exits were lost
    end_context(context);
    if (context.running) record_invocation(context);
}

void CallingContextBuilder::record_invocation(Context& context) {
    if (record_invocations_ && context.exception != 0) {
        auto& inv = invocations_[context.exception];
        inv.exception = context.exception;
        if (context.cut) {
            ++inv.incomplete;
        } else {
            inv.cycles.push_back(context.cycles);
        }
    }
    context.cycles = 0;
    context.running = false;
    context.cut = false;
}

// The cycles since the previous event go to the frame that ran after it.
void CallingContextBuilder::charge(std::uint64_t cycles, std::uint16_t next_exception) {
    if (active_.empty()) return;
    Context& current = active_.back();
    if (!current.stack.empty()) {
        tree_.at(current.stack.back().node).exclusive += cycles;
        current.cycles += cycles;
        return;
    }
    // The current context is outside every function: a returned handler resumes what the
    // next event names (its running frame), or a context just entered runs on its own.
    for (auto it = active_.rbegin(); it != active_.rend(); ++it) {
        if (it->exception != next_exception) continue;
        tree_.at(it->stack.empty() ? it->root : it->stack.back().node).exclusive += cycles;
        it->cycles += cycles;
        return;
    }
    tree_.at(next_exception == 0 ? thread_root() : tree_.root(next_exception)).exclusive += cycles;
    pending_root_cycles_ += cycles;  // the context it starts (switch_to follows)
}

void CallingContextBuilder::switch_to(std::uint16_t exception) {
    if (!active_.empty() && active_.back().exception == exception) return;
    const auto found = std::find_if(active_.begin(), active_.end(),
                                    [&](const Context& c) { return c.exception == exception; });
    if (found != active_.end() || exception == 0) {
        // A return to an interrupted context (thread mode is always at the bottom): whatever
        // was above it has ended.
        const auto keep = found != active_.end() ? found + 1 : active_.begin();
        for (auto it = keep; it != active_.end(); ++it) close(*it);
        active_.erase(keep, active_.end());
        if (!active_.empty()) return;
    } else if (!active_.empty() && active_.back().exception != 0 && active_.back().stack.empty()) {
        // The current handler is outside its functions: it returned (tail chain) rather than
        // being preempted.
        close(active_.back());
        active_.pop_back();
    }
    if (active_.size() == kMaxContexts) {
        close(active_.front());
        active_.erase(active_.begin());
    }
    active_.push_back(new_context(exception));
}

// A context that returned with frames open: their exits were lost.
void CallingContextBuilder::end_context(Context& context) {
    for (const auto& frame : context.stack) {
        tree_.at(frame.node).incomplete = true;
        ++stats_.unfinished_frames;
    }
    context.stack.clear();
}

void CallingContextBuilder::enter(Context& context, std::uint64_t function) {
    const bool under = !context.stack.empty();
    const std::uint32_t parent = under ? context.stack.back().node : context.root;
    if (context.stack.size() == kMaxDepth) {
        ++stats_.too_deep;
        tree_.at(parent).incomplete = true;
        return;
    }
    const bool uncertain = under && context.stack.back().uncertain;
    context.running = true;
    const std::uint32_t node = tree_.child(parent, function);
    ContextNode& n = tree_.at(node);
    ++n.calls;
    n.incomplete = n.incomplete || uncertain;
    context.stack.push_back({node, uncertain});
}

void CallingContextBuilder::exit(Context& context, std::uint64_t function) {
    auto& stack = context.stack;
    auto match = std::find_if(stack.rbegin(), stack.rend(), [&](const Frame& f) {
        return tree_.at(f.node).function == function;
    });
    if (match == stack.rend()) {
        ++stats_.unmatched_exits;  // the time it ran was charged to whatever was running
        tree_.at(stack.empty() ? context.root : stack.back().node).incomplete = true;
        return;
    }
    const std::size_t depth = static_cast<std::size_t>(stack.rend() - match) - 1;
    if (depth + 1 < stack.size()) {
        // Frames above it never saw their exit: their split of its time is unknown.
        for (std::size_t i = depth; i < stack.size(); ++i)
            tree_.at(stack[i].node).incomplete = true;
        stats_.unfinished_frames += stack.size() - depth - 1;
    }
    stack.resize(depth);
    if (stack.empty() && context.running) record_invocation(context);  // the handler returned
}

CallingContextTree CallingContextBuilder::snapshot() const {
    CallingContextTree tree = tree_;
    for (const auto& context : active_) {
        for (const auto& frame : context.stack) tree.at(frame.node).incomplete = true;
    }
    for (const auto& [task, stack] : parked_) {
        for (const auto& frame : stack) tree.at(frame.node).incomplete = true;
    }
    tree.sum_inclusive();
    return tree;
}

namespace {

struct ArcKey {
    std::uint64_t caller;
    std::uint64_t callee;
    auto operator<=>(const ArcKey&) const = default;
};

// Walks every path once, counting a node's inclusive cycles for its arc and its function only
// where they are not already open above it (recursion is counted once per path).
class ArcWalk {
  public:
    explicit ArcWalk(const CallingContextTree& tree) : tree_(tree), kids_(tree.nodes().size()) {
        for (std::size_t i = 0; i < tree.nodes().size(); ++i) {
            if (tree.nodes()[i].parent != kNoParent)
                kids_[tree.nodes()[i].parent].push_back(static_cast<std::uint32_t>(i));
        }
    }

    std::vector<AttributedArc> run() {
        for (std::size_t i = 0; i < tree_.nodes().size(); ++i) {
            if (tree_.nodes()[i].parent == kNoParent) walk(static_cast<std::uint32_t>(i));
        }
        std::vector<AttributedArc> out;
        for (auto& [key, arc] : arcs_) {
            const auto& callee = totals_[key.callee];
            arc.callee_total = callee.cycles;
            arc.callee_calls = callee.calls_from_functions;
            if (key.caller != key.callee && arc.callee_calls > 0) {
                arc.estimated = static_cast<double>(callee.cycles) *
                                static_cast<double>(arc.calls) /
                                static_cast<double>(arc.callee_calls);
            }
            out.push_back(arc);
        }
        return out;
    }

  private:
    struct Total {
        std::uint64_t cycles = 0;
        std::uint64_t calls_from_functions = 0;
    };

    // Iterative: paths can be kMaxDepth deep.
    void walk(std::uint32_t root) {
        struct Step {
            std::uint32_t node;
            std::size_t next_kid;
        };
        std::vector<Step> stack{{root, 0}};
        enter_node(root);
        while (!stack.empty()) {
            Step& top = stack.back();
            if (top.next_kid < kids_[top.node].size()) {
                const std::uint32_t kid = kids_[top.node][top.next_kid++];
                enter_node(kid);
                stack.push_back({kid, 0});
            } else {
                leave_node(top.node);
                stack.pop_back();
            }
        }
    }

    void enter_node(std::uint32_t index) {
        const ContextNode& n = tree_.nodes()[index];
        if (n.parent == kNoParent) return;
        const ContextNode& parent = tree_.nodes()[n.parent];
        if (open_functions_[n.function]++ == 0) totals_[n.function].cycles += n.inclusive;
        if (parent.parent == kNoParent) return;  // entered from a root: no caller function
        const ArcKey key{parent.function, n.function};
        AttributedArc& arc = arcs_[key];
        arc.caller = key.caller;
        arc.callee = key.callee;
        arc.calls += n.calls;
        arc.incomplete = arc.incomplete || n.incomplete;
        if (key.caller != key.callee) totals_[n.function].calls_from_functions += n.calls;
        if (open_arcs_[key]++ == 0) arc.measured += n.inclusive;
    }

    void leave_node(std::uint32_t index) {
        const ContextNode& n = tree_.nodes()[index];
        if (n.parent == kNoParent) return;
        --open_functions_[n.function];
        const ContextNode& parent = tree_.nodes()[n.parent];
        if (parent.parent != kNoParent) --open_arcs_[{parent.function, n.function}];
    }

    const CallingContextTree& tree_;
    std::vector<std::vector<std::uint32_t>> kids_;
    std::map<ArcKey, AttributedArc> arcs_;
    std::map<std::uint64_t, Total> totals_;
    std::map<ArcKey, std::uint32_t> open_arcs_;
    std::map<std::uint64_t, std::uint32_t> open_functions_;
};

}  // namespace

std::vector<AttributedArc> attributed_arcs(const CallingContextTree& tree) {
    return ArcWalk(tree).run();
}

std::string exception_name(std::uint16_t number) {
    static const char* const kNames[16] = {"Thread",       "Reset",      "NMI",        "HardFault",
                                           "MemManage",    "BusFault",   "UsageFault", "Reserved7",
                                           "Reserved8",    "Reserved9",  "Reserved10", "SVCall",
                                           "DebugMonitor", "Reserved13", "PendSV",     "SysTick"};
    // RISC-V targets send 0x8000 | mcause's code for an interrupt (target-fw's runtime): past
    // ARMv7-M's 512 exception numbers, so the two never meet.
    if (number >= 0x8000) {
        switch (number & 0x7FFF) {
            case 3:
                return "MachineSoftware";
            case 7:
                return "MachineTimer";
            case 11:
                return "MachineExternal";
            default:
                return "interrupt" + std::to_string(number & 0x7FFF);
        }
    }
    return number < 16 ? kNames[number] : "IRQ" + std::to_string(number - 16);
}

}  // namespace rackprof::gmon
