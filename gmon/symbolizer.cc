#include "gmon/symbolizer.h"

#include <elfutils/libdw.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>

#include "gmon/elf_arch.h"
#include "gmon/linker_map.h"

namespace rackprof::gmon {

struct Symbolizer::Handles {
    Elf* elf = nullptr;
    Dwarf* dwarf = nullptr;
    ~Handles() {
        if (dwarf) dwarf_end(dwarf);
        if (elf) elf_end(elf);
    }
};

namespace {

// How `nm` (BFD's coff_section_type, then the section flags) classifies a section. A name
// matches an entry only when the entry is followed by the end, '.', '$' or a digit: ".text.foo"
// and ".init" are code, ".init_array" and ".fini_array" are not (they hold data, and a label
// there must not become a function in gprof's symbol table).
char section_class(const char* name, const GElf_Shdr& shdr) {
    static const std::pair<const char*, char> kByName[] = {
        {".bss", 'b'},     {"code", 't'},   {".data", 'd'},   {"*DEBUG*", 'N'},  {".debug", 'N'},
        {".drectve", 'i'}, {".edata", 'e'}, {".fini", 't'},   {".idata", 'i'},   {".init", 't'},
        {".pdata", 'p'},   {".rdata", 'r'}, {".rodata", 'r'}, {".sbss", 's'},    {".scommon", 'c'},
        {".sdata", 'g'},   {".text", 't'},  {"vars", 'd'},    {"zerovars", 'b'},
    };
    for (const auto& [prefix, c] : kByName) {
        const std::size_t n = std::strlen(prefix);
        if (std::strncmp(name, prefix, n) == 0 &&
            (name[n] == '\0' || std::strchr(".$0123456789", name[n]) != nullptr))
            return c;
    }
    if (shdr.sh_flags & SHF_EXECINSTR) return 't';
    return 'd';  // only code ('t') matters to the profile
}

std::string hex(const unsigned char* p, std::size_t n) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out;
    for (std::size_t i = 0; i < n; ++i) {
        out += kDigits[p[i] >> 4];
        out += kDigits[p[i] & 0xF];
    }
    return out;
}

}  // namespace

std::shared_ptr<const Symbolizer> Symbolizer::load(const std::filesystem::path& path) {
    std::shared_ptr<Symbolizer> s(new Symbolizer());
    s->read(path);
    return s;
}

std::shared_ptr<const Symbolizer> Symbolizer::load_map(const std::filesystem::path& path) {
    constexpr std::uintmax_t kMaxMapBytes = 256 << 20;  // a large project's map is a few MB
    std::error_code ec;
    const std::uintmax_t bytes = std::filesystem::file_size(path, ec);
    if (ec) throw ElfError(path.string() + ": " + ec.message());
    if (bytes > kMaxMapBytes) throw ElfError(path.string() + ": a linker map of more than 256 MiB");
    std::ifstream in(path, std::ios::binary);
    std::string text(static_cast<std::size_t>(bytes), '\0');
    if (!in.read(text.data(), static_cast<std::streamsize>(text.size())))
        throw ElfError(path.string() + ": cannot be read");
    LinkerMap map;
    try {
        map = parse_linker_map(text);
    } catch (const LinkerMapError& e) {
        throw ElfError(path.string() + ": " + e.what());
    }
    std::shared_ptr<Symbolizer> s(new Symbolizer());
    s->path_ = path;
    s->symbols_ = std::move(map.symbols);
    s->machine_ = map.machine;
    s->code_low_ = map.code_low;
    s->code_high_ = map.code_high;
    s->text_addr_ = map.text_addr;
    s->text_size_ = map.text_size;
    s->map_flavor_ = map.flavor + " map";
    return s;
}

Symbolizer::~Symbolizer() {
    handles_.reset();
    if (fd_ >= 0) ::close(fd_);
}

// What the symbol table needs from the sections: their nm classes by index, and where the
// symbols and section names are.
struct Symbolizer::SectionFacts {
    std::vector<char> classes;
    Elf_Scn* symtab = nullptr;
    GElf_Shdr symtab_hdr{};
    std::size_t shstrndx = 0;
};

