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

#include "gmon/json_stream.h"
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

// How many functions a spread covers by default: all of a few boards', the busiest 20 of a
// thousand boards' (at most 20000 board x function tests, a few hundred milliseconds).
std::size_t default_spread_limit(std::size_t boards);

// The functions a spread covers: the fleet's flat rows with samples, trimmed as `trim` trims
// the flat profile, the busiest `limit` of them (0: no limit); `omitted` (when given) counts the
// rows the limit left out.
std::vector<std::string> spread_functions(const Profile& fleet, const JsonReportOptions& trim,
                                          std::size_t limit, std::size_t* omitted = nullptr);

// The JSON "spread" object (web/api/openapi.json documents it) over `functions` (from
// spread_functions; "functions_omitted" says how many it left out). A board's share of a
// function is its samples there over all its samples. A board is "outside" when an exact
// binomial test of its samples against the median board's share rejects at `alpha`,
// Bonferroni-corrected over boards x functions.
nlohmann::json board_spread_json(const std::vector<std::string>& functions,
                                 std::size_t functions_omitted,
                                 const std::vector<BoardSamples>& boards, double alpha = 0.01);
// The same written in place: what the API answers with (no document built and copied).
void write_board_spread(JsonStream& out, const std::vector<std::string>& functions,
                        std::size_t functions_omitted, const std::vector<BoardSamples>& boards,
                        double alpha = 0.01);
// The same over spread_functions(fleet, trim, default_spread_limit(boards)).
nlohmann::json board_spread_json(const Profile& fleet, const std::vector<BoardSamples>& boards,
                                 const JsonReportOptions& trim, double alpha = 0.01);

}  // namespace rackprof::gmon
