// Does a capture belong to this ELF? Without a build-id to compare, the capture is checked
// against the firmware's code itself. mcount (gcc -pg) reports as an arc's `self` the return
// address of the `bl __gnu_mcount_nc` in the callee's prologue, and -finstrument-functions the
// function's address; a PC sample is the address of an instruction. So in the right ELF:
//  - every call target (an arc's self address) is a function's entry, or lies within the
//    first kPrologueBytes of a function right after a call instruction (Thumb BL or BLX);
//  - no PC sample inside the code lands on data ($d: a literal pool) or an odd address.
// The thesis' blinky capture fits blinky.elf exactly (10 of 10 targets at entry + 12, after the
// BL) and shield.elf not at all (0 of 10), as the thesis' shield gmon.out fits shield.elf
// (27 of 27) and not blinky.elf.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gmon/aggregate.h"
#include "gmon/symbolizer.h"

namespace rackprof::gmon {

inline constexpr std::uint64_t kPrologueBytes = 64;

struct ElfFit {
    std::uint64_t targets = 0;            // distinct call targets (arcs' self addresses)
    std::uint64_t targets_off_entry = 0;  // ... not at a function entry (see above)
    std::uint64_t calls = 0;              // calls to them (arc counts)
    std::uint64_t calls_off_entry = 0;    // ... to targets off entry
    std::uint64_t pcs = 0;                // distinct PC-sample addresses in the ELF's code
    std::uint64_t pcs_off_code = 0;       // ... on data ($d) or odd
    std::uint64_t samples = 0;            // samples at them
    std::uint64_t samples_off_code = 0;   // ... at addresses on data or odd
    std::vector<std::uint64_t> examples;  // a few of the call targets off entry

    // Most calls go to targets off entry (3 or more of them), or over a tenth of the samples
    // (at 5 or more addresses) are on data. A right ELF has none of either; damaged records
    // (a flipped bit makes a target of its own) are few calls and samples, so counts decide.
    bool suspicious() const;
    // "10 of 10 call targets (26440 of 26440 calls) are not at a function entry in shield.elf
    // (e.g. 0x4fc ...), 5 of 37 PC-sample addresses (... samples) are on data in its code"
    std::string evidence(const std::string& elf_name) const;
};

ElfFit check_elf_fit(const Aggregate& aggregate, const Symbolizer& elf);

// The instruction that ends at `addr` in the ELF's code is a call (Thumb BL/BLX immediate, or
// BLX register): `addr` is a return address.
bool call_ends_at(const Symbolizer& elf, std::uint64_t addr);

// Where mcount's `self` lies for the function at `entry` of `size` bytes: the return address
// of the first call in its first kPrologueBytes (the -pg prologue's `bl __gnu_mcount_nc`);
// none when it makes none there (not built with -pg) or the code is not in the ELF.
std::optional<std::uint64_t> mcount_return_in(const Symbolizer& elf, std::uint64_t entry,
                                              std::uint64_t size);

}  // namespace rackprof::gmon
