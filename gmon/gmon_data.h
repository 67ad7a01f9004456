// The contents of a gmon.out file, independent of which of its formats it came in.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gmon/aggregate.h"

namespace rackprof::gmon {

enum class ByteOrder { kLittle, kBig };

// How the target lays out addresses: gmon.out uses the target's order and size, not the host's.
struct TargetLayout {
    int addr_bytes = 4;  // 4 (32-bit targets) or 8
    ByteOrder order = ByteOrder::kLittle;
    friend bool operator==(const TargetLayout&, const TargetLayout&) = default;
};

struct Histogram {
    std::uint64_t low_pc = 0;           // first address covered
    std::uint64_t high_pc = 0;          // one past the last address covered
    std::uint32_t prof_rate = 1000;     // samples per second
    std::string dimension = "seconds";  // at most 15 characters on the wire
    char dimension_abbrev = 's';
    std::vector<std::uint64_t> bins;  // wide: a bin can hold more than 65535 samples

    double bin_bytes() const {
        return bins.empty() ? 0.0 : static_cast<double>(high_pc - low_pc) / bins.size();
    }
    std::uint64_t total() const;
};

enum class GmonFormat { kGnu, kBsd, kBsd44 };

struct GmonData {
    TargetLayout layout;
    GmonFormat format = GmonFormat::kGnu;
    std::vector<Histogram> histograms;
    std::vector<ArcCount> arcs;
};

// How PC samples are binned into a histogram.
struct HistogramSpec {
    std::uint64_t low_pc = 0;
    std::uint64_t high_pc = 0;
    std::uint32_t bin_bytes = 2;  // Thumb instructions are 2-byte aligned
    std::uint32_t prof_rate = 1000;
    // An exact bin count over [low_pc, high_pc) (a gmon.out read elsewhere may have bins of a
    // fractional width); 0: bins of bin_bytes, the range rounded up to whole bins.
    std::uint64_t bins = 0;
    friend bool operator==(const HistogramSpec&, const HistogramSpec&) = default;
};

// The exact shape of a histogram read from a gmon.out, to bin samples into it again.
HistogramSpec shape_of(const Histogram& histogram);
// The address a sample in bin `index` of `spec` is kept at, so binning it again puts it back
// into the same bin.
std::uint64_t bin_address(const HistogramSpec& spec, std::uint64_t index);

// The histogram range for observed PCs when no ELF tells the code range.
HistogramSpec observed_range(const Aggregate& aggregate, std::uint32_t bin_bytes,
                             std::uint32_t prof_rate);

// The histogram rackprof writes for an aggregate: the ELF's executable range when it is
// known (code_low/code_high), else the PCs seen. Every gmon.out producer uses this, so the
// CLI and the API give the same bytes for the same data.
HistogramSpec histogram_spec(const Aggregate& aggregate,
                             std::optional<std::pair<std::uint64_t, std::uint64_t>> code_range,
                             std::uint32_t bin_bytes = 2, std::uint32_t prof_rate = 1000);

struct BinningResult {
    GmonData data;
    std::uint64_t samples_outside = 0;  // PC samples outside the histogram range (not binned)
};

// Bins the aggregate's PC samples and copies its arcs.
BinningResult to_gmon_data(const Aggregate& aggregate, const HistogramSpec& spec,
                           const TargetLayout& layout);
// The same over several non-overlapping histograms (an imported gmon.out may have more).
BinningResult to_gmon_data(const Aggregate& aggregate, const std::vector<HistogramSpec>& specs,
                           const TargetLayout& layout);

}  // namespace rackprof::gmon