namespace {

// The GNU build-id note of a note section, as lower-case hex, or "".
std::string build_id_in(Elf_Scn* scn) {
    Elf_Data* data = elf_getdata(scn, nullptr);
    GElf_Nhdr nhdr;
    std::size_t offset = 0, name_off = 0, desc_off = 0;
    while (data && (offset = gelf_getnote(data, offset, &nhdr, &name_off, &desc_off)) > 0) {
        const char* note_name = static_cast<const char*>(data->d_buf) + name_off;
        if (nhdr.n_type == NT_GNU_BUILD_ID && nhdr.n_namesz == 4 &&
            std::memcmp(note_name, "GNU", 4) == 0) {
            return hex(static_cast<const unsigned char*>(data->d_buf) + desc_off, nhdr.n_descsz);
        }
    }
    return "";
}

}  // namespace

void Symbolizer::read(const std::filesystem::path& path) {
    path_ = path;
    const std::string where = path.string() + ": ";
    elf_version(EV_CURRENT);
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw ElfError(where + std::strerror(errno));
    handles_ = std::make_unique<Handles>();
    handles_->elf = elf_begin(fd_, ELF_C_READ_MMAP, nullptr);
    Elf* elf = handles_->elf;
    if (!elf || elf_kind(elf) != ELF_K_ELF) throw ElfError(where + "not an ELF file");

    GElf_Ehdr ehdr;
    if (!gelf_getehdr(elf, &ehdr)) throw ElfError(where + "unreadable ELF header");
    machine_ = ehdr.e_machine;
    layout_.addr_bytes = gelf_getclass(elf) == ELFCLASS64 ? 8 : 4;
    layout_.order = ehdr.e_ident[EI_DATA] == ELFDATA2MSB ? ByteOrder::kBig : ByteOrder::kLittle;

    const SectionFacts facts = read_sections(where);
    if (code_high_ == 0) throw ElfError(where + "has no executable code sections");
    if (!facts.symtab) throw ElfError(where + "has no symbol table (stripped?); build without -s");
    read_symbols(facts);
    handles_->dwarf = dwarf_begin_elf(elf, DWARF_C_READ, nullptr);  // null: no DWARF, fine
}

Symbolizer::SectionFacts Symbolizer::read_sections(const std::string& where) {
    Elf* elf = handles_->elf;
    SectionFacts facts;
    if (elf_getshdrstrndx(elf, &facts.shstrndx) != 0)
        throw ElfError(where + "no section name table");
    code_low_ = std::numeric_limits<std::uint64_t>::max();
    code_high_ = 0;
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
        GElf_Shdr shdr;
        if (!gelf_getshdr(scn, &shdr)) continue;
        read_section(scn, elf_strptr(elf, facts.shstrndx, shdr.sh_name), facts, where);
    }
    return facts;
}

// One section's facts: its class, the code range and bytes, .text, the symbol table, the
// build-id.
void Symbolizer::read_section(Elf_Scn* scn, const char* name, SectionFacts& facts,
                              const std::string& where) {
    GElf_Shdr shdr;
    gelf_getshdr(scn, &shdr);
    const std::size_t index = elf_ndxscn(scn);
    if (facts.classes.size() <= index) facts.classes.resize(index + 1, '?');
    facts.classes[index] = section_class(name ? name : "", shdr);
    if ((shdr.sh_flags & SHF_ALLOC) && (shdr.sh_flags & SHF_EXECINSTR) && shdr.sh_size > 0) {
        // An end past the address space would wrap and put code_high below code_low.
        const std::uint64_t limit = layout_.addr_bytes == 8
                                        ? std::numeric_limits<std::uint64_t>::max()
                                        : std::uint64_t{1} << 32;
        if (shdr.sh_addr > limit || shdr.sh_size > limit - shdr.sh_addr)
            throw ElfError(where + "an executable section ends past the address space");
        code_low_ = std::min<std::uint64_t>(code_low_, shdr.sh_addr);
        code_high_ = std::max<std::uint64_t>(code_high_, shdr.sh_addr + shdr.sh_size);
        exec_ranges_.emplace_back(shdr.sh_addr, shdr.sh_addr + shdr.sh_size);
        Elf_Data* data = shdr.sh_type == SHT_PROGBITS ? elf_getdata(scn, nullptr) : nullptr;
        if (data && data->d_buf && data->d_size > 0) {
            // Its instructions, for checking a capture against the code (elf_fit.h).
            const auto* bytes = static_cast<const std::uint8_t*>(data->d_buf);
            code_.push_back({shdr.sh_addr, std::vector<std::uint8_t>(
                                               bytes, bytes + std::min<std::size_t>(
                                                                  data->d_size, shdr.sh_size))});
        }
    }
    if (name && std::strcmp(name, ".text") == 0 && text_index_ == 0) {
        text_addr_ = shdr.sh_addr;  // the first, as BFD's bfd_get_section_by_name finds it
        text_size_ = shdr.sh_size;
        text_index_ = index;
    }
    if (shdr.sh_type == SHT_SYMTAB) {
        facts.symtab = scn;
        facts.symtab_hdr = shdr;
    }
    if (shdr.sh_type == SHT_NOTE && build_id_.empty()) build_id_ = build_id_in(scn);
}

