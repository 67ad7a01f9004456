#include "gmon/gmon_data.h"

#include <algorithm>
#include <iterator>
#include <numeric>
#include <optional>
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
    std::vector<PcCount> sorted;
    const auto pcs = aggregate.pc_samples(sorted);
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

HistogramSpec shape_of(const Histogram& h) {
    HistogramSpec spec{h.low_pc, h.high_pc, 2, h.prof_rate, h.bins.size()};
    return spec;
}

namespace {

// Exact-count bins: bin i covers [low + ceil(i*R/n), low + ceil((i+1)*R/n)) for a range of R
// bytes in n bins (n <= R), which is what gprof's scaling does to a bin's first address.
__extension__ typedef unsigned __int128 Wide;  // R * n needs more than 64 bits

std::uint64_t exact_bin_of(const HistogramSpec& spec, std::uint64_t pc) {
    const std::uint64_t range = spec.high_pc - spec.low_pc;
    return static_cast<std::uint64_t>(static_cast<Wide>(pc - spec.low_pc) * spec.bins / range);
}

struct Layout {
    std::uint64_t low = 0, high = 0, nbins = 0;
};

Layout layout_of(const HistogramSpec& spec) {
    if (spec.high_pc <= spec.low_pc) return {};
    if (spec.bins) return {spec.low_pc, spec.high_pc, spec.bins};
    const std::uint64_t nbins = (spec.high_pc - spec.low_pc + spec.bin_bytes - 1) / spec.bin_bytes;
    return {spec.low_pc, spec.low_pc + nbins * spec.bin_bytes, nbins};
}

// The first range (in the given order) that holds a PC. An imported gmon.out may have tens of
// thousands of histograms: ranges that do not overlap (all but made-up ones) are searched by
// bisection, not one by one for every PC.
class RangeFinder {
  public:
    explicit RangeFinder(const std::vector<std::pair<const HistogramSpec*, Layout>>& ranges)
        : ranges_(ranges) {
        by_low_.resize(ranges.size());
        for (std::size_t k = 0; k < ranges.size(); ++k) by_low_[k] = k;
        std::sort(by_low_.begin(), by_low_.end(),
                  [&](std::size_t a, std::size_t b) { return low(a) < low(b); });
        for (std::size_t i = 1; i < by_low_.size(); ++i)
            disjoint_ = disjoint_ && ranges[by_low_[i - 1]].second.high <= low(by_low_[i]);
    }
    std::optional<std::size_t> operator()(std::uint64_t pc) const {
        if (!disjoint_) {
            for (std::size_t k = 0; k < ranges_.size(); ++k)
                if (holds(k, pc)) return k;
            return std::nullopt;
        }
        const auto after = std::upper_bound(by_low_.begin(), by_low_.end(), pc,
                                            [&](std::uint64_t v, std::size_t k) { return v < low(k); });
        if (after == by_low_.begin() || !holds(*std::prev(after), pc)) return std::nullopt;
        return *std::prev(after);
    }

  private:
    std::uint64_t low(std::size_t k) const { return ranges_[k].second.low; }
    bool holds(std::size_t k, std::uint64_t pc) const {
        return pc >= ranges_[k].second.low && pc < ranges_[k].second.high;
    }
    const std::vector<std::pair<const HistogramSpec*, Layout>>& ranges_;
    std::vector<std::size_t> by_low_;
    bool disjoint_ = true;
};

}  // namespace

std::uint64_t bin_address(const HistogramSpec& spec, std::uint64_t index) {
    if (!spec.bins) return spec.low_pc + index * spec.bin_bytes;
    const Wide range = spec.high_pc - spec.low_pc;
    return spec.low_pc + static_cast<std::uint64_t>(
                             (static_cast<Wide>(index) * range + spec.bins - 1) / spec.bins);
}

BinningResult to_gmon_data(const Aggregate& aggregate, const std::vector<HistogramSpec>& specs,
                           const TargetLayout& layout) {
    for (const auto& spec : specs) {
        if (!spec.bins && (spec.bin_bytes == 0 || spec.bin_bytes % 2 != 0)) {
            // gprof measures addresses in 2-byte units; an odd bin size cannot be represented.
            throw std::invalid_argument(
                "histogram bin size must be a positive even number of bytes");
        }
        if (spec.bins && spec.bins > spec.high_pc - spec.low_pc)
            throw std::invalid_argument("a histogram cannot have more bins than bytes");
    }
    BinningResult result;
    result.data.layout = layout;
    result.data.format = GmonFormat::kGnu;
    result.data.arcs = aggregate.arcs();
    std::vector<std::pair<const HistogramSpec*, Layout>> ranges;
    for (const auto& spec : specs) {
        const Layout l = layout_of(spec);
        if (!l.nbins) continue;
        Histogram h;
        h.low_pc = l.low;
        h.high_pc = l.high;
        h.prof_rate = spec.prof_rate;
        h.bins.assign(l.nbins, 0);
        result.data.histograms.push_back(std::move(h));
        ranges.emplace_back(&spec, l);
    }
    const RangeFinder find(ranges);
    std::vector<PcCount> sorted;
    for (const PcCount& p : aggregate.pc_samples(sorted)) {
        const std::optional<std::size_t> k = find(p.pc);
        if (!k) {
            result.samples_outside += p.count;
            continue;
        }
        const auto& [spec, l] = ranges[*k];
        const std::uint64_t bin =
            spec->bins ? exact_bin_of(*spec, p.pc) : (p.pc - l.low) / spec->bin_bytes;
        result.data.histograms[*k].bins[bin] += p.count;
    }
    return result;
}

BinningResult to_gmon_data(const Aggregate& aggregate, const HistogramSpec& spec,
                           const TargetLayout& layout) {
    return to_gmon_data(aggregate, std::vector<HistogramSpec>{spec}, layout);
}

}  // namespace rackprof::gmon
