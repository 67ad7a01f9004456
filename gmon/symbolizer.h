// The firmware image: symbols, code range, build-id and source lines of one ELF file,
// read with elfutils (libelf for symbols and notes, libdw for DWARF line tables).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gmon/gmon_data.h"

struct Elf_Scn;  // libelf's section handle (libelf.h stays out of this header)
struct Dwarf;    // libdw's handle (libdw.h too)

namespace rackprof::gmon {

class ElfError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

// One .symtab entry, with the facts gprof's symbol selection needs.
struct ElfSymbol {
    std::string name;
    std::uint64_t addr = 0;  // the Thumb bit of ARM function symbols is cleared, as BFD does
    std::uint64_t size = 0;
    bool thumb = false;
    bool local = false;
    bool global = false;
    bool weak = false;
    bool function = false;     // STT_FUNC
    bool object = false;       // STT_OBJECT
    bool defined = false;      // in a real section (not undefined, absolute or common)
    bool debugging = false;    // section and file symbols (BFD's BSF_DEBUGGING)
    bool ifunc = false;        // STT_GNU_IFUNC
    char section_class = '?';  // 't' for code sections, as `nm` classifies them
    std::size_t section = 0;   // st_shndx
    bool notype = false;       // STT_NOTYPE: a label
    bool tls = false;          // STT_TLS
    bool hidden = false;       // STV_HIDDEN
    std::size_t name_offset = std::string::npos;  // where the name starts in string_table()
};

struct SourceLocation {
    std::string file;
    int line = 0;
};

class Symbolizer {
  public:
    // Throws ElfError with a message naming the file for anything that is not a usable ELF.
    static std::shared_ptr<const Symbolizer> load(const std::filesystem::path& path);
    // The same from a linker map (GNU ld or TI: gmon/linker_map.h) where no ELF is at hand:
    // function names, addresses, sizes where the map gives them, the code range; no code bytes
    // and no source lines. Throws ElfError naming the file.
    static std::shared_ptr<const Symbolizer> load_map(const std::filesystem::path& path);
    // "GNU ld map" or "TI map" when the symbols came from a map; empty for an ELF.
    const std::string& map_flavor() const { return map_flavor_; }
    ~Symbolizer();
    Symbolizer(const Symbolizer&) = delete;
    Symbolizer& operator=(const Symbolizer&) = delete;

    const std::filesystem::path& path() const { return path_; }
    const std::vector<ElfSymbol>& symbols() const { return symbols_; }
    // The raw .strtab the symbol names come from (gprof's name checks read past a name's end).
    const std::string& string_table() const { return string_table_; }
    const TargetLayout& layout() const { return layout_; }
    int machine() const { return machine_; }                   // EM_ARM == 40
    bool arm() const { return machine_ == 40; }                // EM_ARM: Thumb code, $d pools
    const std::string& build_id() const { return build_id_; }  // lower-case hex, may be empty
    // "armv7-m", "rv32imac", ... from its build attributes (elf_arch.h); else its machine's
    // family ("arm", "riscv", "x86-64") or "".
    std::string arch() const;
    // Lowest and one-past-highest address of the allocated executable sections.
    std::uint64_t code_low() const { return code_low_; }
    std::uint64_t code_high() const { return code_high_; }
    // Where code lies: the executable sections' ranges merged wherever less than `max_gap`
    // bytes apart, ascending (flash and RAM functions are two regions).
    std::vector<std::pair<std::uint64_t, std::uint64_t>> code_regions(std::uint64_t max_gap) const;
    // The section named ".text", which gprof requires: {address, size}; size 0 if absent.
    std::uint64_t text_addr() const { return text_addr_; }
    std::uint64_t text_size() const { return text_size_; }
    std::size_t text_index() const { return text_index_; }  // its section index; 0: none

    // libdw's view of the ELF's DWARF; null without one (or from a map).
    Dwarf* dwarf() const;
    // The contents of the first section of this name (decompressed); empty if none.
    std::string_view section_bytes(const char* name) const;

    // Every allocated section with contents (code, read-only and initialised data): its
    // address and bytes, as the image loads them.
    std::vector<std::pair<std::uint64_t, std::string_view>> loaded_sections() const;
    // The 16-bit unit of code at addr (instruction byte order), where an executable section's
    // contents hold it; none elsewhere (no contents, data sections, outside every section).
    std::optional<std::uint16_t> code_halfword(std::uint64_t addr) const;
    // The code bytes of [addr, addr + size) as the image holds them, where one executable
    // section holds all of them; empty otherwise.
    std::vector<std::uint8_t> code_bytes(std::uint64_t addr, std::uint64_t size) const;

    // The source file and line of an address, where DWARF line tables cover it.
    std::optional<SourceLocation> source_of(std::uint64_t addr) const;

  private:
    Symbolizer() = default;
    void read(const std::filesystem::path& path);
    // The steps of read(): sections first, since symbols refer to them by index.
    struct SectionFacts;
    SectionFacts read_sections(const std::string& where);
    void read_section(Elf_Scn* scn, const char* name, SectionFacts& facts,
                      const std::string& where);
    void read_symbols(const SectionFacts& facts);

    std::filesystem::path path_;
    int fd_ = -1;
    struct Handles;
    std::unique_ptr<Handles> handles_;
    std::vector<ElfSymbol> symbols_;
    struct CodeSection {
        std::uint64_t addr = 0;
        std::vector<std::uint8_t> bytes;
    };
    std::vector<CodeSection> code_;  // executable sections' contents
    std::string string_table_;
    TargetLayout layout_;
    int machine_ = 0;
    std::string build_id_;
    std::uint64_t code_low_ = 0;
    std::uint64_t code_high_ = 0;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> exec_ranges_;  // [low, high) each
    std::uint64_t text_addr_ = 0;
    std::uint64_t text_size_ = 0;
    std::size_t text_index_ = 0;
    std::string map_flavor_;
};

}  // namespace rackprof::gmon
