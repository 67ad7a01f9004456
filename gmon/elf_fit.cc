#include "gmon/elf_fit.h"

#include <algorithm>
#include <map>

#include "gmon/report.h"

namespace rackprof::gmon {

// A 32-bit Thumb BL/BLX (immediate), or a 16-bit BLX register.
bool call_ends_at(const Symbolizer& elf, std::uint64_t addr) {
    const auto second = elf.code_halfword(addr - 2);
    if (second && (*second & 0xFF87) == 0x4780) return true;  // blx rM
    const auto first = elf.code_halfword(addr - 4);
    // BL: 11110 S imm10, 11 J1 1 J2 imm11; BLX (immediate): 11110 ..., 11 J1 0 J2 ...
    return first && second && (*first & 0xF800) == 0xF000 && (*second & 0xC000) == 0xC000;
}

std::optional<std::uint64_t> mcount_return_in(const Symbolizer& elf, std::uint64_t entry,
                                              std::uint64_t size) {
    // The return address must lie inside the function: at its end it would be the next one's.
    for (std::uint64_t offset = 4; offset <= kPrologueBytes && offset < size; offset += 2) {
        if (!elf.code_halfword(entry + offset - 2)) return std::nullopt;
        if (call_ends_at(elf, entry + offset)) return entry + offset;
    }
    return std::nullopt;
}

bool ElfFit::suspicious() const {
    const bool targets_wrong = targets_off_entry >= 3 && 2 * calls_off_entry > calls;
    const bool pcs_wrong = pcs_off_code >= 5 && 10 * samples_off_code > samples;
    return targets_wrong || pcs_wrong;
}

std::string ElfFit::evidence(const std::string& elf_name) const {
    std::string text = std::to_string(targets_off_entry) + " of " + std::to_string(targets) +
                       " call targets (" + std::to_string(calls_off_entry) + " of " +
                       std::to_string(calls) + " calls) are not at a function entry in " + elf_name;
    if (!examples.empty()) {
        text += " (e.g.";
        for (std::uint64_t a : examples) text += " " + hex_address(a);
        text += ")";
    }
    text += ", " + std::to_string(pcs_off_code) + " of " + std::to_string(pcs) +
            " PC-sample addresses (" + std::to_string(samples_off_code) + " of " +
            std::to_string(samples) + " samples) are on data in its code";
    return text;
}

ElfFit check_elf_fit(const Aggregate& aggregate, const Symbolizer& elf) {
    ElfFit fit;
    const bool arm = elf.arm();
    // Functions by address (Thumb bit already cleared), and the $t/$d mapping symbols.
    std::vector<std::uint64_t> entries;
    std::vector<std::pair<std::uint64_t, bool>> mapping;  // (address, is data)
    for (const ElfSymbol& s : elf.symbols()) {
        if (!s.defined) continue;
        if (s.function) entries.push_back(s.addr);
        if (arm && s.local && (s.name == "$d" || s.name.rfind("$d.", 0) == 0))
            mapping.push_back({s.addr, true});
        if (arm && s.local &&
            (s.name == "$t" || s.name == "$a" || s.name.rfind("$t.", 0) == 0 ||
             s.name.rfind("$a.", 0) == 0))
            mapping.push_back({s.addr, false});
    }
    std::sort(entries.begin(), entries.end());
    std::sort(mapping.begin(), mapping.end());

    if (!entries.empty()) {
        std::map<std::uint64_t, std::uint64_t> targets;  // address -> calls
        for (const ArcCount& a : aggregate.arcs())
            targets[arm ? a.self_pc & ~1ull : a.self_pc] += a.count;
        for (const auto& [self, calls] : targets) {
            ++fit.targets;
            fit.calls += calls;
            const auto next = std::upper_bound(entries.begin(), entries.end(), self);
            bool at_entry = false;
            if (next != entries.begin()) {
                const std::uint64_t entry = *(next - 1);
                const std::uint64_t offset = self - entry;
                // Without code contents (or on another machine) the prologue rule alone.
                at_entry = offset == 0 ||
                           (offset <= kPrologueBytes &&
                            (!arm || !elf.code_halfword(self - 2) || call_ends_at(elf, self)));
            }
            if (!at_entry) {
                ++fit.targets_off_entry;
                fit.calls_off_entry += calls;
                if (fit.examples.size() < 3) fit.examples.push_back(self);
            }
        }
    }
    std::vector<PcCount> sorted;
    for (const PcCount& p : aggregate.pc_samples(sorted)) {
        if (p.pc < elf.code_low() || p.pc >= elf.code_high()) continue;
        ++fit.pcs;
        fit.samples += p.count;
        bool on_data = arm && (p.pc & 1);
        if (!on_data && !mapping.empty()) {
            const auto next =
                std::upper_bound(mapping.begin(), mapping.end(), std::pair{p.pc, true});
            on_data = next != mapping.begin() && (next - 1)->second;
        }
        if (on_data) {
            ++fit.pcs_off_code;
            fit.samples_off_code += p.count;
        }
    }
    return fit;
}

}  // namespace rackprof::gmon
