// The call graph the code itself shows, for firmware nobody rebuilt with -pg (a counter
// campaign through a debugger needs one before its first run): every direct call and every
// branch to another function's start (a tail call), read from capstone's disassembly of each
// function. A function whose address appears in the image's data (a vector table, a table of
// handlers, a literal loaded for `blx r3`) may be called from where no instruction names it:
// it is marked, and nothing may bound it by its direct callers alone.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gmon/symbolizer.h"

namespace rackprof::gmon {

struct StaticCallGraph {
    struct Function {
        std::string name;
        std::uint64_t addr = 0;  // the Thumb bit cleared
        std::uint64_t end = 0;   // one past its last byte
        bool address_taken = false;
    };
    std::vector<Function> functions;                         // by address, gprof's symbol set
    std::vector<std::pair<std::size_t, std::size_t>> calls;  // (caller, callee), each once
    std::uint64_t indirect_calls = 0;                        // call sites through a register
};

// Empty (no functions) where capstone does not know the ELF's machine or it holds no code.
StaticCallGraph static_call_graph(const Symbolizer& elf);

}  // namespace rackprof::gmon
