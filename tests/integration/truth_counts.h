// Arc and sample counts, from the simulator's truth files and from a gmon.out, so fleet tests
// can say "the merged profile is exactly the sum of what the boards sent".
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "gmon/gmon_reader.h"
#include "tests/integration/test_support.h"

namespace rackprof::testing {

using ArcKey = std::pair<std::uint64_t, std::uint64_t>;

struct Counts {
    std::map<ArcKey, std::uint64_t> arcs;
    std::uint64_t samples = 0;
    friend bool operator==(const Counts&, const Counts&) = default;
};

// Adds what `rackprof simulate --truth` wrote.
inline void add_truth(Counts& counts, const std::filesystem::path& truth_file) {
    const auto truth = nlohmann::json::parse(read_text(truth_file));
    for (const auto& arc : truth["arcs"]) {
        counts.arcs[{std::stoull(arc["from"].get<std::string>(), nullptr, 16),
                     std::stoull(arc["self"].get<std::string>(), nullptr, 16)}] +=
            arc["count"].get<std::uint64_t>();
    }
    for (const auto& pc : truth["pc_samples"]) counts.samples += pc["count"].get<std::uint64_t>();
}

inline Counts counts_in(const std::filesystem::path& gmon_file) {
    Counts counts;
    const auto data = gmon::read_gmon_file(gmon_file, gmon::TargetLayout{});
    for (const auto& arc : data.arcs) counts.arcs[{arc.from_pc, arc.self_pc}] += arc.count;
    for (const auto& h : data.histograms) counts.samples += h.total();
    return counts;
}

}  // namespace rackprof::testing
