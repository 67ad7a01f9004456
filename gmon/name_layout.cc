#include "gmon/name_layout.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <optional>

#include "gmon/profile.h"

namespace rackprof::gmon {
namespace {

// A build's functions by address, for finding the one holding an address.
struct AddressIndex {
    std::vector<ProfileSymbol> symbols;  // sorted by addr
    explicit AddressIndex(const Symbolizer& elf) : symbols(gprof_symbol_table(elf)) {
        std::sort(symbols.begin(), symbols.end(),
                  [](const auto& a, const auto& b) { return a.addr < b.addr; });
    }
    const ProfileSymbol* holding(std::uint64_t addr) const {
        auto it =
            std::upper_bound(symbols.begin(), symbols.end(), addr,
                             [](std::uint64_t a, const ProfileSymbol& s) { return a < s.addr; });
        if (it == symbols.begin()) return nullptr;
        --it;
        return addr <= it->end_addr ? &*it : nullptr;
    }
};

}  // namespace

std::string NameLayout::fingerprint() const {
    // FNV-1a over names and sizes: a file name, not a security boundary.
    std::uint64_t h = 1469598103934665603ull;
    const auto mix = [&h](std::string_view bytes) {
        for (const unsigned char c : bytes) {
            h ^= c;
            h *= 1099511628211ull;
        }
    };
    for (const auto& f : functions) {
        mix(f.name);
        mix(std::to_string(f.size) + ";");
    }
    char text[17];
    std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(h));
    return text;
}

NameLayout name_layout(const std::vector<std::shared_ptr<const Symbolizer>>& elves) {
    std::map<std::string, std::uint32_t> sizes;
    for (const auto& elf : elves) {
        for (const auto& s : gprof_symbol_table(*elf)) {
            const auto size = static_cast<std::uint32_t>(s.end_addr - s.addr + 1);
            auto& largest = sizes[s.name];
            largest = std::max(largest, (size + 1) & ~1u);
        }
    }
    NameLayout layout;
    std::uint32_t addr = layout.low;
    for (const auto& [name, size] : sizes) {
        layout.index[name] = layout.functions.size();
        layout.functions.push_back({name, addr, std::max<std::uint32_t>(size, 4)});
        addr += layout.functions.back().size;
    }
    layout.high = addr;
    return layout;
}

void merge_by_name(const Aggregate& from, const Symbolizer& elf, const NameLayout& layout,
                   NameMerge& into) {
    const AddressIndex build(elf);
    // The address `addr` of this build in the layout: same function, same offset in it.
    const auto moved = [&](std::uint64_t addr) -> std::optional<std::uint64_t> {
        const ProfileSymbol* s = build.holding(addr & ~std::uint64_t{1});
        if (!s) return std::nullopt;
        const auto it = layout.index.find(s->name);
        if (it == layout.index.end()) return std::nullopt;
        const auto& f = layout.functions[it->second];
        const std::uint64_t offset = std::min<std::uint64_t>(addr - s->addr, f.size - 1);
        return f.addr + offset;
    };
    for (const auto& pc : from.pc_samples()) {
        if (const auto to = moved(pc.pc)) {
            into.aggregate.add_pc(*to, pc.count);
        } else {
            into.samples_outside += pc.count;
        }
    }
    for (const auto& arc : from.arcs()) {
        const auto site = moved(arc.from_pc), target = moved(arc.self_pc);
        if (site && target) {
            into.aggregate.add_arc(*site, *target, arc.count);
        } else {
            into.calls_outside += arc.count;
        }
    }
}

std::shared_ptr<const Symbolizer> layout_elf(const NameLayout& layout,
                                             const std::filesystem::path& folder) {
    std::filesystem::create_directories(folder);
    const auto path = folder / ("by-name-" + layout.fingerprint() + ".elf");
    if (!std::filesystem::exists(path)) {
        // Written beside and renamed: a reader never sees half a file.
        const auto part = folder / ("by-name-" + layout.fingerprint() + ".elf." +
                                    std::to_string(::getpid()) + ".part");
        write_synthetic_elf(part, layout.functions, layout.low, layout.high);
        std::filesystem::rename(part, path);
    }
    return Symbolizer::load(path);
}

}  // namespace rackprof::gmon
