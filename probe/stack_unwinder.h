// Call stacks of a halted Cortex-M target, unwound on the host: the registers and one read of
// stack memory per sample, walked with the firmware ELF's call-frame information by elfutils'
// own unwinder (libdwfl: dwfl_attach_state, dwfl_getthread_frames over .debug_frame), not by a
// CFI interpreter of ours. Where a frame has no CFI (code built without it, a library without
// debug information), its own prologue says where its frame is, as GDB's prologue analyzer
// reads it (thumb_frames.h), or at the sampled pc the epilogue still to run; the sampled
// frame's caller may be in lr.
//
// A stack ends (complete) at the firmware's entry function (the reset handler), at an
// EXC_RETURN value (a handler's stack: the exception is a root of its own, as in the
// calling-context tree) or at a return address of 0. It ends truncated when unwinding fails
// first: no CFI, memory outside what was read, an address in no function, a loop.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace rackprof::probe {

// What one sample read from the target: r0..r15 (DWARF's numbers for ARM; r13 sp, r14 lr,
// r15 pc) and the stack memory from `stack_address` up.
struct TargetStack {
    std::array<std::uint64_t, 16> registers{};
    std::uint64_t stack_address = 0;
    std::string memory;
};

struct UnwoundStack {
    // The sampled pc, then each caller's return address (Thumb bit cleared).
    std::vector<std::uint64_t> pcs;
    // The function holding each (its symbol's address, Thumb bit cleared; 0 for none).
    std::vector<std::uint64_t> functions;
    bool truncated = false;
    std::string stopped;  // why a truncated stack stopped; empty when complete
    // Frames stepped from by their prologue or epilogue, where the ELF has no CFI for them.
    std::size_t frames_without_cfi = 0;
};

class StackUnwinder {
  public:
    // Throws std::runtime_error for a file elfutils cannot read or an ELF that is not ARM.
    explicit StackUnwinder(const std::filesystem::path& elf);
    ~StackUnwinder();
    StackUnwinder(const StackUnwinder&) = delete;
    StackUnwinder& operator=(const StackUnwinder&) = delete;

    // At most `max_frames` frames; deeper stacks are cut there (truncated).
    UnwoundStack unwind(const TargetStack& stack, std::size_t max_frames = 64);
    // The function holding `address` (its symbol's address, Thumb bit cleared), or 0.
    std::uint64_t function_of(std::uint64_t address) const;

    struct State;  // libdwfl's handles and the sample being unwound

  private:
    std::unique_ptr<State> state_;
};

}  // namespace rackprof::probe
