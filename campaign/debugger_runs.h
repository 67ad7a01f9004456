// A counter campaign's runs through a debug probe (the ARC paper's own method, §3.5: counters
// read by a debugger at breakpoints): per run, the target is reset, breakpoints go on the entries
// of the plan's functions and on the workload's start and end, and at each entry a breakpoint on
// the return address (matched by the stack pointer, so recursion and several call sites are
// told apart). A function's inclusive count is the cycle counter's advance from its outermost
// entry to that activation's return; its calls are its entries. The run's total is the advance
// from the workload's start (`from`, main) to its end (`until`); time before the start is not
// counted. No firmware change: a `gdb://` link.
//
// The cycle counter: a free-running 32-bit up-counter of the board where one is named (a timer
// register; QEMU's MPS2 boards have one in their FPGA block), else the core's DWT CYCCNT,
// enabled by the host at the workload's start, else calls only. SysTick is not offered: it
// wraps every 2^24 cycles at most, unseen between two stops. Nor are the DWT's other counters:
// 8 bits wide, they wrap unseen between two stops.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "campaign/planner.h"
#include "probe/gdb_client.h"

namespace rackprof::campaign {

enum class CycleSource { kNone, kDwt, kCounter };

struct DebuggerRunOptions {
    std::uint32_t from = 0;   // the workload's start (main): counting starts there
    std::uint32_t until = 0;  // the workload's end: reaching this address ends a run
    // A server command that resets the core and leaves it halted ("reset halt" on OpenOCD,
    // "system_reset" on QEMU); none: the core restarts from its vector table's reset entry
    // (registers only, so peripherals keep their state).
    std::optional<std::string> reset_command;
    std::chrono::milliseconds run_timeout{60'000};  // per run
    // A free-running 32-bit up-counter of the board to count with instead of the DWT's.
    std::optional<std::uint32_t> clock;
};

struct DebuggerRunStats {
    std::uint64_t stops = 0;  // breakpoint stops, over every run
    std::uint64_t steps = 0;  // single steps off a breakpoint
};

class DebuggerRuns {
  public:
    // Runs the workload to its start once and finds the cycle counter there; throws
    // probe::ProbeError for a target that is not a Cortex-M or a server gone,
    // std::runtime_error for a workload that does not start in time.
    DebuggerRuns(probe::GdbClient& gdb, const CallGraph& graph, DebuggerRunOptions options);

    CycleSource source() const { return source_; }
    CounterMask counters() const;  // CYCCNT where cycles are counted, else none
    // "DWT CYCCNT", "the board's counter at ...", "none: calls only (...)".
    std::string source_text() const { return source_text_; }
    // Runs the workload once for `plan`: its functions' inclusive cycles and calls, and the
    // run's total cycles. Throws probe::ProbeError (the server) or std::runtime_error (a run
    // that does not reach its end in time, or ends before it starts).
    RunResult run(const RunPlan& plan);
    const DebuggerRunStats& stats() const { return stats_; }

  private:
    struct Activation {
        std::size_t function;
        std::uint32_t return_to;
        std::uint32_t sp;
        std::uint64_t start;
    };
    void reset();
    void find_counter();  // resets the core, runs it to `from` and looks there
    void start_counter();
    std::uint64_t counter_now();  // cycles since start_counter(), extended over wraps
    bool has_breakpoint(std::uint32_t pc) const;
    bool step_off(std::uint32_t pc);
    // Lets the target run to its next stop by the run's deadline; its pc.
    std::uint32_t run_to_stop(std::uint16_t run, std::chrono::steady_clock::time_point deadline);
    void on_entry(std::size_t function, std::uint64_t now, RunResult& result);
    void on_return(std::uint32_t pc, std::uint64_t now, RunResult& result);
    void close_open(std::uint64_t now, RunResult& result);
    void add_breakpoint(std::uint32_t addr);
    void drop_breakpoint(std::uint32_t addr);

    probe::GdbClient& gdb_;
    const CallGraph& graph_;
    DebuggerRunOptions options_;
    CycleSource source_ = CycleSource::kNone;
    std::string source_text_ = "none: calls only";
    bool started_ = false;  // the run has reached `from`: the counter counts
    unsigned xpsr_ = 0;     // GDB's number for xPSR, from the target description
    std::uint64_t last_raw_ = 0;
    std::uint64_t extended_ = 0;
    std::vector<Activation> active_;
    std::vector<int> depth_;            // by plan slot: activations open
    std::vector<std::size_t> slot_of_;  // by function: its slot in the run's plan, or npos
    std::vector<std::pair<std::uint32_t, int>> breakpoints_;  // address, references
    DebuggerRunStats stats_;
};

}  // namespace rackprof::campaign
