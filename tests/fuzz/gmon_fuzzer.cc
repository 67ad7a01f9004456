// libFuzzer target: the gmon.out reader (GNU tagged, old BSD, 4.4BSD). Byte 0 picks the
// target layout (bit 0: 8-byte addresses, else 4; bit 1: big-endian); the rest is the file.
// Anything readable must survive merge, write and read again unchanged.
#include <algorithm>
#include <stdexcept>

#include "gmon/gmon_reader.h"
#include "gmon/gmon_writer.h"
#include "tests/fuzz/fuzz_input.h"

namespace rackprof::fuzz {
namespace {

using gmon::GmonData;

// Zero-count arcs are not written (gprof would ignore them).
std::vector<gmon::ArcCount> counted_arcs(const GmonData& data) {
    std::vector<gmon::ArcCount> arcs;
    std::copy_if(data.arcs.begin(), data.arcs.end(), std::back_inserter(arcs),
                 [](const gmon::ArcCount& a) { return a.count > 0; });
    return arcs;
}

void check_same(const GmonData& a, const GmonData& b) {
    FUZZ_CHECK(counted_arcs(a) == counted_arcs(b));
    FUZZ_CHECK(a.histograms.size() == b.histograms.size());
    for (std::size_t i = 0; i < a.histograms.size(); ++i) {
        const auto& x = a.histograms[i];
        const auto& y = b.histograms[i];
        FUZZ_CHECK(x.low_pc == y.low_pc && x.high_pc == y.high_pc);
        FUZZ_CHECK(x.prof_rate == y.prof_rate);
        FUZZ_CHECK(x.dimension == y.dimension && x.dimension_abbrev == y.dimension_abbrev);
        FUZZ_CHECK(x.bins == y.bins);
    }
}

}  // namespace
}  // namespace rackprof::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace rackprof;
    if (size == 0) return 0;
    const gmon::TargetLayout layout{data[0] & 1 ? 8 : 4,
                                    data[0] & 2 ? gmon::ByteOrder::kBig : gmon::ByteOrder::kLittle};
    const fuzz::Bytes file(data + 1, size - 1);
    gmon::GmonData merged;
    try {
        const gmon::GmonData parsed = gmon::parse_gmon(file, layout);
        FUZZ_CHECK(parsed.layout == layout);
        merged = gmon::merge_duplicates(parsed);
    } catch (const gmon::GmonFormatError&) {
        return 0;  // refused with a message: what a bad file must get
    }
    // A count past 2^36 takes 16 or more arc records when written: correct, but writing
    // hundreds of MB per input would starve the search (the writer's own cap is tested).
    for (const auto& a : merged.arcs) {
        if (a.count >> 36) return 0;
    }
    std::vector<std::uint8_t> written;
    try {
        written = gmon::serialize_gmon(merged);
    } catch (const std::length_error&) {
        return 0;  // counts too wide to write back in a sane size: refused, said so
    }
    const gmon::GmonData again = gmon::merge_duplicates(gmon::parse_gmon(written, layout));
    FUZZ_CHECK(again.format == gmon::GmonFormat::kGnu);
    fuzz::check_same(merged, again);
    return 0;
}
