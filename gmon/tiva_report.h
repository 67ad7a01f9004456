// The Tiva-style binned PC report as an input: what a sampler task on a TI Tiva C (EECS 690,
// "Program Profiling on a TI Tiva C using FreeRTOS", Sokol and Mittenburg 2018) prints. A timer
// ISR (prescale 24 x load 50 000 at 120 MHz: every 10 ms, 100 Hz) takes the interrupted PC
// from the stack, divides it by 64 and counts it in one of 512 bins (the first 32 KiB of
// flash); once a minute the task prints "DONE COLLECTING (N)" and the 512 bins as ReportData
// items in Excel CSV, one line per item in its fields' order:
//
//   TimeStamp,ReportName,ReportValueType_Flg,ReportValue_0,ReportValue_1,ReportValue_2,ReportValue_3
//   123456,42,0,323,977,0,0          <- report 42: bin 323 (0x5080..0x50bf) was hit 977 times
//
// Reports are summed into one histogram (low 0, high 0x8000, 64-byte bins, 100 Hz): a gmon.out
// histogram like any other, so the profile, gmon.out and exports come out as for a capture.
// The ISR's "ERROR: (Current PC / 64) >= 512 ..." lines are samples outside the bins (counted);
// lines of other reports and other console text are skipped (counted).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "gmon/gmon_data.h"
#include "gmon/gmon_reader.h"

namespace rackprof::gmon {

// What the sampler's constants make of its reports.
inline constexpr std::uint32_t kTivaBins = 512;
inline constexpr std::uint32_t kTivaBinBytes = 64;
inline constexpr std::uint32_t kTivaRate = 100;       // 120 MHz / (24 * 50 000)
inline constexpr std::uint64_t kTivaReportName = 42;  // ReportName of a histogram bin

// A report that cannot be read: what is wrong, and on which line.
class TivaFormatError : public GmonFormatError {
  public:
    using GmonFormatError::GmonFormatError;
};

struct TivaReport {
    HistogramSpec shape;                // low 0, high 0x8000, 64-byte bins, 100 Hz
    std::vector<std::uint64_t> counts;  // per bin, summed over the reports
    std::size_t reports = 0;            // complete reports of 512 bins
    std::uint64_t samples = 0;          // in the bins
    std::uint64_t samples_outside = 0;  // the ISR's out-of-range ERROR lines
    std::uint64_t lines_skipped = 0;    // other reports, other console text
};

// True when the start of a file reads as such a report: a "DONE COLLECTING (" line, or a line
// of seven numbers whose second is 42.
bool looks_like_tiva_report(std::span<const std::uint8_t> head);

// Detects, parses and checks in one pass. Throws TivaFormatError for text with no bin lines, a
// bin line that is not seven numbers, a bin out of order or out of range, or a report that
// ends before its 512th bin (a truncated file).
TivaReport parse_tiva_report(std::string_view text);

}  // namespace rackprof::gmon
