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

class FunctionIndex {
  public:
    explicit FunctionIndex(const Symbolizer& elf) : symbols_(gprof_symbol_table(elf)) {
        std::sort(symbols_.begin(), symbols_.end(),
                  [](const auto& a, const auto& b) { return a.addr < b.addr; });
    }
    // The function whose range holds `addr` (the Thumb bit ignored), or nullptr.
    const ProfileSymbol* holding(std::uint64_t addr) const {
        addr &= ~std::uint64_t{1};
        auto it =
            std::upper_bound(symbols_.begin(), symbols_.end(), addr,
                             [](std::uint64_t a, const ProfileSymbol& s) { return a < s.addr; });
        if (it == symbols_.begin()) return nullptr;
        --it;
        return addr <= it->end_addr ? &*it : nullptr;
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
