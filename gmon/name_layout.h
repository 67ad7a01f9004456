// Profiles of different builds merged by function name: every build's functions laid out once,
// by name, in one canonical address space (a synthetic ELF of those names), and each build's
// aggregate moved into it — a PC keeps its offset inside its function, a call site its offset
// inside its caller. The merged aggregate then goes down the one profile pipeline like any
// other (gmon.out, reports, exports), with the canonical ELF as its firmware.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gmon/aggregate.h"
#include "gmon/symbolizer.h"
#include "gmon/synthetic_elf.h"

namespace rackprof::gmon {

struct NameLayout {
    std::vector<SyntheticFunction> functions;  // by name; each as large as its largest build's
    std::uint32_t low = 0x1000, high = 0x1000;
    std::map<std::string, std::size_t> index;  // name -> functions[i]
    // A name for the layout's ELF file: the same functions give the same name.
    std::string fingerprint() const;
};

// The functions (gprof's symbol table) of every ELF, matched by name.
NameLayout name_layout(const std::vector<std::shared_ptr<const Symbolizer>>& elves);

struct NameMerge {
    Aggregate aggregate;
    std::uint64_t samples_outside = 0;  // PC samples in no function of their build
    std::uint64_t calls_outside = 0;    // calls whose site or target is in no function
};

// Adds `from` (addresses of `elf`) into `into`, in the layout's addresses.
void merge_by_name(const Aggregate& from, const Symbolizer& elf, const NameLayout& layout,
                   NameMerge& into);

// The layout's ELF in `folder` (written once; the same layout reuses the file), loaded.
std::shared_ptr<const Symbolizer> layout_elf(const NameLayout& layout,
                                             const std::filesystem::path& folder);

}  // namespace rackprof::gmon
