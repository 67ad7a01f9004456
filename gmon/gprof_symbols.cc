// gprof's symbol table: which ELF symbols it keeps and how it orders, de-duplicates and
// bounds them (binutils gprof: corefile.c core_sym_class, symtab.c symtab_finalize).
#include <algorithm>
#include <cctype>
#include <cstring>
#include <stdexcept>

#include "gmon/profile.h"

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

std::vector<ProfileSymbol> gprof_symbol_table(const Symbolizer& elf) {
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

    // Functions before other labels, globals before statics; otherwise symbol-table order.
    std::stable_sort(table.begin(), table.end(),
                     [](const ProfileSymbol& l, const ProfileSymbol& r) {
                         if (l.addr != r.addr) return l.addr < r.addr;
                         if (l.is_func != r.is_func) return l.is_func;
                         return !l.is_static && r.is_static;
                     });

    // One symbol per address, preferring global, then function, then fewer leading underscores.
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
        if (!out.empty()) out.back().end_addr = src.addr - 1;
        out.push_back(std::move(src));
    }
    out.back().end_addr = elf.text_addr() + elf.text_size() - 1;
    return out;
}

}  // namespace rackprof::gmon
