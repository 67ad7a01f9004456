// Instructions of a firmware image, decoded by capstone (Debian's libcapstone): Thumb and
// Thumb-2 for Cortex-M (ARMv6-M to ARMv8-M), and x86-64 for host programs profiled with glibc.
// capstone's C headers reach no other file; rackprof keeps no opcode table of its own.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace rackprof::gmon {

struct Instruction {
    // What an instruction does to the flow of control, as far as a call graph cares.
    enum class Flow : std::uint8_t {
        kNext,  // falls through (or returns, or branches through a register)
        kCall,  // a call: bl, blx, call
        kJump,  // a branch to an address in the instruction: b, cbz, jmp, jcc
    };
    std::uint64_t addr = 0;
    std::uint32_t size = 0;
    std::string text;  // "subs r0, #1"; ".short 0xbf00" where the bytes decode to nothing
    Flow flow = Flow::kNext;
    // A call's or a jump's destination where the instruction names it; 0 for one through a
    // register (blx r3, call *%rax), whose destination only the running program knows.
    std::uint64_t target = 0;
};

// The instructions of `bytes`, code of ELF machine `machine` (EM_ARM, EM_X86_64) loaded at
// `addr`, in address order. Bytes that do not decode (literal pools, data) are shown a halfword
// at a time as `.short`. Empty where capstone does not know the machine.
std::vector<Instruction> disassemble(int machine, std::uint64_t addr,
                                     std::span<const std::uint8_t> bytes);

// "capstone 4.0" (for reports and --version).
std::string disassembler_version();

}  // namespace rackprof::gmon
