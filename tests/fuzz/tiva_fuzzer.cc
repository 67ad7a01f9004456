// libFuzzer target: the Tiva binned PC report reader (gmon/tiva_report.h). The input is the
// report's text. Refusals are TivaFormatError; what is read is 512 bins whose counts add up to
// its samples and to its reports' (each report's bins rising, its hits and missing bins within
// 512), and reading it again from its own bins in the sampler's layout gives the same.
#include <stdexcept>
#include <string>

#include "gmon/tiva_report.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace rackprof;
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    gmon::TivaReport report;
    try {
        report = gmon::parse_tiva_report(text);
    } catch (const gmon::TivaFormatError&) {
        return 0;  // refused with a message: what a bad report must get
    }
    FUZZ_CHECK(report.reports > 0);
    FUZZ_CHECK(report.counts.size() == gmon::kTivaBins);
    FUZZ_CHECK(report.shape.bins == gmon::kTivaBins);
    std::uint64_t sum = 0;
    for (const std::uint64_t n : report.counts) sum += n;
    FUZZ_CHECK(sum == report.samples);
    FUZZ_CHECK(report.parts.size() == report.reports);
    std::uint64_t parts_sum = 0, missing = 0;
    for (const gmon::TivaSection& part : report.parts) {
        std::uint64_t part_sum = 0;
        for (std::size_t i = 0; i < part.hits.size(); ++i) {
            FUZZ_CHECK(part.hits[i].first < gmon::kTivaBins);
            FUZZ_CHECK(i == 0 || part.hits[i - 1].first < part.hits[i].first);
            part_sum += part.hits[i].second;
        }
        FUZZ_CHECK(part_sum == part.samples);
        FUZZ_CHECK(part.hits.size() + part.bins_missing <= gmon::kTivaBins);
        parts_sum += part.samples;
        missing += part.bins_missing;
    }
    FUZZ_CHECK(parts_sum == report.samples);
    FUZZ_CHECK(missing == report.bins_missing);
    // The same histogram as one report in the sampler's own layout reads back the same.
    std::string again = "DONE COLLECTING (1)\n";
    for (std::uint32_t bin = 0; bin < gmon::kTivaBins; ++bin) {
        if (report.counts[bin] > UINT32_MAX) return 0;  // a sum of minutes: one line cannot hold it
        again +=
            "0,42,0," + std::to_string(bin) + "," + std::to_string(report.counts[bin]) + ",0,0\n";
    }
    const gmon::TivaReport reread = gmon::parse_tiva_report(again);
    FUZZ_CHECK(reread.counts == report.counts);
    FUZZ_CHECK(reread.reports == 1);
    return 0;
}
