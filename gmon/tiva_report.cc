#include "gmon/tiva_report.h"

#include <array>
#include <optional>
#include <string>

namespace rackprof::gmon {
namespace {

constexpr std::string_view kDone = "DONE COLLECTING (";
constexpr std::string_view kOutOfRange = "ERROR: (Current PC / 64)";
constexpr std::uint32_t kMaxTivaBins = 1u << 20;

std::string_view trimmed(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
        s.remove_suffix(1);
    return s;
}

// printf's "%d", "%+07d" or "%04u": an optional sign, then decimal digits (leading zeros fine).
std::optional<std::int64_t> signed_number(std::string_view text) {
    bool negative = false;
    if (!text.empty() && (text.front() == '+' || text.front() == '-')) {
        negative = text.front() == '-';
        text.remove_prefix(1);
    }
    if (text.empty() || text.size() > 18) return std::nullopt;  // 18 digits fit int64_t
    std::int64_t value = 0;
    for (const char c : text) {
        if (c < '0' || c > '9') return std::nullopt;
        value = value * 10 + (c - '0');
    }
    return negative ? -value : value;
}

// A ReportData item's CSV line: its fields as numbers (6 without the type flag, 7 with it).
struct Item {
    std::array<std::int64_t, 7> field{};
    std::size_t fields = 0;
    std::int64_t name() const { return field[1]; }
    std::int64_t bin() const { return field[fields - 4]; }    // ReportValue_0
    std::int64_t count() const { return field[fields - 3]; }  // ReportValue_1
};

std::optional<Item> item_of(std::string_view line) {
    Item item;
    while (true) {
        const auto comma = line.find(',');
        if (item.fields == item.field.size()) return std::nullopt;
        const auto value = signed_number(trimmed(line.substr(0, comma)));
        if (!value) return std::nullopt;
        item.field[item.fields++] = *value;
        if (comma == std::string_view::npos) break;
        line.remove_prefix(comma + 1);
    }
    if (item.fields < 6) return std::nullopt;
    return item;
}

// A line that claims to be a bin (its second field is 42, however padded) whatever the rest is.
bool names_report_42(std::string_view line) {
    const auto comma = line.find(',');
    if (comma == std::string_view::npos) return false;
    const auto next = line.find(',', comma + 1);
    const auto name = signed_number(
        trimmed(line.substr(comma + 1, next == std::string_view::npos ? next : next - comma - 1)));
    return name == static_cast<std::int64_t>(kTivaReportName);
}

// "DONE COLLECTING (7)- BEGIN OUTPUT" -> 7 (0 when the number cannot be read).
std::uint64_t done_number(std::string_view line) {
    line.remove_prefix(kDone.size());
    const auto n = signed_number(line.substr(0, line.find(')')));
    return n && *n > 0 ? static_cast<std::uint64_t>(*n) : 0;
}

[[noreturn]] void fail(std::size_t line_number, const std::string& why) {
    throw TivaFormatError("Tiva binned PC report, line " + std::to_string(line_number) + ": " +
                          why);
}

// Reports as the lines come: a DONE COLLECTING line or a bin not above the last one begins
// the next report; a bin skipped over is missing from its report.
class Reader {
  public:
    explicit Reader(TivaReport& r) : r_(r) {}

    void done_line(std::uint64_t number) {
        close();
        number_ = number;
    }
    void bin(std::uint32_t bin, std::uint64_t count, std::size_t line_number) {
        if (open_ && static_cast<std::int64_t>(bin) <= last_bin_) close();
        if (!open_) {
            part_ = TivaSection{};
            part_.number = number_;
            part_.first_line = line_number;
            number_ = 0;
            open_ = true;
        }
        part_.bins_missing += static_cast<std::uint32_t>(bin - last_bin_ - 1);
        last_bin_ = bin;
        if (count == 0) return;
        part_.hits.emplace_back(bin, count);
        part_.samples += count;
        r_.counts[bin] += count;
    }
    void close() {
        if (!open_) return;
        part_.bins_missing += static_cast<std::uint32_t>(r_.shape.bins - 1 - last_bin_);
        r_.samples += part_.samples;
        r_.bins_missing += part_.bins_missing;
        r_.parts.push_back(std::move(part_));
        open_ = false;
        last_bin_ = -1;
    }

