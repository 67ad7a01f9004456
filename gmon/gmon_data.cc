#include "gmon/gmon_data.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace rackprof::gmon {

std::uint64_t Histogram::total() const {
    return std::accumulate(bins.begin(), bins.end(), std::uint64_t{0});
}

namespace {

// A range from untrusted input (PCs decoded from garbage, a target's HELLO) may span the whole
// address space: 2^31 two-byte bins would be 16 GiB in memory. Past this many bins the bins get
// wider instead (gprof takes any even bin size), so a histogram stays a few MiB.
constexpr std::uint64_t kMaxBins = std::uint64_t{1} << 22;

HistogramSpec bounded(std::uint64_t low, std::uint64_t high, std::uint32_t bin_bytes,
                      std::uint32_t prof_rate) {
    std::uint64_t bin = bin_bytes;
    while ((high - low) / bin > kMaxBins) bin *= 2;
    return {low / bin * bin, (high + bin - 1) / bin * bin, static_cast<std::uint32_t>(bin),
            prof_rate};
}

}  // namespace

HistogramSpec observed_range(const Aggregate& aggregate, std::uint32_t bin_bytes,
                             std::uint32_t prof_rate) {
    const auto pcs = aggregate.pc_samples();
    if (pcs.empty()) return {0, 0, bin_bytes, prof_rate};
    return bounded(pcs.front().pc, pcs.back().pc + 1, bin_bytes, prof_rate);
}

HistogramSpec histogram_spec(const Aggregate& aggregate,
                             std::optional<std::pair<std::uint64_t, std::uint64_t>> code_range,
                             std::uint32_t bin_bytes, std::uint32_t prof_rate) {
    if (!code_range) return observed_range(aggregate, bin_bytes, prof_rate);
    if (code_range->second <= code_range->first) return {0, 0, bin_bytes, prof_rate};
    return bounded(code_range->first, code_range->second, bin_bytes, prof_rate);
}

BinningResult to_gmon_data(const Aggregate& aggregate, const HistogramSpec& spec,
                           const TargetLayout& layout) {
    if (spec.bin_bytes == 0 || spec.bin_bytes % 2 != 0) {
        // gprof measures addresses in 2-byte units; an odd bin size cannot be represented.
        throw std::invalid_argument("histogram bin size must be a positive even number of bytes");
    }
    BinningResult result;
    result.data.layout = layout;
    result.data.format = GmonFormat::kGnu;
    result.data.arcs = aggregate.arcs();

    const auto pcs = aggregate.pc_samples();
    if (spec.high_pc > spec.low_pc) {
        Histogram h;
        h.low_pc = spec.low_pc;
        const std::uint64_t nbins =
            (spec.high_pc - spec.low_pc + spec.bin_bytes - 1) / spec.bin_bytes;
        h.high_pc = spec.low_pc + nbins * spec.bin_bytes;
        h.prof_rate = spec.prof_rate;
        h.bins.assign(nbins, 0);
        for (const PcCount& p : pcs) {
            if (p.pc >= h.low_pc && p.pc < h.high_pc) {
                h.bins[(p.pc - h.low_pc) / spec.bin_bytes] += p.count;
            } else {
                result.samples_outside += p.count;
            }
        }
        result.data.histograms.push_back(std::move(h));
    } else {
        for (const PcCount& p : pcs) result.samples_outside += p.count;
    }
    return result;
}

}  // namespace rackprof::gmon
