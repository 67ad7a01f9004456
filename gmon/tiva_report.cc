#include "gmon/tiva_report.h"

#include <array>
#include <charconv>
#include <string>

namespace rackprof::gmon {
namespace {

constexpr std::string_view kDone = "DONE COLLECTING (";
constexpr std::string_view kOutOfRange = "ERROR: (Current PC / 64)";

std::string_view trimmed(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
        s.remove_suffix(1);
    return s;
}

// The seven fields of a CSV line as numbers; false when it is not seven unsigned numbers.
bool seven_numbers(std::string_view line, std::array<std::uint64_t, 7>& out) {
    std::size_t field = 0;
    while (true) {
        const auto comma = line.find(',');
        const std::string_view text = trimmed(line.substr(0, comma));
        if (field == out.size() || text.empty()) return false;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out[field]);
        if (ec != std::errc() || end != text.data() + text.size()) return false;
        ++field;
        if (comma == std::string_view::npos) break;
        line.remove_prefix(comma + 1);
    }
    return field == out.size();
}

// A line that claims to be a bin (its second field is 42) whatever its other fields are.
bool names_report_42(std::string_view line) {
    const auto comma = line.find(',');
    if (comma == std::string_view::npos) return false;
    const auto next = line.find(',', comma + 1);
    return trimmed(line.substr(comma + 1,
                               next == std::string_view::npos ? next : next - comma - 1)) == "42";
}

[[noreturn]] void fail(std::size_t line_number, const std::string& why) {
    throw TivaFormatError("Tiva binned PC report, line " + std::to_string(line_number) + ": " +
                          why);
}

}  // namespace

bool looks_like_tiva_report(std::span<const std::uint8_t> head) {
    const std::string_view text(reinterpret_cast<const char*>(head.data()), head.size());
    if (text.find(kDone) != std::string_view::npos) return true;
    std::size_t start = 0;
    for (int lines = 0; lines < 64 && start < text.size(); ++lines) {
        const auto end = text.find('\n', start);
        if (end == std::string_view::npos) break;  // a line cut by the head's end proves nothing
        std::array<std::uint64_t, 7> fields{};
        if (seven_numbers(trimmed(text.substr(start, end - start)), fields) &&
            fields[1] == kTivaReportName)
            return true;
        start = end + 1;
    }
    return false;
}

TivaReport parse_tiva_report(std::string_view text) {
    TivaReport r;
    r.shape = {0, std::uint64_t{kTivaBins} * kTivaBinBytes, kTivaBinBytes, kTivaRate, kTivaBins};
    r.counts.assign(kTivaBins, 0);
    std::uint32_t next_bin = 0;    // of the report being read
    std::size_t report_start = 0;  // the line its first bin was on
    std::size_t line_number = 0;
    std::size_t start = 0;
    while (start < text.size()) {
        const auto newline = text.find('\n', start);
        const auto end = newline == std::string_view::npos ? text.size() : newline;
        const std::string_view line = trimmed(text.substr(start, end - start));
        start = end + 1;
        ++line_number;
        if (line.empty()) continue;
        if (line.find('\0') != std::string_view::npos) fail(line_number, "binary data, not text");
        if (line.starts_with(kDone) || line.starts_with("TimeStamp")) {
            if (next_bin != 0)
                fail(line_number, "a new report begins after " + std::to_string(next_bin) +
                                      " of the 512 bins of the one begun on line " +
                                      std::to_string(report_start));
            continue;
        }
        if (line.starts_with(kOutOfRange)) {
            ++r.samples_outside;
            continue;
        }
        std::array<std::uint64_t, 7> f{};
        if (!seven_numbers(line, f)) {
            // The file's last line, without its newline: a capture cut short mid-line.
            if (newline == std::string_view::npos && (next_bin != 0 || names_report_42(line)))
                fail(line_number, "truncated: the file ends inside a line ('" +
                                      std::string(line.substr(0, 80)) + "') after " +
                                      std::to_string(next_bin) + " of the report's 512 bins");
            if (names_report_42(line))
                fail(line_number, "a bin line (report 42) is not seven unsigned numbers: '" +
                                      std::string(line.substr(0, 80)) + "'");
            ++r.lines_skipped;
            continue;
        }
        if (f[1] != kTivaReportName) {
            ++r.lines_skipped;
            continue;
        }
        const std::uint64_t bin = f[3], count = f[4];
        if (bin >= kTivaBins)
            fail(line_number, "bin " + std::to_string(bin) + " is past the 512 bins");
        if (bin != next_bin)
            fail(line_number, "bin " + std::to_string(bin) + " where bin " +
                                  std::to_string(next_bin) +
                                  " was due (bins come in order, each once per report)");
        if (next_bin == 0) report_start = line_number;
        if (count > UINT32_MAX)
            fail(line_number, "a count of " + std::to_string(count) + " does not fit uint32_t");
        r.counts[bin] += count;
        r.samples += count;
        if (++next_bin == kTivaBins) {
            ++r.reports;
            next_bin = 0;
        }
    }
    if (next_bin != 0)
        fail(line_number, "truncated: the report begun on line " + std::to_string(report_start) +
                              " ends after " + std::to_string(next_bin) + " of its 512 bins");
    if (r.reports == 0)
        throw TivaFormatError(
            "not a Tiva binned PC report: no bin lines (TimeStamp,42,0,BIN,COUNT,0,0)");
    return r;
}

}  // namespace rackprof::gmon
