#include "campaign/debugger_runs.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "probe/gdb_packet.h"

namespace rackprof::campaign {

namespace {

// GDB's ARM register numbers.
constexpr unsigned kSp = 13, kLr = 14, kPc = 15;
// ARMv7-M system registers (B3.2, C1.6, C1.8).
constexpr std::uint32_t kVtor = 0xE000ED08, kDemcr = 0xE000EDFC, kTrcena = 1u << 24;
constexpr std::uint32_t kDwtCtrl = 0xE0001000, kDwtCyccnt = 0xE0001004;
constexpr std::uint32_t kNoCyccnt = 1u << 25, kCyccntEna = 1u << 0;
// lr at an exception handler's entry (EXC_RETURN), and no return at all (the reset entry).
constexpr std::uint32_t kExcReturn = 0xFFFFFF00;

std::string word_bytes(std::uint32_t v) {
    std::string s(4, '\0');
    for (int i = 0; i < 4; ++i) s[static_cast<std::size_t>(i)] = static_cast<char>(v >> (8 * i));
    return s;
}

std::uint32_t word(probe::GdbClient& gdb, std::uint32_t addr) {
    const std::string bytes = gdb.read_memory(addr, 4);
    const auto v = bytes.size() == 4 ? probe::little_endian_value(bytes) : std::nullopt;
    if (!v) throw probe::ProbeError("the GDB server read short at a word's address");
    return static_cast<std::uint32_t>(*v);
}

void set_word(probe::GdbClient& gdb, std::uint32_t addr, std::uint32_t v) {
    gdb.write_memory(addr, word_bytes(v));
}

std::string hex(std::uint64_t v) {
    char text[24];
    std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(v));
    return text;
}

}  // namespace

DebuggerRuns::DebuggerRuns(probe::GdbClient& gdb, const CallGraph& graph,
                           DebuggerRunOptions options)
    : gdb_(gdb), graph_(graph), options_(std::move(options)) {
    const std::string& arch = gdb_.target().architecture;
    if (!arch.empty() && arch.rfind("arm", 0) != 0)
        throw probe::ProbeError(
            "counter runs through a debugger know Cortex-M only; the server "
            "describes a '" +
            arch + "' target");
    const auto* xpsr = gdb_.target().find("xpsr");
    if (!xpsr) throw probe::ProbeError("the server's target description has no xpsr register");
    xpsr_ = xpsr->number;
    find_counter();
}

CounterMask DebuggerRuns::counters() const {
    return source_ == CycleSource::kNone ? 0 : mask_of(PrimaryCounter::kCyccnt);
}

// What counts cycles: the board's counter where one is named; else the DWT's CYCCNT once
// enabled at the workload's start (QEMU's reads as zero and keeps no bit written).
void DebuggerRuns::find_counter() {
    reset();
    add_breakpoint(options_.from);
    const probe::StopReply stop = gdb_.run_until_stop(options_.run_timeout);
    drop_breakpoint(options_.from);
    const auto pc = static_cast<std::uint32_t>(gdb_.read_register(kPc)) & ~1u;
    if (stop.kind != probe::StopReply::Kind::kStopped || pc != (options_.from & ~1u))
        throw std::runtime_error("the workload's start (" + hex(options_.from) +
                                 ") was not reached: the target stopped at " + hex(pc));
    if (options_.clock) {
        word(gdb_, *options_.clock);  // readable, or ProbeError now
        source_ = CycleSource::kCounter;
        source_text_ =
            "the board's counter at " + hex(*options_.clock) +
            " (32 bits, counting up; its ticks, not the core's cycles, where they differ)";
        return;
    }
    try {
        set_word(gdb_, kDemcr, word(gdb_, kDemcr) | kTrcena);
        const std::uint32_t ctrl = word(gdb_, kDwtCtrl);
        if (!(ctrl & kNoCyccnt)) {
            set_word(gdb_, kDwtCtrl, ctrl | kCyccntEna);
            if (word(gdb_, kDwtCtrl) & kCyccntEna) {
                source_ = CycleSource::kDwt;
                source_text_ = "DWT CYCCNT";
                return;
            }
        }
    } catch (const probe::ProbeTimeout&) {
        throw;
    } catch (const probe::ProbeError&) {  // no such registers: no DWT
    }
    source_text_ =
        "none: calls only (the core has no DWT CYCCNT the debugger can start; name a "
        "free-running counter of the board with --clock)";
}

