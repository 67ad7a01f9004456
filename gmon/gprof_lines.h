// Source lines as GNU gprof finds them. gprof asks BFD's bfd_find_nearest_line for the file,
// function and line of an address (corefile.c get_src_info); its line mode (`gprof -l`) makes
// one symbol per change of those answers. To print what gprof prints, rackprof answers with
// BFD's rules (binutils 2.40 dwarf2.c), not with libdw's lookup, where they differ:
//  - the line program's rows are kept per sequence, the last of several rows at one address
//    wins, sequences are sorted by start and nested or overlapping ones dropped or trimmed
//    (code removed by --gc-sections leaves sequences at address 0);
//  - the function is the smallest DWARF function or inlined subroutine whose range holds the
//    address (the later one in the unit on a tie); its name is its DW_AT_name in C, its
//    linkage name where it has one, and else the nearest preceding ELF symbol of the section,
//    through BFD's one-entry cache and its habit of remembering the first answer per function.
// Those caches make an answer depend on the questions asked before it, so a GprofSourceLookup
// is one gprof run: ask in gprof's order (function symbols in symbol-table order, then every
// .text address upward) for gprof's answers.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gmon/symbolizer.h"

namespace rackprof::gmon {

struct GprofSourceLine {
    std::string file;  // the path as the line table composes it
    std::string function;
    int line = 0;
};

// The DWARF of one ELF, decoded once: units, their line sequences and functions.
class DwarfLineIndex;

class GprofSourceLookup {
  public:
    // Reads the ELF's DWARF (none: every answer is empty). Throws nothing for bad DWARF:
    // what cannot be read answers nothing, as BFD gives up on it.
    explicit GprofSourceLookup(const Symbolizer& elf);
    ~GprofSourceLookup();
    GprofSourceLookup(const GprofSourceLookup&) = delete;
    GprofSourceLookup& operator=(const GprofSourceLookup&) = delete;

    // get_src_info(): the file, function and line of `addr` in .text; empty where gprof's
    // lookup fails (no line row, no name, or line 0).
    std::optional<GprofSourceLine> find(std::uint64_t addr);

    // The addresses in [low, high) where an answer may differ from the one before it (rows,
    // sequences, units' and functions' ranges, ELF symbols and their ends), ascending, `low`
    // first. Between two of them every answer is the same, so gprof's walk over every byte of
    // .text asks only these: the same symbols, in time bounded by the DWARF and symbol table
    // rather than by a .text size an ELF may claim.
    std::vector<std::uint64_t> change_points(std::uint64_t low, std::uint64_t high) const;

  private:
    struct ElfFunctionCache;
    struct ReadState;
    struct Answer;
    const char* elf_function(std::uint64_t addr);
    Answer search(std::uint64_t addr);
    bool ask(std::size_t unit, std::uint64_t addr, Answer& answer);

    const Symbolizer& elf_;
    std::unique_ptr<DwarfLineIndex> index_;
    std::unique_ptr<ElfFunctionCache> cache_;
    std::unique_ptr<ReadState> state_;
};

}  // namespace rackprof::gmon
