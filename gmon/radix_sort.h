// Sorting by a 64-bit key: an LSD radix sort, 16 bits a pass, that skips the digits every key
// shares (addresses of a Cortex-M target use 24 bits or fewer, so an arc's key from << 32 | self
// takes four passes, a PC's two): for 10^6 arcs, far fewer steps than a comparison sort, on
// the path of every gmon.out request.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace rackprof::gmon {

// Sorts `items` by `key(item)` ascending; stable. Small inputs go to std::stable_sort.
template <class T, class KeyOf>
void radix_sort_by_key(std::vector<T>& items, KeyOf key) {
    if (items.size() < 4096) {
        std::stable_sort(items.begin(), items.end(),
                         [&](const T& a, const T& b) { return key(a) < key(b); });
        return;
    }
    std::uint64_t any = 0, all = ~std::uint64_t{0};
    for (const T& item : items) {
        any |= key(item);
        all &= key(item);
    }
    const std::uint64_t varying = any ^ all;  // bits that differ between some two keys
    std::vector<T> sorted(items.size());
    std::vector<std::size_t> starts(65537);
    for (int shift = 0; shift < 64; shift += 16) {
        if (((varying >> shift) & 0xFFFF) == 0) continue;  // every key has this digit
        std::fill(starts.begin(), starts.end(), 0);
        for (const T& item : items) ++starts[((key(item) >> shift) & 0xFFFF) + 1];
        for (std::size_t i = 1; i < starts.size(); ++i) starts[i] += starts[i - 1];
        for (const T& item : items) sorted[starts[(key(item) >> shift) & 0xFFFF]++] = item;
        items.swap(sorted);
    }
}

}  // namespace rackprof::gmon
