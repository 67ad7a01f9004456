// One row of the summary table `tests/bench/run.sh all` prints at the end, as a line of its own
// on standard output:
//
//   TABLE|benchmark|input|figure|baseline (same run, same input)|ratio
//
// The ratio is always figure / baseline, both measured in this run on the same input (md5sum
// on the same file, an offline `rackprof convert` of the same capture, a baseline binary on
// the same boards...), never against a constant; "-" where there is no baseline. A published
// figure may be quoted in the input or baseline column, with its source, but is never divided
// into anything.
#pragma once

#include <cstdarg>
#include <cstdio>
#include <string>

namespace rackprof::bench {

inline void table_row(const std::string& benchmark, const std::string& input,
                      const std::string& figure, const std::string& baseline = "-",
                      double ratio = 0) {
    char r[32] = "-";
    if (ratio > 0) std::snprintf(r, sizeof r, ratio < 0.1 ? "%.2gx" : "%.2fx", ratio);
    std::printf("TABLE|%s|%s|%s|%s|%s\n", benchmark.c_str(), input.c_str(), figure.c_str(),
                baseline.c_str(), r);
    std::fflush(stdout);
}

// printf into a std::string, for the table's cells.
[[gnu::format(printf, 1, 2)]] inline std::string cell(const char* format, ...) {
    char text[256];
    va_list args;
    va_start(args, format);
    std::vsnprintf(text, sizeof text, format, args);
    va_end(args);
    return text;
}

}  // namespace rackprof::bench
