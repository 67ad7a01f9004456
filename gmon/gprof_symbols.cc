// gprof's symbol table: which ELF symbols it keeps and how it orders, de-duplicates and
// bounds them (binutils gprof: corefile.c core_sym_class, symtab.c symtab_finalize).
#include <algorithm>
#include <cctype>
#include <cstring>
#include <stdexcept>

#include "gmon/profile.h"

#include "gmon/gprof_lines.h"

namespace rackprof::gmon {

namespace {

// What `nm` would print for the symbol's class; gprof keeps 'T', 'W' and (filtered) 't'.
char symbol_class(const ElfSymbol& s) {
    if (!s.defined) return 'U';
    if (s.ifunc) return 'i';
    if (s.weak) return s.object ? 'V' : 'W';
    if (!s.global && !s.local) return '?';
    const char c = s.section_class;
    return s.global ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
}

bool has_prefix(const char* name, const char* prefix) {
    return std::strncmp(name, prefix, std::strlen(prefix)) == 0;
}

// Static names gprof rejects: empty, with '$', or with '.' unless it is a nested-function
// (".NNN") or a GCC clone (".clone.N", ".constprop.N") suffix. A name that ends in such a
// suffix makes gprof's scan step past its terminating NUL and go on into the next string of
// the string table, whose characters then decide; `text` holds the name and what follows it.
bool acceptable_static_name(const std::string& name, const char* text, const char* end) {
    if (name.empty()) return false;
    auto left = [&](const char* p) { return static_cast<std::size_t>(end - p); };
    auto starts = [&](const char* p, const char* prefix) {
        const std::size_t n = std::strlen(prefix);
        return left(p) > n && std::strncmp(p, prefix, n) == 0 && std::strlen(p) > n;
    };
    for (const char* p = text; p < end && *p; ++p) {
        if (*p == '$') return false;
        while (p < end && *p == '.') {
            bool digit_seen = false;
            if (starts(p, ".clone.")) {
                p += 6;
            } else if (starts(p, ".constprop.")) {
                p += 10;
            }
            for (++p; p < end && *p; ++p) {
                if (digit_seen && *p == '.') break;
                if (!std::isdigit(static_cast<unsigned char>(*p))) return false;
                digit_seen = true;
            }
        }
        if (p >= end) break;
    }
    return !has_prefix(name.c_str(), "__gnu_compiled") &&
           !has_prefix(name.c_str(), "___gnu_compiled");
}

// 0: not a function to gprof; 'T': global; 't': static.
char gprof_class(const ElfSymbol& s, const std::string& strtab) {
    if (!s.defined || s.debugging) return 0;
    const char c = symbol_class(s);
    if (c == 'T' || c == 'W') return 'T';
    if (c != 't') return 0;
    if (s.name_offset == std::string::npos) {
        return acceptable_static_name(s.name, s.name.c_str(), s.name.c_str() + s.name.size() + 1)
                   ? 't'
                   : 0;
    }
    const char* text = strtab.data() + s.name_offset;
    return acceptable_static_name(s.name, text, strtab.data() + strtab.size()) ? 't' : 0;
}

}  // namespace

namespace {

// The symbols gprof keeps, in symbol-table order (core_create_function_syms' second pass).
std::vector<ProfileSymbol> selected_symbols(const Symbolizer& elf) {
    if (elf.text_size() == 0)
        throw std::invalid_argument(elf.path().string() + ": no .text section");
    std::vector<ProfileSymbol> table;
    for (const ElfSymbol& s : elf.symbols()) {
        const char c = gprof_class(s, elf.string_table());
        if (!c) continue;
        ProfileSymbol p;
        p.name = s.name;
        p.addr = s.addr;
        p.is_static = c == 't';
        p.is_func = s.function;
        table.push_back(std::move(p));
    }
    if (table.empty())
        throw std::invalid_argument(elf.path().string() + " has no function symbols");
    return table;
}

// symtab_finalize() on a table sorted by address: one symbol per address, preferring global,
// then function, then fewer leading underscores; a symbol without an end ends where the next
// starts (or .text ends), and one whose given end lies below its start is dropped.
std::vector<ProfileSymbol> finalized(std::vector<ProfileSymbol> table, const Symbolizer& elf,
                                     bool* shrunk = nullptr) {
    const std::size_t given = table.size();
    std::vector<ProfileSymbol> out;
    for (ProfileSymbol& src : table) {
        if (!out.empty() && out.back().addr == src.addr) {
            const ProfileSymbol& dst = out.back();
            const bool same_static = src.is_static == dst.is_static;
            const bool same_func = src.is_func == dst.is_func;
            const char* sn = src.name.c_str();
            const char* dn = dst.name.c_str();
            const bool fewer_underscores =
                (sn[0] != '_' && dn[0] == '_') ||
                (sn[0] == '_' && dn[0] == '_' && sn[1] != '_' && dn[1] == '_');
            if ((!src.is_static && dst.is_static) ||
                (same_static &&
                 ((src.is_func && !dst.is_func) || (same_func && fewer_underscores)))) {
                out.back() = std::move(src);
            }
            continue;
        }
        if (!out.empty() && out.back().end_addr == 0) out.back().end_addr = src.addr - 1;
        if (src.end_addr == 0 || src.addr <= src.end_addr) out.push_back(std::move(src));
    }
    // Line mode's second pass drops symbols whose end lies below their start (those past .text
    // end there); gprof then reads before its table. None left: nothing to profile.
    if (out.empty())
        throw std::invalid_argument(elf.path().string() + " has no function symbol in .text");
    if (out.back().end_addr == 0) out.back().end_addr = elf.text_addr() + elf.text_size() - 1;
    if (shrunk) *shrunk = out.size() < given;
    return out;
}

// cmp_addr(): by address; functions before other labels, globals before statics; otherwise
// as they came (glibc's qsort is a merge sort).
void sort_functions(std::vector<ProfileSymbol>& table) {
    std::stable_sort(table.begin(), table.end(),
                     [](const ProfileSymbol& l, const ProfileSymbol& r) {
                         if (l.addr != r.addr) return l.addr < r.addr;
                         if (l.is_func != r.is_func) return l.is_func;
                         return !l.is_static && r.is_static;
                     });
}

// sym_lookup() (symtab.c): the symbol holding an address, or none in a gap.
const ProfileSymbol* symbol_at(const std::vector<ProfileSymbol>& table, std::uint64_t addr) {
    auto it = std::upper_bound(table.begin(), table.end(), addr,
                               [](std::uint64_t a, const ProfileSymbol& s) { return a < s.addr; });
    if (it == table.begin()) return nullptr;
    --it;
    return addr <= it->end_addr ? &*it : nullptr;
}

// core_create_line_syms()' walk: a symbol wherever the file, function or line of a .text
// address changes. gprof asks every byte (its minimum instruction size is 1); the answers
// change only at the lookup's change points, so asking those makes the same symbols.
std::vector<ProfileSymbol> line_symbols(const Symbolizer& elf,
                                        const std::vector<ProfileSymbol>& functions,
                                        GprofSourceLookup& lookup) {
    std::vector<ProfileSymbol> lines;
    const std::uint64_t end = elf.text_addr() + elf.text_size();
    for (const std::uint64_t addr : lookup.change_points(elf.text_addr(), end)) {
        auto at = lookup.find(addr);
        if (!at) continue;
        const ProfileSymbol* prev = lines.empty() ? nullptr : &lines.back();
        if (prev && prev->line == at->line && prev->name == at->function && prev->file == at->file)
            continue;
        ProfileSymbol sym;
        sym.name = std::move(at->function);
        sym.file = std::move(at->file);
        sym.line = at->line;
        sym.addr = addr;
        sym.is_func = false;
        if (prev && prev->file == sym.file && prev->name == sym.name) {
            sym.is_static = prev->is_static;
        } else if (const ProfileSymbol* f = symbol_at(functions, addr)) {
            sym.is_static = f->is_static;
        }
        lines.push_back(std::move(sym));
    }
    return lines;
}

}  // namespace

std::vector<ProfileSymbol> gprof_symbol_table(const Symbolizer& elf, bool* shrunk) {
    std::vector<ProfileSymbol> table = selected_symbols(elf);
    sort_functions(table);
    return finalized(std::move(table), elf, shrunk);
}

std::vector<ProfileSymbol> gprof_line_symbol_table(const Symbolizer& elf, bool* shrunk) {
    GprofSourceLookup lookup(elf);
    std::vector<ProfileSymbol> functions = selected_symbols(elf);
    for (ProfileSymbol& f : functions) {
        if (auto at = lookup.find(f.addr)) {
            f.file = std::move(at->file);
            f.line = at->line;
        }
    }
    sort_functions(functions);
    functions = finalized(std::move(functions), elf);
    std::vector<ProfileSymbol> table = line_symbols(elf, functions, lookup);
    table.insert(table.end(), functions.begin(), functions.end());
    sort_functions(table);
    return finalized(std::move(table), elf, shrunk);
}

}  // namespace rackprof::gmon