void Symbolizer::read_symbols(const SectionFacts& facts) {
    Elf* elf = handles_->elf;
    if (Elf_Scn* strtab = elf_getscn(elf, facts.symtab_hdr.sh_link)) {
        if (Elf_Data* strings = elf_getdata(strtab, nullptr); strings && strings->d_buf) {
            string_table_.assign(static_cast<const char*>(strings->d_buf), strings->d_size);
        }
    }
    Elf_Data* data = elf_getdata(facts.symtab, nullptr);
    // The entries libelf actually read, not what sh_size / sh_entsize claim: a header saying
    // 2^64 would make this loop run for ever (gelf_getsym refusing every index past the data).
    const std::size_t entry_size =
        gelf_getclass(elf) == ELFCLASS64 ? sizeof(Elf64_Sym) : sizeof(Elf32_Sym);
    const std::size_t count = data && data->d_type == ELF_T_SYM ? data->d_size / entry_size : 0;
    for (std::size_t i = 1; i < count; ++i) {
        GElf_Sym sym;
        if (!gelf_getsym(data, static_cast<int>(i), &sym)) continue;
        int type = GELF_ST_TYPE(sym.st_info);
        if (machine_ == EM_ARM && type == 13) type = STT_FUNC;  // STT_ARM_TFUNC: a Thumb function
        const int bind = GELF_ST_BIND(sym.st_info);
        ElfSymbol s;
        const char* name = elf_strptr(elf, facts.symtab_hdr.sh_link, sym.st_name);
        s.name = name ? name : "";
        if (name && sym.st_name < string_table_.size()) s.name_offset = sym.st_name;
        if (type == STT_SECTION && s.name.empty() && sym.st_shndx < facts.classes.size()) {
            GElf_Shdr shdr;  // BFD names section symbols after their section
            Elf_Scn* scn = elf_getscn(elf, sym.st_shndx);
            if (scn && gelf_getshdr(scn, &shdr)) {
                const char* sname = elf_strptr(elf, facts.shstrndx, shdr.sh_name);
                s.name = sname ? sname : "";
            }
        }
        s.addr = sym.st_value;
        s.size = sym.st_size;
        s.function = type == STT_FUNC;
        s.object = type == STT_OBJECT;
        s.ifunc = type == STT_GNU_IFUNC;
        s.debugging = type == STT_SECTION || type == STT_FILE;
        s.notype = type == STT_NOTYPE;
        s.tls = type == STT_TLS;
        s.hidden = GELF_ST_VISIBILITY(sym.st_other) == STV_HIDDEN;
        s.section = sym.st_shndx;
        s.local = bind == STB_LOCAL;
        s.global = bind == STB_GLOBAL;
        s.weak = bind == STB_WEAK;
        s.defined = sym.st_shndx != SHN_UNDEF && sym.st_shndx != SHN_ABS &&
                    sym.st_shndx != SHN_COMMON && sym.st_shndx < SHN_LORESERVE;
        if (s.defined && sym.st_shndx < facts.classes.size())
            s.section_class = facts.classes[sym.st_shndx];
        if (machine_ == EM_ARM && (s.function || s.ifunc) && (s.addr & 1)) {
            s.addr &= ~std::uint64_t{1};  // Thumb entry points: BFD clears the bit, so do we
            s.thumb = true;
        }
        symbols_.push_back(std::move(s));
    }
}

std::vector<std::uint8_t> Symbolizer::code_bytes(std::uint64_t addr, std::uint64_t size) const {
    for (const CodeSection& c : code_) {
        if (addr < c.addr || addr - c.addr > c.bytes.size() ||
            size > c.bytes.size() - (addr - c.addr))
            continue;
        const auto first = c.bytes.begin() + static_cast<std::ptrdiff_t>(addr - c.addr);
        return {first, first + static_cast<std::ptrdiff_t>(size)};
    }
    return {};
}

