// The rackprof framed protocol v1 (framed-protocol.md): frames are COBS(seq, items, CRC-16)
// followed by a 0x00 delimiter. Here: the checksum, COBS, the item tags and the reference
// encoder (what the target runtime does, used by tests and the simulator).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "protocol/record.h"
#include "protocol/stream_event.h"

namespace rackprof::protocol {

// Version 2 added the ENTER/EXIT items; a target sends 2 only when it sends them, so hosts
// that know version 1 alone refuse those streams (their HELLO and event frames are bad frames,
// counted) and still read every other target. The decoder accepts both.
inline constexpr std::uint8_t kFramedVersion = 1;
inline constexpr std::uint8_t kFramedVersionEvents = 2;
// Version 3 added counter campaigns (COUNTERS, COUNTER_CONFIG, FUNCTION_COUNTS, RUN_TOTALS);
// a target sends 3 only when it takes part in them (HELLO flags bit 4).
inline constexpr std::uint8_t kFramedVersionCounters = 3;
// Version 4 added what a host-side probe link writes (HALTED, STACK): a GDB link samples the
// target through its debugger and records what it saw in this protocol, so its sessions are
// stored, re-decoded and profiled as any other.
inline constexpr std::uint8_t kFramedVersionProbe = 4;
// Version 5 added task switches (TASK_SWITCH, TASK_DELETED): a target running an RTOS says
// which task runs (HELLO flags bit 6).
inline constexpr std::uint8_t kFramedVersionTasks = 5;
// The longest task name a TASK_SWITCH carries.
inline constexpr std::size_t kMaxTaskName = 32;
// The most frames one STACK item carries (so it fits a frame with 4-byte addresses).
inline constexpr std::size_t kMaxStackFrames = 56;
inline constexpr std::uint8_t kFrameDelimiter = 0x00;
inline constexpr std::size_t kMinFrameBody = 5;    // seq, one tag, crc
inline constexpr std::size_t kMaxFrameBody = 254;  // so COBS adds exactly one byte
inline constexpr std::size_t kMaxBuildIdBytes = 20;
inline constexpr std::uint8_t kHelloArcCache = 0x01;       // flags bit 0
inline constexpr std::uint8_t kHelloBlockingDrain = 0x02;  // flags bit 1
inline constexpr std::uint8_t kHelloEvents = 0x04;         // bit 2: ENTER/EXIT items follow
inline constexpr std::uint8_t kHelloCycleCounter = 0x08;   // bit 3: stamps from DWT CYCCNT
inline constexpr std::uint8_t kHelloCounters = 0x10;       // bit 4: takes COUNTER_CONFIG (v3)
inline constexpr std::uint8_t kHelloArch = 0x20;   // bit 5: an arch byte follows the build-id
inline constexpr std::uint8_t kHelloTasks = 0x40;  // bit 6: TASK_SWITCH items follow (v5)

// The HELLO's arch byte: the core's architecture, as the target's compiler knew it.
enum class TargetArch : std::uint8_t {
    kUnknown = 0x00,
    kArmv6m = 0x01,
    kArmv7m = 0x02,
    kArmv7em = 0x03,
    kArmv8mBase = 0x04,
    kArmv8mMain = 0x05,
    kRv32imc = 0x10,
    kRv32imac = 0x11,
};
// "armv7-m", "rv32imac", ...; "" for kUnknown and codes no target sends.
const char* arch_name(std::uint8_t code);
// The code of such a name; 0 (kUnknown) for any other.
std::uint8_t arch_code(std::string_view name);
// The family of an architecture name: "arm" or "riscv" ("" when unknown).
const char* arch_family(std::string_view arch);
// The most functions one COUNTER_CONFIG can name (so it fits a frame with 4-byte addresses).
inline constexpr std::size_t kMaxConfigFunctions = 60;

enum class FramedTag : std::uint8_t {
    kHello = 0x01,
    kArc = 0x02,
    kArcN = 0x03,
    kPc = 0x04,
    kPcN = 0x05,
    kDropped = 0x06,
    kStart = 0x07,
    kStop = 0x08,
    // Version 2: a function entered or left (-finstrument-functions), with a 32-bit cycle
    // stamp; the _IN_HANDLER forms add the exception number (IPSR) it happened in.
    kEnter = 0x09,
    kExit = 0x0A,
    kEnterInHandler = 0x0B,
    kExitInHandler = 0x0C,
    // Version 3: counter campaigns. COUNTER_CONFIG goes host -> target, the others back.
    kCounters = 0x0D,
    kCounterConfig = 0x0E,
    kFunctionCounts = 0x0F,
    kRunTotals = 0x10,
    // Version 4: a probe link's items. HALTED: how long the link held the target halted;
    // STACK: a PC sample with its unwound stack.
    kHalted = 0x11,
    kStack = 0x12,
    // Version 5: an RTOS's task switches.
    kTaskSwitch = 0x13,
    kTaskDeleted = 0x14,
};

inline constexpr bool is_version_known(std::uint8_t version) {
    return version >= kFramedVersion && version <= kFramedVersionTasks;
}

// CRC-16/CCITT-FALSE: poly 0x1021, init 0xFFFF, not reflected, xorout 0.
// Folded with carry-less multiplies where the CPU has them, else by tables.
std::uint16_t crc16_ccitt_false(std::span<const std::uint8_t> data);
// The same by tables alone (what other CPUs run; the tests compare the two).
std::uint16_t crc16_ccitt_false_by_table(std::span<const std::uint8_t> data);

// COBS (Cheshire & Baker): appends the encoding of `data` (no delimiter) to `out`.
void cobs_encode(std::span<const std::uint8_t> data, std::vector<std::uint8_t>& out);
// Decodes one COBS-encoded frame (without its delimiter) into `out` (replacing its content).
// False when it is not valid COBS (a zero byte, or a code pointing past the end).
bool cobs_decode(std::span<const std::uint8_t> encoded, std::vector<std::uint8_t>& out);
// The same for an encoding already known to hold no zero byte (split at delimiters), into
// `out`, which must have room for encoded.size() + kCobsSlack bytes.
// The decoded length, or nothing when a code points past the end.
// `runs`: whether its codes likely come four alike in a row (items of one size with one zero
// each: a sampler's PCs), as the frame before showed; if so they are checked four at once.
// Only the speed depends on it, never the result.
inline constexpr std::size_t kCobsSlack = 16;
enum class CodeRuns : bool { kUnlikely, kLikely };
std::optional<std::size_t> cobs_decode_unchecked(std::span<const std::uint8_t> encoded,
                                                 std::uint8_t* out,
                                                 CodeRuns runs = CodeRuns::kUnlikely);
// Up to kCobsTogether frames at once, each as cobs_decode_unchecked decodes it: a frame's
// codes are a chain of dependent loads, and chains walked side by side take little longer than
// one. encoded[i] is decoded into out[i]; its length, or nothing, goes into sizes[i].
inline constexpr std::size_t kCobsTogether = 2;
void cobs_decode_unchecked_together(std::span<const std::span<const std::uint8_t>> encoded,
                                    std::span<std::uint8_t* const> out,
                                    std::span<std::optional<std::size_t>> sizes,
                                    CodeRuns runs = CodeRuns::kUnlikely);

// Unsigned LEB128, as the counts of ARC_N and PC_N are sent (and, 64-bit, a counter's count).
void put_leb128(std::uint64_t value, std::vector<std::uint8_t>& out);

// Turns items into frames as the target runtime does: items are packed into the open frame
// until the next one would not fit (or flush() is called); each frame gets the next sequence
// number. Output accumulates until taken.
class FramedEncoder {
  public:
    // `max_body`: frames are closed before their body would exceed it (5..254).
    explicit FramedEncoder(int addr_bytes = 4, std::size_t max_body = kMaxFrameBody);

