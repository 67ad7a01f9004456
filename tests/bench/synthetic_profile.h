// A profile of a given size for the benchmarks: 2000 functions of random sizes, `arcs` distinct
// arcs among them (call sites anywhere in the caller) and 10^5 sampled PCs — what a large
// firmware image run for a long time looks like to the profile pipeline.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "gmon/aggregate.h"
#include "gmon/synthetic_elf.h"

namespace rackprof::bench {

struct SyntheticProfile {
    std::vector<gmon::SyntheticFunction> functions;
    std::uint32_t low = 0x1000;  // the text range the functions fill
    std::uint32_t high = 0x1000;
    gmon::Aggregate aggregate;

    void write_elf(const std::filesystem::path& path) const {
        gmon::write_synthetic_elf(path, functions, low, high);
    }
};

inline SyntheticProfile synthetic_profile(std::size_t arcs, std::size_t pcs = 100000) {
    std::mt19937_64 rng(1);
    SyntheticProfile p;
    std::uint32_t addr = p.low;
    for (int i = 0; i < 2000; ++i) {
        const auto size = 2 * static_cast<std::uint32_t>(16 + rng() % 200);
        p.functions.push_back({"function_" + std::to_string(i), addr, size});
        addr += size;
    }
    p.high = addr;
    const auto& f = p.functions;
    while (p.aggregate.distinct_arcs() < arcs) {
        const auto& from = f[rng() % f.size()];
        const auto& to = f[rng() % f.size()];
        p.aggregate.add_arc(
            (from.addr + 2 * static_cast<std::uint32_t>(rng() % (from.size / 2))) | 1, to.addr | 1,
            1 + rng() % 1000);
    }
    for (std::size_t i = 0; i < pcs; ++i)
        p.aggregate.add_pc(p.low + 2 * (rng() % ((p.high - p.low) / 2)), 1 + rng() % 50);
    return p;
}

// The sizes an --arcs option lists: "10000,100000" -> {10000, 100000}.
inline std::vector<std::size_t> size_list(const std::string& text) {
    std::vector<std::size_t> sizes;
    for (std::size_t at = 0; at < text.size();) {
        const auto comma = std::min(text.find(',', at), text.size());
        sizes.push_back(std::strtoull(text.substr(at, comma - at).c_str(), nullptr, 10));
        at = comma + 1;
    }
    return sizes;
}

}  // namespace rackprof::bench
