// The one road from stored or decoded data to a profile: a ProfileSource (an aggregate, the
// ranges its histogram covers, the sampling rate, the firmware's symbols) becomes gmon data
// (what gmon.out holds), and gmon data with symbols becomes a Profile. Every view — convert,
// demo, the API, the live feed, exports — goes through here, so the code-range rule and the
// histogram shape are decided once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "gmon/aggregate.h"
#include "gmon/gmon_data.h"
#include "gmon/profile.h"
#include "gmon/symbolizer.h"

namespace rackprof::gmon {

using CodeRange = std::pair<std::uint64_t, std::uint64_t>;

struct ProfileSource {
    std::shared_ptr<const Aggregate> aggregate = std::make_shared<Aggregate>();
    std::shared_ptr<const Symbolizer> elf;  // null: addresses only (no Profile)
    // The text range the target announced (a framed HELLO), used when there is no ELF.
    std::optional<CodeRange> announced_range;
    // Histogram shapes to reproduce exactly (an imported gmon.out's ranges, bin counts and
    // rate; none when it had none); unset: one histogram over the code range.
    std::optional<std::vector<HistogramSpec>> histograms;
    std::uint32_t prof_rate = 1000;  // samples per second, when `histograms` is empty
    std::uint32_t bin_bytes = 2;     // bytes per bin, when `histograms` is empty
};

// The code range rule: the ELF's executable range, else the announced text range, else none
// (the PCs seen decide).
std::optional<CodeRange> code_range_of(const ProfileSource& source);

// Executable sections further apart than this get histograms of their own: one histogram
// over flash (0x0800_0000) and RAM functions (0x2000_0000) would be some 200 MiB of empty
// bins. gprof reads several histogram records and credits each as its own.
inline constexpr std::uint64_t kHistogramRegionGap = std::uint64_t{64} << 10;

// The histograms the source's PC samples are binned into: an imported gmon.out's shapes; one
// per code region of the ELF (Symbolizer::code_regions); else one over the announced or
// observed range.
std::vector<HistogramSpec> histogram_specs(const ProfileSource& source);

// The source as gmon.out holds it, in the ELF's byte order and address size (else 32-bit
// little-endian), with the PC samples that fell outside every histogram counted.
BinningResult gmon_data_of(const ProfileSource& source);

// Throws std::invalid_argument without an ELF (functions cannot be named) or when the data
// cannot be profiled.
Profile profile_of(const ProfileSource& source, const GmonData& data,
                   const ProfileOptions& options = {});
Profile profile_of(const ProfileSource& source, const ProfileOptions& options = {});

}  // namespace rackprof::gmon
