// A fleet's per-board spread: for each function of the merged profile, each board's share of
// its own samples with a binomial interval, and which boards lie outside the sampling error of
// the typical (median) board ("board 7 spends 31 % in spi_wait, the fleet 12 ± 1 %").
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gmon/profile.h"
#include "gmon/report.h"

namespace rackprof::gmon {

struct BoardSamples {
    std::string board;
    std::vector<std::int64_t> sessions;
    std::uint64_t calls = 0;
    std::uint64_t samples = 0;                      // all its PC samples
    std::map<std::string, std::uint64_t> function;  // PC samples by function (function_index.h)
};

// The JSON "spread" object (web/api/openapi.json documents it). A board's share of a function is
// its samples there over all its samples. Functions are the fleet's flat
// rows with samples, trimmed as `trim` trims the flat profile. A board is "outside" when an
// exact binomial test of its samples against the median board's share rejects at `alpha`,
// Bonferroni-corrected over boards x functions.
nlohmann::json board_spread_json(const Profile& fleet, const std::vector<BoardSamples>& boards,
                                 const JsonReportOptions& trim, double alpha = 0.01);

}  // namespace rackprof::gmon
