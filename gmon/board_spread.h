// A fleet's per-board spread: for each function of the merged profile, each board's share of
// its own samples with a binomial interval, and which boards lie outside the sampling error of
// the rest of the fleet ("board 7 spends 31 % in spi_wait, the fleet 12 ± 1 %").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gmon/profile.h"
#include "gmon/report.h"

namespace rackprof::gmon {

struct BoardProfile {
    std::string board;
    std::vector<std::int64_t> sessions;
    std::uint64_t calls = 0;
    std::shared_ptr<const Profile> profile;  // the board's sessions merged, the fleet's ELF
};

// The JSON "spread" object (web/api/openapi.json documents it). Functions are the fleet's flat
// rows with samples, trimmed as `trim` trims the flat profile. A board is "outside" when an
// exact binomial test of its samples against the median board's share rejects at `alpha`,
// Bonferroni-corrected over boards x functions.
nlohmann::json board_spread_json(const Profile& fleet, const std::vector<BoardProfile>& boards,
                                 const JsonReportOptions& trim, double alpha = 0.01);

}  // namespace rackprof::gmon