void DebuggerRuns::reset() {
    if (options_.reset_command) {
        gdb_.monitor(*options_.reset_command);
        return;
    }
    std::uint32_t table = 0;
    try {
        table = word(gdb_, kVtor);
    } catch (const probe::ProbeTimeout&) {
        throw;
    } catch (const probe::ProbeError&) {  // ARMv6-M without VTOR: the table is at 0
    }
    const std::uint32_t sp = word(gdb_, table), entry = word(gdb_, table + 4);
    gdb_.write_register(kSp, sp);
    gdb_.write_register(kLr, 0xFFFFFFFF);
    gdb_.write_register(kPc, entry & ~1u);
    gdb_.write_register(xpsr_, 1u << 24);  // Thumb, thread mode, no flags
    for (const char* name : {"primask", "basepri", "faultmask", "control"}) {
        if (const auto* r = gdb_.target().find(name))
            gdb_.write_register(r->number, 0, r->bits / 8);
    }
}

void DebuggerRuns::start_counter() {
    started_ = true;
    extended_ = 0;
    if (source_ == CycleSource::kDwt) {
        set_word(gdb_, kDemcr, word(gdb_, kDemcr) | kTrcena);
        set_word(gdb_, kDwtCtrl, word(gdb_, kDwtCtrl) | kCyccntEna);
        last_raw_ = word(gdb_, kDwtCyccnt);
    } else if (source_ == CycleSource::kCounter) {
        last_raw_ = word(gdb_, *options_.clock);
    }
}

// Both count up modulo 2^32: the advance since the last stop is the difference modulo 2^32,
// which is right while two stops are less than 2^32 ticks apart (25 s at 168 MHz).
std::uint64_t DebuggerRuns::counter_now() {
    if (!started_ || source_ == CycleSource::kNone) return 0;
    const std::uint32_t raw =
        word(gdb_, source_ == CycleSource::kDwt ? kDwtCyccnt : *options_.clock);
    extended_ += static_cast<std::uint32_t>(raw - static_cast<std::uint32_t>(last_raw_));
    last_raw_ = raw;
    return extended_;
}

void DebuggerRuns::add_breakpoint(std::uint32_t addr) {
    for (auto& [a, refs] : breakpoints_) {
        if (a == addr) {
            ++refs;
            return;
        }
    }
    gdb_.insert_breakpoint(addr, 2);
    breakpoints_.emplace_back(addr, 1);
}

void DebuggerRuns::drop_breakpoint(std::uint32_t addr) {
    for (auto it = breakpoints_.begin(); it != breakpoints_.end(); ++it) {
        if (it->first != addr) continue;
        if (--it->second == 0) {
            gdb_.remove_breakpoint(addr, 2);
            breakpoints_.erase(it);
        }
        return;
    }
}

bool DebuggerRuns::has_breakpoint(std::uint32_t pc) const {
    return std::any_of(breakpoints_.begin(), breakpoints_.end(),
                       [&](const auto& b) { return b.first == pc; });
}

// Off a breakpoint: take it out, execute that one instruction, put it back (a server reports
// the same breakpoint again if resumed on it, as GDB itself knows). False: none there.
bool DebuggerRuns::step_off(std::uint32_t pc) {
    if (!has_breakpoint(pc)) return false;
    gdb_.remove_breakpoint(pc, 2);
    gdb_.step();
    ++stats_.steps;
    gdb_.insert_breakpoint(pc, 2);
    return true;
}

void DebuggerRuns::on_entry(std::size_t function, std::uint64_t now, RunResult& result) {
    const std::size_t slot = slot_of_[function];
    ++result.calls[slot];
    const auto regs = gdb_.read_registers({kSp, kLr, xpsr_});
    const auto sp = static_cast<std::uint32_t>(regs[0]), lr = static_cast<std::uint32_t>(regs[1]);
    Activation a{function, 0, sp, now};
    if (lr >= kExcReturn) {
        if ((regs[2] & 0x1FF) == 0) {  // the reset entry: it never returns; closed at the end
            ++depth_[slot];
            active_.push_back(a);
            return;
        }
        // A handler returns to the instruction it interrupted, stacked at frame + 24 on the
        // stack EXC_RETURN names (bit 2: the process stack).
        std::uint32_t frame = sp;
        if (lr & 4u) {
            const auto* psp = gdb_.target().find("psp");
            if (!psp)
                throw probe::ProbeError(
                    "a handler interrupted code on the process stack, "
                    "and the server describes no psp register");
            frame = static_cast<std::uint32_t>(gdb_.read_register(psp->number));
        }
        a.return_to = word(gdb_, frame + 24) & ~1u;
        a.sp = 0;  // matched by address alone: the interrupted code's stack pointer differs
    } else {
        a.return_to = lr & ~1u;
    }
    ++depth_[slot];
    active_.push_back(a);
    add_breakpoint(a.return_to);
}

