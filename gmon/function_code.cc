#include "gmon/function_code.h"

#include <algorithm>
#include <cstdio>

namespace rackprof::gmon {

namespace {

// ARM's mapping symbols: `$d` starts data in the code (a literal pool), `$t`/`$a` code again.
std::vector<std::pair<std::uint64_t, bool>> data_marks(const Symbolizer& elf, std::uint64_t low,
                                                       std::uint64_t high) {
    std::vector<std::pair<std::uint64_t, bool>> marks;  // (address, data from here)
    for (const ElfSymbol& s : elf.symbols()) {
        const char* n = s.name.c_str();
        if (!elf.arm() || n[0] != '$' || (n[2] != 0 && n[2] != '.') || s.addr < low ||
            s.addr >= high)
            continue;
        if (n[1] == 'd' || n[1] == 't' || n[1] == 'a') marks.emplace_back(s.addr, n[1] == 'd');
    }
    std::sort(marks.begin(), marks.end());
    return marks;
}

// Data words as objdump shows them in a literal pool.
void add_words(std::vector<Instruction>& out, const std::vector<std::uint8_t>& bytes,
               std::uint64_t addr) {
    for (std::size_t i = 0; i < bytes.size();) {
        char text[32];
        const std::size_t n = bytes.size() - i >= 4 ? 4 : bytes.size() - i >= 2 ? 2 : 1;
        std::uint32_t v = 0;
        for (std::size_t k = n; k-- > 0;) v = (v << 8) | bytes[i + k];
        std::snprintf(text, sizeof text,
                      n == 4   ? ".word 0x%08x"
                      : n == 2 ? ".short 0x%04x"
                               : ".byte 0x%02x",
                      v);
        out.push_back({addr + i, static_cast<std::uint32_t>(n), text});
        i += n;
    }
}

}  // namespace

std::vector<Instruction> function_instructions(const Symbolizer& elf, std::uint64_t low,
                                               std::uint64_t high) {
    const std::vector<std::uint8_t> code = elf.code_bytes(low, high - low);
    if (code.empty()) return {};
    std::vector<std::pair<std::uint64_t, bool>> marks = data_marks(elf, low, high);
    if (marks.empty() || marks.front().first != low) marks.insert(marks.begin(), {low, false});
    std::vector<Instruction> out;
    for (std::size_t m = 0; m < marks.size(); ++m) {
        const std::uint64_t from = marks[m].first;
        const std::uint64_t to = m + 1 < marks.size() ? marks[m + 1].first : high;
        if (to <= from) continue;
        const std::vector<std::uint8_t> piece(code.begin() + static_cast<long>(from - low),
                                              code.begin() + static_cast<long>(to - low));
        if (marks[m].second) {
            add_words(out, piece, from);
        } else {
            for (Instruction& i : disassemble(elf.machine(), from, piece))
                out.push_back(std::move(i));
        }
    }
    return out;
}

}  // namespace rackprof::gmon
