// The Tiva-style binned PC report (gmon/tiva_report.h), written as its description says the
// sampler task prints it: "DONE COLLECTING (N)", then 512 ReportData items in CSV.
#include "gmon/tiva_report.h"

#include <doctest/doctest.h>

#include <map>
#include <string>

namespace rackprof::gmon {
namespace {

// One report: every bin, the given counts (others 0), time stamps rising as the queue sends.
std::string tiva_report(int number, const std::map<std::uint32_t, std::uint64_t>& counts) {
    std::string out = "DONE COLLECTING (" + std::to_string(number) + ")\n";
    for (std::uint32_t bin = 0; bin < kTivaBins; ++bin) {
        const auto it = counts.find(bin);
        out += std::to_string(600000 * number + bin) + ",42,0," + std::to_string(bin) + "," +
               std::to_string(it == counts.end() ? 0 : it->second) + ",0,0\n";
    }
    return out;
}

// The report's own findings (fig. 10-1): portasm.obj's bins 321-323 by far the most, tasks.obj
// in 42-47, driverLib in 289-290.
const std::map<std::uint32_t, std::uint64_t> kFirstMinute = {
    {42, 310}, {43, 95}, {45, 12},   {46, 7},    {47, 40},
    {289, 3},  {290, 1}, {321, 512}, {322, 870}, {323, 4100}};
const std::map<std::uint32_t, std::uint64_t> kSecondMinute = {
    {42, 290}, {43, 101}, {46, 9}, {47, 38}, {290, 2}, {321, 498}, {322, 901}, {323, 4104}};

std::string two_minutes() {
    return "UART console up\r\n" + tiva_report(1, kFirstMinute) +
           "ERROR: (Current PC / 64) >= 512 (Current_PC = 40000)\n" + "1200000,7,0,1,2,3,4\n" +
           tiva_report(2, kSecondMinute);
}

std::string error_of(const std::string& text) {
    try {
        parse_tiva_report(text);
    } catch (const TivaFormatError& e) {
        return e.what();
    }
    return "(no error)";
}

std::span<const std::uint8_t> bytes_of(const std::string& s) {
    return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

}  // namespace

TEST_CASE("a Tiva binned PC report: two minutes summed, exact counts, the sampler's shape") {
    const std::string text = two_minutes();
    CHECK(looks_like_tiva_report(bytes_of(text)));
    const TivaReport r = parse_tiva_report(text);
    CHECK(r.reports == 2);
    CHECK(r.shape.low_pc == 0);
    CHECK(r.shape.high_pc == 0x8000);  // 512 bins of 64 bytes: the first 32 KiB
    CHECK(r.shape.bin_bytes == 64);
    CHECK(r.shape.bins == 512);
    CHECK(r.shape.prof_rate == 100);  // 120 MHz / (24 * 50 000)
    REQUIRE(r.counts.size() == 512);
    std::uint64_t total = 0;
    for (std::uint32_t bin = 0; bin < 512; ++bin) {
        const auto a = kFirstMinute.count(bin) ? kFirstMinute.at(bin) : 0;
        const auto b = kSecondMinute.count(bin) ? kSecondMinute.at(bin) : 0;
        INFO("bin " << bin);
        CHECK(r.counts[bin] == a + b);
        total += a + b;
    }
    CHECK(r.counts[323] == 8204);
    CHECK(r.samples == total);
    CHECK(r.samples_outside == 1);  // the ISR's ERROR line
    CHECK(r.lines_skipped == 2);    // the console line and another report's item
}

TEST_CASE("detection: by a DONE COLLECTING line or a line of report 42, not by other inputs") {
    CHECK(looks_like_tiva_report(bytes_of("DONE COLLECTING (3)\n")));
    CHECK(looks_like_tiva_report(bytes_of("noise\n17,42,0,5,9,0,0\n")));
    CHECK_FALSE(looks_like_tiva_report(bytes_of("gmon\x01\x00\x00\x00")));
    CHECK_FALSE(looks_like_tiva_report(bytes_of("a5 0f 12 00 40\n")));  // a hex-ASCII capture
    CHECK_FALSE(looks_like_tiva_report(bytes_of("17,41,0,5,9,0,0\n")));
    CHECK_FALSE(looks_like_tiva_report(bytes_of("17,42,0,5,9,0")));  // cut, no newline
}

TEST_CASE("garbage and truncated reports are clear errors naming the line") {
    CHECK(error_of("") ==
          "not a Tiva binned PC report: no bin lines (TimeStamp,42,0,BIN,COUNT,0,0)");
    CHECK(error_of("hello\nworld\n") == error_of(""));
    const std::string full = tiva_report(1, kFirstMinute);
    // Cut after the header and 300 bins.
    std::size_t cut = 0;
    for (int line = 0; line < 301; ++line) cut = full.find('\n', cut) + 1;
    CHECK(error_of(full.substr(0, cut)) ==
          "Tiva binned PC report, line 301: truncated: the report begun on line 2 ends after "
          "300 of its 512 bins");
    // Cut inside a line: the file ends in half a bin line.
    CHECK(error_of(full.substr(0, cut + 9)) ==
          "Tiva binned PC report, line 302: truncated: the file ends inside a line "
          "('600300,42') after 300 of the report's 512 bins");
    // A lost line: bin 100 missing.
    std::string lost = full;
    const auto at = lost.find("\n600100,42,0,100,") + 1;
    lost.erase(at, lost.find('\n', at) + 1 - at);
    CHECK(error_of(lost) ==
          "Tiva binned PC report, line 102: bin 101 where bin 100 was due "
          "(bins come in order, each once per report)");
    CHECK(error_of("5,42,0,512,1,0,0\n") ==
          "Tiva binned PC report, line 1: bin 512 is past the 512 bins");
    CHECK(error_of("5,42,0,0,x,0,0\n").find("line 1: a bin line (report 42) is not seven") !=
          std::string::npos);
    CHECK(error_of("5,42,0,0,1,0\n").find("not seven unsigned numbers") != std::string::npos);
    CHECK(error_of(full.substr(0, cut) + "DONE COLLECTING (2)\n") ==
          "Tiva binned PC report, line 302: a new report begins after 300 of the 512 bins of "
          "the one begun on line 2");
    CHECK(error_of(std::string("5,42,0,0,1,0,0\n\0\x01", 17)).find("binary data") !=
          std::string::npos);
}

}  // namespace rackprof::gmon
