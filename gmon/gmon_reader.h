// Reads gmon.out: GNU tagged format, and both BSD layouts (old BSD with a 3-word header and
// 4.4BSD with version 0x51879, which the thesis host program wrote).
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <stdexcept>

#include "gmon/gmon_data.h"

namespace rackprof::gmon {

class GmonFormatError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

// layout: the target's address size and byte order (from its ELF); gmon.out does not say.
GmonData parse_gmon(std::span<const std::uint8_t> bytes, const TargetLayout& layout);
GmonData read_gmon_file(const std::filesystem::path& path, const TargetLayout& layout);

// A gmon.out indexed where it lies (e.g. mapped from its file): its histograms' shapes and
// its arcs are read, its bins are left in place, so a histogram of millions of bins is never
// widened into memory. Histograms with the same range are merged (as merge_duplicates does):
// each keeps where every copy of its bins lies, to be summed bin by bin while they are read.
struct BinsInPlace {
    std::size_t offset = 0;  // of the first 2-byte bin, in the target's byte order
    std::uint64_t count = 0;
};
struct HistogramInPlace {
    Histogram header;  // bins empty: they are in `copies`
    std::uint64_t bins = 0;
    std::vector<BinsInPlace> copies;  // one per histogram record with this range
};
struct GmonIndex {
    TargetLayout layout;
    GmonFormat format = GmonFormat::kGnu;
    std::vector<HistogramInPlace> histograms;  // sorted by low_pc, not overlapping
    std::vector<ArcCount> arcs;                // summed by (from, self), sorted
};
// The same checks as parse_gmon + merge_duplicates; throws GmonFormatError.
GmonIndex index_gmon(std::span<const std::uint8_t> bytes, const TargetLayout& layout);
// Bin `index` of a histogram in place: its copies summed.
std::uint64_t bin_in_place(std::span<const std::uint8_t> bytes, const HistogramInPlace& histogram,
                           std::uint64_t index, ByteOrder order);

// Folds the file's histograms and arcs into an aggregate-equivalent view: arcs summed by
// (from, self); histograms with an identical range summed bin by bin.
GmonData merge_duplicates(GmonData data);

}  // namespace rackprof::gmon
