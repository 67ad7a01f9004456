// Room for a report of megabytes in one string, backed by huge pages where the kernel offers
// them (Linux transparent huge pages in "madvise" mode): writing 16 MB of fresh memory in
// 4 KiB pages is 4096 page faults, which on a virtual machine cost as much as formatting the
// report itself (a quarter of the text report's time at 10^5 arcs, perf).
#pragma once

#include <cstdint>
#include <string>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace rackprof::gmon {

// Reserves `bytes` more in `out`; when that is a fresh block of megabytes, asks for huge pages
// for it before its pages are first touched. Only a hint: without it, or where it is refused,
// the string is the same.
inline void reserve_large(std::string& out, std::size_t bytes) {
    const std::size_t before = out.capacity();
    out.reserve(out.size() + bytes);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    constexpr std::size_t kHuge = std::size_t{2} << 20;
    if (out.capacity() == before || out.capacity() < 2 * kHuge) return;
    const auto begin = reinterpret_cast<std::uintptr_t>(out.data());
    const std::uintptr_t first = (begin + kHuge - 1) & ~(kHuge - 1);
    const std::uintptr_t last = (begin + out.capacity()) & ~(kHuge - 1);
    if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#endif
}

}  // namespace rackprof::gmon