    // A HELLO starts a new frame; later items use its address width. Throws
    // std::invalid_argument for a version, width or build-id the wire cannot carry.
    void hello(const TargetHello& hello);
    // ARC or PC for a count of 1, else ARC_N or PC_N. Addresses are truncated to the width.
    void record(const Record& record);
    void dropped(std::uint32_t total);
    void marker(const ProfilingMarker& marker);
    // ENTER or EXIT (the _IN_HANDLER form when event.exception is not 0). The stamp is sent
    // whole (32 bits); stamp_bits is not on the wire.
    void function_event(const FunctionEvent& event);
    // Counter campaigns (v3). Throws std::invalid_argument for what the wire cannot carry (a
    // counter mask beyond bit 5, more than kMaxConfigFunctions functions).
    void counter_capabilities(const CounterCapabilities& capabilities);
    void counter_config(const CounterConfig& config);
    void function_counts(const FunctionCounts& counts);
    void run_totals(const RunTotals& totals);
    // Probe items (v4). A stack deeper than kMaxStackFrames is cut there and sent truncated.
    void halted(std::uint64_t nanoseconds);
    void stack(const StackSample& sample);
    // Task items (v5). Throws std::invalid_argument for a name longer than kMaxTaskName.
    void task_switch(const TaskSwitch& task);
    void task_deleted(const TaskDeleted& task);
    // Closes the open frame (if it holds any item).
    void flush();
    // A target reset: the open frame is closed and the next one carries sequence number 0.
    void reset();

    std::uint64_t frames() const { return frames_; }
    // Wire bytes of the closed frames since the last take.
    const std::vector<std::uint8_t>& wire() const { return wire_; }
    std::vector<std::uint8_t> take_wire();

  private:
    void add_item(std::span<const std::uint8_t> item);
    void put_address(std::uint32_t addr, std::vector<std::uint8_t>& out) const;

    int addr_bytes_;
    std::size_t max_body_;
    std::uint16_t seq_ = 0;
    std::uint64_t frames_ = 0;
    std::vector<std::uint8_t> body_;  // the open frame: seq and items so far
    std::vector<std::uint8_t> item_;
    std::vector<std::uint8_t> wire_;
};

}  // namespace rackprof::protocol
