// Facts a wire may carry beside records: who the target is, console text, profiling markers,
// function entries and exits.
// Decoders whose format has none never emit them.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace rackprof::protocol {

// The framed protocol's HELLO: what the target says about itself after reset.
struct TargetHello {
    std::uint8_t version = 0;
    std::uint8_t addr_bytes = 4;
    std::uint8_t flags = 0;  // bit 0: arc cache on; bit 1: blocking drain
    std::uint32_t text_lo = 0;
    std::uint32_t text_hi = 0;
    std::uint32_t sample_hz = 0;
    std::uint32_t core_clock_hz = 0;
    std::vector<std::uint8_t> build_id;
    std::uint8_t arch = 0;  // TargetArch (framed_format.h); 0: not said (flags bit 5 clear)
    friend bool operator==(const TargetHello&, const TargetHello&) = default;
};

// Text the target printed (e.g. ITM stimulus port 0), as received.
struct ConsoleText {
    std::uint16_t port = 0;
    std::string text;
    friend bool operator==(const ConsoleText&, const ConsoleText&) = default;
};

// rackprof_start() / rackprof_stop() on the target.
struct ProfilingMarker {
    bool start = true;
    friend bool operator==(const ProfilingMarker&, const ProfilingMarker&) = default;
};

// A function entered or left, as -finstrument-functions reports it (orbuculum's orbstat words
// on an ITM port; the framed protocol's ENTER/EXIT items): for calling-context views, which
// arcs alone cannot give.
struct FunctionEvent {
    bool enter = true;
    std::uint32_t call_site = 0;   // the return address in the caller
    std::uint32_t callee = 0;      // the function's address
    std::uint32_t timestamp = 0;   // the target's cycle stamp, wrapping at 2^stamp_bits
    std::uint8_t stamp_bits = 24;  // orbstat words carry 24 bits; the framed protocol 32
    // 0 in thread mode; in a handler, the exception number (IPSR): each exception is a root of
    // its own in the calling-context tree, not a callee of whatever it interrupted.
    std::uint16_t exception = 0;
    friend bool operator==(const FunctionEvent&, const FunctionEvent&) = default;
};

// FunctionEvents may be missing here: the framed decoder saw frames lost (by sequence number)
// or the target reported items it dropped (DROPPED grew) in a stream that carries events.
// `count`: the frames lost plus the items dropped at this point (not how many events: a lost
// frame's contents are unknown). The calling contexts open across it are incomplete.
struct EventsLost {
    std::uint32_t count = 0;
    friend bool operator==(const EventsLost&, const EventsLost&) = default;
};

// Counter campaigns (framed protocol v3). The primary counters by their bit in a counter mask:
// ARMv7-M's DWT CYCCNT (bit 0), CPICNT, EXCCNT, SLEEPCNT, LSUCNT, FOLDCNT (bit 5). Counts are
// indexed by bit; only those of bits set in `counters` are meaningful.
inline constexpr int kPrimaryCounters = 6;
using CounterValues = std::array<std::uint64_t, kPrimaryCounters>;

// COUNTERS (target -> host): the primary counters the core has and how many functions one run
// can measure (the target's table of per-function accumulators).
struct CounterCapabilities {
    std::uint8_t counters = 0;
    std::uint8_t slots = 0;
    friend bool operator==(const CounterCapabilities&, const CounterCapabilities&) = default;
};

// COUNTER_CONFIG (host -> target): run `run` measures these functions' inclusive counts of
// these counters.
struct CounterConfig {
    std::uint16_t run = 0;
    std::uint8_t counters = 0;
    std::vector<std::uint32_t> functions;  // addresses, as the target's symbols give them
    friend bool operator==(const CounterConfig&, const CounterConfig&) = default;
};

// FUNCTION_COUNTS (target -> host): one function's inclusive counts over a run (from each
// outermost entry to its exit), and how many times it was entered.
struct FunctionCounts {
    std::uint16_t run = 0;
    std::uint8_t counters = 0;
    std::uint32_t function = 0;
    std::uint64_t calls = 0;
    CounterValues counts{};
    friend bool operator==(const FunctionCounts&, const FunctionCounts&) = default;
};

// RUN_TOTALS (target -> host): the end of a run: its whole-run counts and how many
// FUNCTION_COUNTS it sent before this.
struct RunTotals {
    std::uint16_t run = 0;
    std::uint8_t counters = 0;
    std::uint8_t functions = 0;
    CounterValues counts{};
    friend bool operator==(const RunTotals&, const RunTotals&) = default;
};

// STACK (v4, a probe link): one PC sample and the functions on the stack when it was taken,
// unwound on the host from the target's registers and stack memory. `functions[0]` is the
// function holding `pc`, each next one its caller. `truncated`: unwinding stopped before the
// outermost frame (no CFI, memory not read, a loop), so the path lacks its outer callers.
// Sampled: it counts time by samples, never calls.
struct StackSample {
    std::uint32_t pc = 0;
    std::uint16_t exception = 0;  // 0 in thread mode, else the IPSR number (a root of its own)
    bool truncated = false;
    std::vector<std::uint32_t> functions;
    friend bool operator==(const StackSample&, const StackSample&) = default;
};

// TASK_SWITCH (v5): an RTOS switched a task in. What follows in the stream, until the next
// switch, is that task's. `name` is sent the first time a task runs (empty afterwards).
struct TaskSwitch {
    std::uint32_t task = 0;   // the task's handle (its TCB's address)
    std::uint32_t stamp = 0;  // the clock of FunctionEvent stamps, wrapping at 2^32
    std::string name;
    friend bool operator==(const TaskSwitch&, const TaskSwitch&) = default;
};

// TASK_DELETED (v5): the task is gone; its handle may come back as another task.
struct TaskDeleted {
    std::uint32_t task = 0;
    std::uint32_t stamp = 0;
    friend bool operator==(const TaskDeleted&, const TaskDeleted&) = default;
};

using StreamEvent = std::variant<TargetHello, ConsoleText, ProfilingMarker, FunctionEvent,
                                 EventsLost, CounterCapabilities, CounterConfig, FunctionCounts,
                                 RunTotals, StackSample, TaskSwitch, TaskDeleted>;

}  // namespace rackprof::protocol
