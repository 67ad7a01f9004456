// Linker maps as a symbol source, for firmware whose ELF is not at hand (projects keep the map
// more often): GNU ld's -Map output and TI's ARM linker (armcl/tiarmclang) map files. A map
// gives function names and addresses, sizes where its sections give them, and the code range;
// never source lines.
//
// GNU ld: after "Linker script and memory map", input sections ".text.NAME 0xADDR 0xSIZE
// file" (a section name too long for its column continues on the next line) and the global
// symbols under them ("0xADDR name"). A symbol's size runs to the next symbol in its section or
// the section's end; a function section with no symbol line is a static function of its name.
// "OUTPUT(file elf32-littlearm)" says the machine (ARM code is Thumb on Cortex-M: no bit 0).
// TI: "SECTION ALLOCATION MAP" (input sections "ADDR SIZE file (.text:NAME)" under the .text
// output section) and "GLOBAL SYMBOLS: SORTED BY Symbol Address" ("ADDR name"); a code symbol's
// odd address is a Thumb function (bit 0 cleared).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "gmon/symbolizer.h"

namespace rackprof::gmon {

class LinkerMapError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

struct LinkerMap {
    std::string flavor;              // "GNU ld" or "TI"
    int machine = 0;                 // EM_ARM (40), EM_RISCV (243); 0 when the map does not say
    std::vector<ElfSymbol> symbols;  // code symbols, by address; size 0 where unknown
    std::uint64_t text_addr = 0;     // the .text output section
    std::uint64_t text_size = 0;
    std::uint64_t code_low = 0;  // every code input section's extent
    std::uint64_t code_high = 0;
};

// True when the start of a file reads as a GNU ld or TI linker map.
bool looks_like_linker_map(std::string_view head);

// Throws LinkerMapError when the text is neither map, or names no code symbol.
LinkerMap parse_linker_map(std::string_view text);

}  // namespace rackprof::gmon
