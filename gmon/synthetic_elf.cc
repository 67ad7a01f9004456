#include "gmon/synthetic_elf.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "gmon/symbolizer.h"

namespace rackprof::gmon {

namespace {

struct ElfWriteHandle {
    int fd = -1;
    Elf* elf = nullptr;
    ~ElfWriteHandle() {
        if (elf) elf_end(elf);
        if (fd >= 0) ::close(fd);
    }
};

Elf_Scn* add_section(Elf* elf, std::uint32_t name, std::uint32_t type, std::uint64_t flags,
                     void* bytes, std::size_t size, std::uint32_t addr = 0) {
    Elf_Scn* scn = elf_newscn(elf);
    Elf_Data* data = elf_newdata(scn);
    data->d_buf = bytes;
    data->d_size = size;
    data->d_type = ELF_T_BYTE;
    data->d_align = 1;
    GElf_Shdr shdr;
    gelf_getshdr(scn, &shdr);
    shdr.sh_name = name;
    shdr.sh_type = type;
    shdr.sh_flags = flags;
    shdr.sh_addr = addr;
    shdr.sh_addralign = type == SHT_SYMTAB ? 4 : 1;
    gelf_update_shdr(scn, &shdr);
    return scn;
}

// Appends `name` to a string table; returns its offset.
std::uint32_t add_name(std::string& table, const std::string& name) {
    const auto offset = static_cast<std::uint32_t>(table.size());
    table += name;
    table += '\0';
    return offset;
}

// Code: 0xBF00 (Thumb NOP) fill, so disassemblers see instructions; each function of 4 bytes or
// more starts with a BL (to itself), as a -pg prologue calls mcount, so that entry + 4 is a
// return address after a call, as a capture's arcs report (elf_fit.h).
std::vector<std::uint8_t> text_of(const std::vector<SyntheticFunction>& functions,
                                  std::uint32_t code_low, std::uint32_t code_high) {
    std::vector<std::uint8_t> text(code_high - code_low);
    for (std::size_t i = 0; i + 1 < text.size(); i += 2) {
        text[i] = 0x00;
        text[i + 1] = 0xBF;
    }
    for (const SyntheticFunction& f : functions) {
        if (!f.function || f.size < 4 || f.addr < code_low || f.addr + 4 > code_high) continue;
        static constexpr std::uint8_t kBlToSelf[] = {0xFF, 0xF7, 0xFE, 0xFF};  // bl .
        std::copy(std::begin(kBlToSelf), std::end(kBlToSelf), text.begin() + (f.addr - code_low));
    }
    return text;
}

// The symbol table with its string table: local symbols come first, and `first_global` says
// where the globals start (the table's sh_info).
struct SymbolTable {
    std::vector<Elf32_Sym> syms{1};  // index 0: the null symbol
    std::string strings{std::string(1, '\0')};
    std::uint32_t first_global = 1;
};

SymbolTable symbols_of(const std::vector<SyntheticFunction>& functions, std::uint32_t code_high) {
    SymbolTable t;
    std::vector<SyntheticFunction> all = functions;
    all.push_back({"_etext", code_high, 0, true, false});
    for (bool globals : {false, true}) {
        if (globals) t.first_global = static_cast<std::uint32_t>(t.syms.size());
        for (const SyntheticFunction& f : all) {
            if (f.global != globals) continue;
            Elf32_Sym s{};
            s.st_name = add_name(t.strings, f.name);
            s.st_value = f.function ? f.addr | 1u : f.addr;
            s.st_size = f.size;
            s.st_info = ELF32_ST_INFO(f.global ? STB_GLOBAL : STB_LOCAL,
                                      f.function ? STT_FUNC : STT_NOTYPE);
            s.st_shndx = 1;  // .text
            t.syms.push_back(s);
        }
    }
    return t;
}

// Points the symbol table at its strings and says where its globals start.
void link_symbol_table(Elf_Scn* symtab, Elf_Scn* strings, std::uint32_t first_global) {
    Elf_Data* data = elf_getdata(symtab, nullptr);
    data->d_type = ELF_T_SYM;
    data->d_align = 4;
    GElf_Shdr shdr;
    gelf_getshdr(symtab, &shdr);
    shdr.sh_link = static_cast<std::uint32_t>(elf_ndxscn(strings));
    shdr.sh_info = first_global;
    shdr.sh_entsize = sizeof(Elf32_Sym);
    gelf_update_shdr(symtab, &shdr);
}

}  // namespace

void write_synthetic_elf(const std::filesystem::path& path,
                         const std::vector<SyntheticFunction>& functions, std::uint32_t code_low,
                         std::uint32_t code_high) {
    const std::string where = path.string() + ": ";
    elf_version(EV_CURRENT);
    ElfWriteHandle h;
    h.fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (h.fd < 0) throw ElfError(where + std::strerror(errno));
    h.elf = elf_begin(h.fd, ELF_C_WRITE, nullptr);
    if (!h.elf) throw ElfError(where + elf_errmsg(-1));

    Elf32_Ehdr* ehdr = elf32_newehdr(h.elf);
    ehdr->e_ident[EI_DATA] = ELFDATA2LSB;
    ehdr->e_machine = EM_ARM;
    ehdr->e_type = ET_EXEC;
    ehdr->e_version = EV_CURRENT;
    ehdr->e_flags = 0x05000000;  // EABI version 5

    std::string shstrtab(1, '\0');
    const std::uint32_t text_name = add_name(shstrtab, ".text");
    const std::uint32_t symtab_name = add_name(shstrtab, ".symtab");
    const std::uint32_t strtab_name = add_name(shstrtab, ".strtab");
    const std::uint32_t shstrtab_name = add_name(shstrtab, ".shstrtab");
    std::vector<std::uint8_t> text = text_of(functions, code_low, code_high);
    SymbolTable symbols = symbols_of(functions, code_high);

    add_section(h.elf, text_name, SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, text.data(), text.size(),
                code_low);
    Elf_Scn* symtab = add_section(h.elf, symtab_name, SHT_SYMTAB, 0, symbols.syms.data(),
                                  symbols.syms.size() * sizeof(Elf32_Sym));
    Elf_Scn* strtab_scn = add_section(h.elf, strtab_name, SHT_STRTAB, 0, symbols.strings.data(),
                                      symbols.strings.size());
    Elf_Scn* shstrtab_scn =
        add_section(h.elf, shstrtab_name, SHT_STRTAB, 0, shstrtab.data(), shstrtab.size());
    link_symbol_table(symtab, strtab_scn, symbols.first_global);
    ehdr->e_shstrndx = static_cast<Elf32_Half>(elf_ndxscn(shstrtab_scn));

    if (elf_update(h.elf, ELF_C_WRITE) < 0) throw ElfError(where + elf_errmsg(-1));
}

}  // namespace rackprof::gmon