std::optional<std::uint16_t> Symbolizer::code_halfword(std::uint64_t addr) const {
    for (const CodeSection& c : code_) {
        if (addr < c.addr || addr - c.addr + 2 > c.bytes.size()) continue;
        const std::size_t i = addr - c.addr;
        const bool big = layout_.order == ByteOrder::kBig && machine_ != EM_ARM;  // BE8: LE code
        return big ? static_cast<std::uint16_t>((c.bytes[i] << 8) | c.bytes[i + 1])
                   : static_cast<std::uint16_t>(c.bytes[i] | (c.bytes[i + 1] << 8));
    }
    return std::nullopt;
}

std::vector<std::pair<std::uint64_t, std::uint64_t>> Symbolizer::code_regions(
    std::uint64_t max_gap) const {
    auto ranges = exec_ranges_;
    if (ranges.empty() && code_high_ > code_low_) ranges.emplace_back(code_low_, code_high_);
    std::sort(ranges.begin(), ranges.end());
    std::vector<std::pair<std::uint64_t, std::uint64_t>> regions;
    for (const auto& r : ranges) {
        if (!regions.empty() && r.first <= regions.back().second + max_gap) {
            regions.back().second = std::max(regions.back().second, r.second);
        } else {
            regions.push_back(r);
        }
    }
    return regions;
}

Dwarf* Symbolizer::dwarf() const {
    return handles_ ? handles_->dwarf : nullptr;
}

std::string_view Symbolizer::section_bytes(const char* name) const {
    Elf* elf = handles_ ? handles_->elf : nullptr;
    std::size_t shstrndx = 0;
    if (!elf || elf_getshdrstrndx(elf, &shstrndx) != 0) return {};
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
        GElf_Shdr shdr;
        if (!gelf_getshdr(scn, &shdr) || shdr.sh_type == SHT_NOBITS) continue;
        const char* section = elf_strptr(elf, shstrndx, shdr.sh_name);
        if (!section || std::strcmp(section, name) != 0) continue;
        // libdw reads compressed debug sections the same way: decompressed in place.
        if ((shdr.sh_flags & SHF_COMPRESSED) && elf_compress(scn, 0, 0) < 0) return {};
        Elf_Data* data = elf_getdata(scn, nullptr);
        if (!data || !data->d_buf) return {};
        return {static_cast<const char*>(data->d_buf), data->d_size};
    }
    return {};
}

std::string Symbolizer::arch() const {
    const char* section = machine_ == EM_ARM ? ".ARM.attributes" : ".riscv.attributes";
    std::string arch = arch_of_attributes(machine_, section_bytes(section));
    return arch.empty() ? machine_family(machine_) : arch;
}

std::vector<std::pair<std::uint64_t, std::string_view>> Symbolizer::loaded_sections() const {
    std::vector<std::pair<std::uint64_t, std::string_view>> out;
    Elf* elf = handles_ ? handles_->elf : nullptr;
    if (!elf) return out;
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
        GElf_Shdr shdr;
        if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_PROGBITS ||
            !(shdr.sh_flags & SHF_ALLOC))
            continue;
        Elf_Data* data = elf_getdata(scn, nullptr);
        if (!data || !data->d_buf) continue;
        out.emplace_back(shdr.sh_addr,
                         std::string_view(static_cast<const char*>(data->d_buf),
                                          std::min<std::size_t>(data->d_size, shdr.sh_size)));
    }
    return out;
}

std::optional<SourceLocation> Symbolizer::source_of(std::uint64_t addr) const {
    Dwarf* dwarf = handles_ ? handles_->dwarf : nullptr;
    if (!dwarf) return std::nullopt;
    Dwarf_Die cu;
    bool found = dwarf_addrdie(dwarf, addr, &cu) != nullptr;
    // Some toolchains write .debug_aranges that libdw rejects; then ask each unit directly,
    // as BFD does.
    for (Dwarf_Off offset = 0, next = 0, header = 0;
         !found && dwarf_nextcu(dwarf, offset, &next, &header, nullptr, nullptr, nullptr) == 0;
         offset = next) {
        found = dwarf_offdie(dwarf, offset + header, &cu) != nullptr && dwarf_haspc(&cu, addr) > 0;
    }
    if (!found) return std::nullopt;
    Dwarf_Line* line = dwarf_getsrc_die(&cu, addr);
    if (!line) return std::nullopt;
    int lineno = 0;
    dwarf_lineno(line, &lineno);
    const char* file = dwarf_linesrc(line, nullptr, nullptr);
    if (!file) return std::nullopt;
    return SourceLocation{file, lineno};
}

}  // namespace rackprof::gmon
