#include "gmon/profile_pipeline.h"

#include <stdexcept>

namespace rackprof::gmon {

std::optional<CodeRange> code_range_of(const ProfileSource& source) {
    if (source.elf) return CodeRange{source.elf->code_low(), source.elf->code_high()};
    if (source.announced_range && source.announced_range->second > source.announced_range->first)
        return source.announced_range;
    return std::nullopt;
}

std::vector<HistogramSpec> histogram_specs(const ProfileSource& source) {
    if (source.histograms) return *source.histograms;
    if (source.elf) {
        std::vector<HistogramSpec> specs;
        for (const auto& region : source.elf->code_regions(kHistogramRegionGap))
            specs.push_back(
                histogram_spec(*source.aggregate, region, source.bin_bytes, source.prof_rate));
        if (!specs.empty()) return specs;
    }
    return {histogram_spec(*source.aggregate, code_range_of(source), source.bin_bytes,
                           source.prof_rate)};
}

BinningResult gmon_data_of(const ProfileSource& source) {
    return to_gmon_data(*source.aggregate, histogram_specs(source),
                        source.elf ? source.elf->layout() : TargetLayout{});
}

Profile profile_of(const ProfileSource& source, const GmonData& data,
                   const ProfileOptions& options) {
    if (!source.elf)
        throw std::invalid_argument("no ELF: functions cannot be named without the firmware");
    return compute_profile(data, *source.elf, options);
}

Profile profile_of(const ProfileSource& source, const ProfileOptions& options) {
    return profile_of(source, gmon_data_of(source).data, options);
}

}  // namespace rackprof::gmon
