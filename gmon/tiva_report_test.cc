// The Tiva-style binned PC report (gmon/tiva_report.h), written as its description says the
// sampler task prints it: "DONE COLLECTING (N)", then 512 ReportData items in CSV.
#include "gmon/tiva_report.h"

#include <doctest/doctest.h>

#include <map>
#include <string>

#include "gmon/tiva_test_support.h"

namespace rackprof::gmon {
namespace {

using testing::printed_tiva_report;
using testing::tiva_item_report;

// The report's own findings (fig. 10-1): portasm.obj's bins 321-323 by far the most, tasks.obj
// in 42-47, driverLib in 289-290.
const std::map<std::uint32_t, std::uint64_t> kFirstMinute = {
    {42, 310}, {43, 95}, {45, 12},   {46, 7},    {47, 40},
    {289, 3},  {290, 1}, {321, 512}, {322, 870}, {323, 4100}};
const std::map<std::uint32_t, std::uint64_t> kSecondMinute = {
    {42, 290}, {43, 101}, {46, 9}, {47, 38}, {290, 2}, {321, 498}, {322, 901}, {323, 4104}};

std::string two_minutes() {
    return "UART console up\r\n" + tiva_item_report(1, kFirstMinute) +
           "ERROR: (Current PC / 64) >= 512 (Current_PC = 40000)\n" + "1200000,7,0,1,2,3,4\n" +
           tiva_item_report(2, kSecondMinute);
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

TEST_CASE("reports as a report task prints them: zero-padded, signed, six fields, one part each") {
    const std::string text = "\x1b[2J boot: FreeRTOS v10\r\nReport task up\r\n" +
                             printed_tiva_report(1, kFirstMinute) +
                             printed_tiva_report(2, kSecondMinute);
    CHECK(text.find("06600042,0042,+0000042,+0000310,+0000000,+0000000") != std::string::npos);
    CHECK(looks_like_tiva_report(bytes_of(text.substr(text.find("06600000")))));
    const TivaReport r = parse_tiva_report(text);
    REQUIRE(r.reports == 2);
    CHECK(r.parts[0].number == 1);
    CHECK(r.parts[1].number == 2);
    CHECK(r.parts[0].first_line == 4);
    CHECK(r.lines_skipped == 2);  // the two console lines before the first report
    CHECK(r.lines_unread == 0);
    CHECK(r.bins_missing == 0);
    CHECK(r.counts[323] == 8204);
    const TivaReport second = only_report(r, 1);
    for (std::uint32_t bin = 0; bin < 512; ++bin) {
        INFO("bin " << bin);
        CHECK(second.counts[bin] == (kSecondMinute.count(bin) ? kSecondMinute.at(bin) : 0));
    }
    CHECK(second.samples == r.parts[1].samples);
    CHECK(r.samples == r.parts[0].samples + r.parts[1].samples);
}

TEST_CASE("detection: both layouts, by a DONE COLLECTING line or a line of report 42") {
    CHECK(looks_like_tiva_report(
        bytes_of("noise\n06601211,0042,+0000042,+0000016,+0000000,+0000000\n")));
    CHECK(looks_like_tiva_report(bytes_of("17,0042,0,5,9,0,0\n")));
    CHECK_FALSE(looks_like_tiva_report(bytes_of("17,41,+5,+9,+0,+0\n")));
    CHECK_FALSE(looks_like_tiva_report(bytes_of("17,42,5,9,0\n")));        // five fields
    CHECK_FALSE(looks_like_tiva_report(bytes_of("17,42,0,5,9,0,0,1\n")));  // eight
}

TEST_CASE("stray, cut and garbled lines are counted and skipped; lost bins counted missing") {
    const std::string full = tiva_item_report(1, kFirstMinute);
    std::size_t cut = 0;
    for (int line = 0; line < 301; ++line) cut = full.find('\n', cut) + 1;
    SUBCASE("a report cut after 300 bins, mid-line, then the next report") {
        const std::string text =
            full.substr(0, cut + 9) + "\n" + tiva_item_report(2, kSecondMinute);
        const TivaReport r = parse_tiva_report(text);
        REQUIRE(r.reports == 2);
        CHECK(r.lines_unread == 1);  // "600300,42"
        CHECK(r.parts[0].bins_missing == 212);
        CHECK(r.parts[1].bins_missing == 0);
        CHECK(r.bins_missing == 212);
    }
    SUBCASE("a lost line: bin 100 missing from its report, the rest kept") {
        std::string lost = full;
        const auto at = lost.find("\n600100,42,0,100,") + 1;
        lost.erase(at, lost.find('\n', at) + 1 - at);
        const TivaReport r = parse_tiva_report(lost);
        CHECK(r.reports == 1);
        CHECK(r.bins_missing == 1);
        CHECK(r.counts[323] == 4100);
    }
    SUBCASE("a lost DONE line: a bin at or below the last begins the next report") {
        std::string text = full + tiva_item_report(2, kSecondMinute);
        text.erase(text.find("DONE COLLECTING (2)\n"), 20);
        const TivaReport r = parse_tiva_report(text);
        REQUIRE(r.reports == 2);
        CHECK(r.parts[1].number == 0);
        CHECK(r.bins_missing == 0);
    }
    SUBCASE("bins and counts no sampler prints are unread lines") {
        const TivaReport r = parse_tiva_report(
            "5,42,0,512,1,0,0\n5,42,0,3,-1,0,0\n5,42,0,x,1,0,0\n5,42,0,4,7,0,0\n");
        CHECK(r.lines_unread == 3);
        CHECK(r.samples == 7);
        CHECK(r.parts[0].bins_missing == 511);
    }
}

TEST_CASE("text with no readable bin line, binary data and impossible shapes are clear errors") {
    CHECK(error_of("") ==
          "not a Tiva binned PC report: no readable bin lines (TimeStamp,42,0,BIN,COUNT,0,0 or "
          "TimeStamp,0042,+BIN,+COUNT,+0,+0)");
    CHECK(error_of("hello\nworld\n") == error_of(""));
    CHECK(error_of("5,42,0,0,x,0,0\n").ends_with("among 1 lines of report 42"));
    CHECK(error_of(std::string("5,42,0,0,1,0,0\n\0\x01", 17)).find("binary data") !=
          std::string::npos);
    try {
        parse_tiva_report("5,42,0,0,1,0,0\n", TivaShape{0, 64, 100});
        FAIL("no bins accepted");
    } catch (const TivaFormatError& e) {
        CHECK(std::string(e.what()).find("cannot be") != std::string::npos);
    }
}

TEST_CASE("the sampler's constants are options: another bin size and rate") {
    const TivaReport r =
        parse_tiva_report(tiva_item_report(1, kFirstMinute), TivaShape{512, 32, 1000});
    CHECK(r.shape.high_pc == 512 * 32);
    CHECK(r.shape.bin_bytes == 32);
    CHECK(r.shape.prof_rate == 1000);
    CHECK(r.counts[323] == 4100);
}

}  // namespace rackprof::gmon
