// Tiva binned PC reports as text, for tests (gmon/tiva_report.h): each report's 512 bins with
// the given counts (others 0), time stamps rising as the report task's queue sends them.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>

namespace rackprof::gmon::testing {

using BinCounts = std::map<std::uint32_t, std::uint64_t>;

// As the report's description gives the ReportData item: seven fields, a bare banner.
inline std::string tiva_item_report(int number, const BinCounts& counts) {
    std::string out = "DONE COLLECTING (" + std::to_string(number) + ")\n";
    for (std::uint32_t bin = 0; bin < 512; ++bin) {
        const auto it = counts.find(bin);
        out += std::to_string(600000 * number + static_cast<int>(bin)) + ",42,0," +
               std::to_string(bin) + "," + std::to_string(it == counts.end() ? 0 : it->second) +
               ",0,0\n";
    }
    return out;
}

// As a real report task prints it through the C library's printf: time stamp and report name
// zero-padded, values signed, no type flag, "DONE COLLECTING (n)- BEGIN OUTPUT" before it.
inline std::string printed_tiva_report(int number, const BinCounts& counts) {
    char line[96];
    std::snprintf(line, sizeof line, "DONE COLLECTING (%d)- BEGIN OUTPUT\r\n", number);
    std::string out = line;
    for (std::uint32_t bin = 0; bin < 512; ++bin) {
        const auto it = counts.find(bin);
        std::snprintf(line, sizeof line, "%08u,%04u,%+08d,%+08d,%+08d,%+08d\r\n",
                      6600000u * static_cast<unsigned>(number) + bin, 42u, static_cast<int>(bin),
                      it == counts.end() ? 0 : static_cast<int>(it->second), 0, 0);
        out += line;
    }
    return out;
}

}  // namespace rackprof::gmon::testing
