// A build's functions (gprof's symbol table) by address: which function holds an address.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gmon/aggregate.h"
#include "gmon/profile.h"
#include "gmon/symbolizer.h"

namespace rackprof::gmon {

// The symbol of `symbols` (sorted by address) whose range holds `addr`, the Thumb bit ignored;
// nullptr in a gap.
inline const ProfileSymbol* symbol_holding(const std::vector<ProfileSymbol>& symbols,
                                           std::uint64_t addr) {
    addr &= ~std::uint64_t{1};
    auto it = std::upper_bound(symbols.begin(), symbols.end(), addr,
                               [](std::uint64_t a, const ProfileSymbol& s) { return a < s.addr; });
    if (it == symbols.begin()) return nullptr;
    --it;
    return addr <= it->end_addr ? &*it : nullptr;
}

// An arc's call instruction: the byte just before its return address (`from_pc`), which lies
// inside the call whatever its length (the Thumb bit of an ARM return address cleared first).
inline std::uint64_t call_site_of(const Symbolizer& elf, std::uint64_t from_pc) {
    return (elf.arm() ? from_pc & ~std::uint64_t{1} : from_pc) - 1;
}

class FunctionIndex {
  public:
    explicit FunctionIndex(const Symbolizer& elf) : symbols_(gprof_symbol_table(elf)) {
        std::sort(symbols_.begin(), symbols_.end(),
                  [](const auto& a, const auto& b) { return a.addr < b.addr; });
    }
    // The function whose range holds `addr` (the Thumb bit ignored), or nullptr.
    const ProfileSymbol* holding(std::uint64_t addr) const {
        return symbol_holding(symbols_, addr);
    }

    bool empty() const { return symbols_.empty(); }
    const std::vector<ProfileSymbol>& symbols() const { return symbols_; }  // by address

  private:
    std::vector<ProfileSymbol> symbols_;
};

// An aggregate's PC samples by the function holding each PC (samples in none are left out):
// a function's self samples without building its profile.
inline std::map<std::string, std::uint64_t> samples_by_function(const Aggregate& aggregate,
                                                                const Symbolizer& elf) {
    const FunctionIndex index(elf);
    std::map<std::string, std::uint64_t> out;
    for (const auto& pc : aggregate.pc_samples()) {
        if (const auto* f = index.holding(pc.pc)) out[f->name] += pc.count;
    }
    return out;
}

}  // namespace rackprof::gmon
