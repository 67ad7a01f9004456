// The Tiva-style binned PC report as an input: what a sampler task on a TI Tiva C (EECS 690,
// "Program Profiling on a TI Tiva C using FreeRTOS", Sokol and Mittenburg 2018) prints. A timer
// ISR (prescale 24 x load 50 000 at 120 MHz: every 10 ms, 100 Hz) takes the interrupted PC
// from the stack, divides it by 64 and counts it in one of 512 bins (the first 32 KiB of
// flash); once a minute the task prints "DONE COLLECTING (N)" and the 512 bins as ReportData
// items, one CSV line per item in its fields' order:
//
//   TimeStamp,ReportName,ReportValueType_Flg,ReportValue_0,ReportValue_1,ReportValue_2,ReportValue_3
//   123456,42,0,323,977,0,0                                  <- bin 323 (0x50c0..0x50ff), 977 hits
//   06601211,0042,+0000323,+0000977,+0000000,+0000000        <- the same, as a report task's
//                                                               printf prints it (no type flag)
//
// Both layouts are read: 6 or 7 fields (the type flag printed or not), numbers zero-padded and
// signed. Each report is kept apart (a file holds one a minute); their sum is the whole run.
// A bin line that cannot be read (cut by a reset, garbled on the UART, out of range) is counted
// and skipped, and its bin is counted missing from its report: a visible loss, never a guess.
// The ISR's "ERROR: (Current PC / 64) >= 512 ..." lines are samples outside the bins (counted);
// lines of other reports and other console text are skipped (counted).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "gmon/gmon_data.h"
#include "gmon/gmon_reader.h"

namespace rackprof::gmon {

// What the sampler's constants make of its reports (the defaults of TivaShape).
inline constexpr std::uint32_t kTivaBins = 512;
inline constexpr std::uint32_t kTivaBinBytes = 64;
inline constexpr std::uint32_t kTivaRate = 100;       // 120 MHz / (24 * 50 000)
inline constexpr std::uint64_t kTivaReportName = 42;  // ReportName of a histogram bin

// The sampler's histogram: bins of bin_bytes from address 0, sampled at rate Hz. A sampler
// built with other constants is read with its own.
struct TivaShape {
    std::uint32_t bins = kTivaBins;
    std::uint32_t bin_bytes = kTivaBinBytes;
    std::uint32_t rate = kTivaRate;
};

// A report that cannot be read: what is wrong, and on which line.
class TivaFormatError : public GmonFormatError {
  public:
    using GmonFormatError::GmonFormatError;
};

// One report: the bins after a "DONE COLLECTING (N)" line (or after the previous report's last
// bin, when that line was lost).
struct TivaSection {
    std::uint64_t number = 0;    // its DONE COLLECTING number; 0 when none came
    std::size_t first_line = 0;  // the line of its first bin
    // Its bins with hits, (bin, count) in bin order: a file of many short reports costs what
    // its lines do, not a whole histogram each.
    std::vector<std::pair<std::uint32_t, std::uint64_t>> hits;
    std::uint64_t samples = 0;       // in its bins
    std::uint32_t bins_missing = 0;  // bins no readable line gave (lost, cut, garbled)
};

struct TivaReport {
    HistogramSpec shape;                // low 0, bins x bin_bytes, the sampler's rate
    std::vector<std::uint64_t> counts;  // per bin, summed over the reports
    std::vector<TivaSection> parts;     // each report, in file order
    std::size_t reports = 0;            // parts.size()
    std::uint64_t samples = 0;          // in the bins, all reports
    std::uint64_t samples_outside = 0;  // the ISR's out-of-range ERROR lines
    std::uint64_t lines_skipped = 0;    // other reports, other console text
    std::uint64_t lines_unread = 0;     // bin lines (report 42) that could not be read
    std::uint64_t bins_missing = 0;     // over all reports
};

// True when the start of a file reads as such a report: a "DONE COLLECTING (" line, or a
// complete line of 6 or 7 numbers whose second is 42 (or 0042).
bool looks_like_tiva_report(std::span<const std::uint8_t> head);

// Detects, parses and checks in one pass. Throws TivaFormatError for binary data, for text
// with no readable bin line, and for a shape that cannot be (no bins, or more than 2^20).
TivaReport parse_tiva_report(std::string_view text, const TivaShape& shape = {});

// The report `index` (0-based, file order) alone, as a TivaReport of one part.
TivaReport only_report(const TivaReport& all, std::size_t index);

}  // namespace rackprof::gmon
