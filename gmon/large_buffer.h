// Room for a report of megabytes in one string, its pages mapped before they are written:
// writing 16 MB of fresh memory a 4 KiB page fault at a time is 4096 faults, which on a
// virtual machine can cost as much as formatting the report itself.
#pragma once

#include <cstdint>
#include <string>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace rackprof::gmon {

// Reserves `bytes` more in `out`. When that is a fresh block of a megabyte or more, asks the
// kernel for huge pages where the block holds whole ones (transparent huge pages in "madvise"
// mode) and to map the block's pages now, in one call instead of a fault per page. Only
// hints: where they are refused (older kernels) the string is the same.
inline void reserve_large(std::string& out, std::size_t bytes) {
    const std::size_t before = out.capacity();
    out.reserve(out.size() + bytes);
#if defined(__linux__)
    constexpr std::size_t kPage = 4096;
    constexpr std::size_t kHuge = std::size_t{2} << 20;
    if (out.capacity() == before || out.capacity() < (std::size_t{1} << 20)) return;
    const auto begin = reinterpret_cast<std::uintptr_t>(out.data());
    const std::uintptr_t end = begin + out.capacity();
#if defined(MADV_HUGEPAGE)
    const std::uintptr_t huge_first = (begin + kHuge - 1) & ~(kHuge - 1);
    const std::uintptr_t huge_last = end & ~(kHuge - 1);
    if (huge_last > huge_first) {
        ::madvise(reinterpret_cast<void*>(huge_first), huge_last - huge_first, MADV_HUGEPAGE);
    }
#endif
#if defined(MADV_POPULATE_WRITE)
    const std::uintptr_t first = (begin + kPage - 1) & ~(kPage - 1);
    const std::uintptr_t last = end & ~(kPage - 1);
    if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_POPULATE_WRITE);
#endif
#endif
}

}  // namespace rackprof::gmon