  private:
    TivaReport& r_;
    TivaSection part_;
    bool open_ = false;
    std::int64_t last_bin_ = -1;
    std::uint64_t number_ = 0;  // of the DONE COLLECTING line before the next report
};

}  // namespace

bool looks_like_tiva_report(std::span<const std::uint8_t> head) {
    const std::string_view text(reinterpret_cast<const char*>(head.data()), head.size());
    if (text.find(kDone) != std::string_view::npos) return true;
    std::size_t start = 0;
    for (int lines = 0; lines < 64 && start < text.size(); ++lines) {
        const auto end = text.find('\n', start);
        if (end == std::string_view::npos) break;  // a line cut by the head's end proves nothing
        const auto item = item_of(trimmed(text.substr(start, end - start)));
        if (item && item->name() == static_cast<std::int64_t>(kTivaReportName)) return true;
        start = end + 1;
    }
    return false;
}

TivaReport parse_tiva_report(std::string_view text, const TivaShape& shape) {
    if (shape.bins == 0 || shape.bins > kMaxTivaBins || shape.bin_bytes == 0 || shape.rate == 0)
        throw TivaFormatError("a Tiva report's shape of " + std::to_string(shape.bins) +
                              " bins of " + std::to_string(shape.bin_bytes) + " bytes at " +
                              std::to_string(shape.rate) +
                              " Hz cannot be (1 to 2^20 bins, bytes and rate above 0)");
    TivaReport r;
    const std::uint64_t span = std::uint64_t{shape.bins} * shape.bin_bytes;
    r.shape = {0, span, shape.bin_bytes, shape.rate, shape.bins};
    r.counts.assign(shape.bins, 0);
    Reader reader(r);
    std::size_t line_number = 0;
    for (std::size_t start = 0; start < text.size();) {
        const auto newline = text.find('\n', start);
        const auto end = newline == std::string_view::npos ? text.size() : newline;
        const std::string_view line = trimmed(text.substr(start, end - start));
        start = end + 1;
        ++line_number;
        if (line.empty() || line.starts_with("TimeStamp")) continue;  // the CSV header
        if (line.find('\0') != std::string_view::npos) fail(line_number, "binary data, not text");
        if (line.starts_with(kDone)) {
            reader.done_line(done_number(line));
            continue;
        }
        if (line.starts_with(kOutOfRange)) {
            ++r.samples_outside;
            continue;
        }
        const auto item = item_of(line);
        const bool bin_line = item ? item->name() == static_cast<std::int64_t>(kTivaReportName)
                                   : names_report_42(line);
        if (!bin_line) {
            ++r.lines_skipped;
            continue;
        }
        if (!item || item->bin() < 0 || item->bin() >= static_cast<std::int64_t>(shape.bins) ||
            item->count() < 0 || item->count() > static_cast<std::int64_t>(UINT32_MAX)) {
            ++r.lines_unread;  // cut, garbled, or a bin or count no sampler could print
            continue;
        }
        reader.bin(static_cast<std::uint32_t>(item->bin()),
                   static_cast<std::uint64_t>(item->count()), line_number);
    }
    reader.close();
    r.reports = r.parts.size();
    if (r.reports == 0)
        throw TivaFormatError(
            "not a Tiva binned PC report: no readable bin lines (TimeStamp,42,0,BIN,COUNT,0,0 "
            "or TimeStamp,0042,+BIN,+COUNT,+0,+0)" +
            (r.lines_unread ? " among " + std::to_string(r.lines_unread) + " lines of report 42"
                            : std::string()));
    return r;
}

TivaReport only_report(const TivaReport& all, std::size_t index) {
    TivaReport one;
    one.shape = all.shape;
    one.counts.assign(all.counts.size(), 0);
    const TivaSection& part = all.parts.at(index);
    for (const auto& [bin, count] : part.hits) one.counts[bin] = count;
    one.parts = {part};
    one.reports = 1;
    one.samples = part.samples;
    one.bins_missing = part.bins_missing;
    return one;
}

}  // namespace rackprof::gmon
