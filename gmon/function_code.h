// The instructions of a piece of an ELF's code, as objdump shows them: capstone's decoding
// where the code is code, and data words where ARM's mapping symbols ($d) mark a literal pool.
#pragma once

#include <cstdint>
#include <vector>

#include "gmon/disassembler.h"
#include "gmon/symbolizer.h"

namespace rackprof::gmon {

// [low, high) of `elf`'s code; empty where no executable section holds all of it.
std::vector<Instruction> function_instructions(const Symbolizer& elf, std::uint64_t low,
                                               std::uint64_t high);

}  // namespace rackprof::gmon