void DebuggerRuns::on_return(std::uint32_t pc, std::uint64_t now, RunResult& result) {
    const auto sp = static_cast<std::uint32_t>(gdb_.read_register(kSp));
    // The newest activation that returns here with this stack pointer (a handler's: any).
    for (std::size_t i = active_.size(); i-- > 0;) {
        const Activation& a = active_[i];
        if (a.return_to != pc || (a.sp != 0 && a.sp != sp)) continue;
        const std::size_t slot = slot_of_[a.function];
        if (--depth_[slot] == 0) result.functions[slot].second[0] += now - a.start;
        drop_breakpoint(pc);
        active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(i));
        return;
    }
}

void DebuggerRuns::close_open(std::uint64_t now, RunResult& result) {
    // Outermost first: an activation's time counts once, from its function's outermost entry.
    for (const Activation& a : active_) {
        const std::size_t slot = slot_of_[a.function];
        if (depth_[slot] > 0) {
            result.functions[slot].second[0] += now - a.start;
            depth_[slot] = 0;
        }
    }
    active_.clear();
}

RunResult DebuggerRuns::run(const RunPlan& plan) {
    RunResult result;
    result.run = plan.run;
    slot_of_.assign(graph_.functions.size(), static_cast<std::size_t>(-1));
    for (std::size_t s = 0; s < plan.functions.size(); ++s) {
        slot_of_[plan.functions[s]] = s;
        result.functions.emplace_back(plan.functions[s], CounterValues{});
        result.calls.push_back(0);
    }
    depth_.assign(plan.functions.size(), 0);
    active_.clear();
    started_ = false;
    reset();
    for (std::size_t f : plan.functions) add_breakpoint(graph_.functions[f].addr & ~1u);
    const std::uint32_t from = options_.from & ~1u, until = options_.until & ~1u;
    add_breakpoint(from);
    add_breakpoint(until);
    const auto deadline = std::chrono::steady_clock::now() + options_.run_timeout;
    auto pc = static_cast<std::uint32_t>(gdb_.read_register(kPc)) & ~1u;
    for (bool first = true;; first = false) {
        if (first || has_breakpoint(pc)) {
            ++stats_.stops;
            if (pc == from && !started_) start_counter();
            const std::uint64_t now = counter_now();
            if (pc == until) {
                close_open(now, result);
                result.totals[0] = now;
                break;
            }
            on_return(pc, now, result);
            for (std::size_t f : plan.functions) {
                if ((graph_.functions[f].addr & ~1u) == pc) on_entry(f, now, result);
            }
        }
        if (step_off(pc)) {
            pc = static_cast<std::uint32_t>(gdb_.read_register(kPc)) & ~1u;
            if (has_breakpoint(pc)) continue;  // the step landed on another breakpoint
        }
        pc = run_to_stop(plan.run, deadline);
    }
    for (const auto& [addr, refs] : breakpoints_) gdb_.remove_breakpoint(addr, 2);
    breakpoints_.clear();
    if (!started_)
        throw std::runtime_error("run " + std::to_string(plan.run) + " ended (" + hex(until) +
                                 ") before its workload started (" + hex(from) + ")");
    return result;
}

std::uint32_t DebuggerRuns::run_to_stop(std::uint16_t run,
                                        std::chrono::steady_clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    probe::StopReply stop;
    try {
        stop = gdb_.run_until_stop(std::max(left, std::chrono::milliseconds(1)));
    } catch (const probe::ProbeTimeout&) {
        gdb_.halt();
        throw std::runtime_error("run " + std::to_string(run) + " did not reach its end (" +
                                 hex(options_.until) + ") within " +
                                 std::to_string(options_.run_timeout.count()) + " ms");
    }
    if (stop.kind != probe::StopReply::Kind::kStopped)
        throw std::runtime_error("the target exited before reaching the workload's end (" +
                                 hex(options_.until) + ")");
    return static_cast<std::uint32_t>(gdb_.read_register(kPc)) & ~1u;
}

}  // namespace rackprof::campaign
