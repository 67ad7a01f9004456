#include "gmon/radix_sort.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

#include "gmon/aggregate.h"

namespace rackprof::gmon {

namespace {

using Item = std::pair<std::uint64_t, std::uint32_t>;  // key, position before sorting

// What the radix sort must give: std::stable_sort's order.
void check_against_stable_sort(std::vector<Item> items) {
    auto expected = items;
    std::stable_sort(expected.begin(), expected.end(),
                     [](const Item& a, const Item& b) { return a.first < b.first; });
    radix_sort_by_key(items, [](const Item& i) { return i.first; });
    CHECK(items == expected);
}

}  // namespace

TEST_CASE("radix_sort_by_key orders as std::stable_sort, whichever digits the keys share") {
    std::mt19937_64 rng(7);
    // Each mask leaves some 16-bit digits constant (skipped passes) and some varying; a fixed
    // high part stands for a Cortex-M address's unused bits.
    const std::uint64_t masks[] = {0xFFFF'FFFF'FFFF'FFFFull, 0x00FF'FFFF'00FF'FFFFull,
                                   0x0000'0000'0000'FFFEull, 0x00FF'0000'00FF'0000ull, 0x3ull};
    for (const std::uint64_t mask : masks) {
        for (const std::size_t n : {0u, 1u, 100u, 4095u, 4096u, 50000u}) {
            std::vector<Item> items(n);
            for (std::uint32_t i = 0; i < n; ++i)
                items[i] = {(rng() & mask) | 0x2000'0000'0000'0000ull, i};
            CAPTURE(mask);
            CAPTURE(n);
            check_against_stable_sort(items);
        }
    }
}

TEST_CASE("an aggregate's arcs and PCs come sorted by address at every size") {
    std::mt19937_64 rng(11);
    for (const std::size_t n : {10u, 5000u, 100000u}) {
        Aggregate a;
        for (std::size_t i = 0; i < n; ++i) {
            a.add_arc((rng() % 0x20000) | 1, (rng() % 0x20000) | 1, 1 + rng() % 9);
            a.add_pc(0x1000 + 2 * (rng() % 0x40000), 1);
        }
        const auto arcs = a.arcs();
        CHECK(arcs.size() == a.distinct_arcs());
        CHECK(std::is_sorted(arcs.begin(), arcs.end(), [](const ArcCount& x, const ArcCount& y) {
            return std::pair(x.from_pc, x.self_pc) < std::pair(y.from_pc, y.self_pc);
        }));
        CHECK(std::adjacent_find(arcs.begin(), arcs.end(), [](const auto& x, const auto& y) {
                  return x.from_pc == y.from_pc && x.self_pc == y.self_pc;
              }) == arcs.end());
        std::uint64_t calls = 0;
        for (const auto& arc : arcs) calls += arc.count;
        CHECK(calls == a.total_calls());
        const auto pcs = a.pc_samples();
        CHECK(pcs.size() == a.distinct_pcs());
        CHECK(std::is_sorted(pcs.begin(), pcs.end(),
                             [](const PcCount& x, const PcCount& y) { return x.pc < y.pc; }));
        std::uint64_t samples = 0;
        for (const auto& pc : pcs) samples += pc.count;
        CHECK(samples == a.total_samples());
    }
}

}  // namespace rackprof::gmon
