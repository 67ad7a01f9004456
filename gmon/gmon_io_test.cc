#include <iostream>
#include <doctest/doctest.h>

#include <chrono>
#include <stdexcept>

#include "gmon/byte_io.h"
#include "gmon/gmon_data.h"
#include "gmon/gmon_reader.h"
#include "gmon/gmon_writer.h"

namespace rackprof::gmon {
namespace {

GmonData sample(TargetLayout layout) {
    Aggregate a;
    a.add_arc(0x153D, 0x14E5, 13155);
    a.add_arc(0x150D, 0x1499, 70000);
    a.add_arc(0x5BD, 0x4FD, 5'000'000'000ull);  // above a u32: split into records
    a.add_pc(0x14B4, 200000);                   // above a u16 bin: split into records
    a.add_pc(0x146E, 3);
    a.add_pc(0x4000, 9);  // outside the range below
    HistogramSpec spec{0x410, 0x1620, 2, 1000};
    auto binned = to_gmon_data(a, spec, layout);
    CHECK(binned.samples_outside == 9);
    return binned.data;
}

TEST_CASE("GNU gmon.out round trip keeps wide counts exactly") {
    for (TargetLayout layout :
         {TargetLayout{4, ByteOrder::kLittle}, TargetLayout{4, ByteOrder::kBig},
          TargetLayout{8, ByteOrder::kLittle}, TargetLayout{8, ByteOrder::kBig}}) {
        CAPTURE(layout.addr_bytes);
        const GmonData written = sample(layout);
        const auto bytes = serialize_gmon(written);
        const GmonData raw = parse_gmon(bytes, layout);
        CHECK(raw.histograms.size() == 4);  // ceil(200000 / 65535)
        CHECK(raw.arcs.size() == 4);        // 5e9 needs two u32 records
        const GmonData read = merge_duplicates(raw);
        REQUIRE(read.histograms.size() == 1);
        CHECK(read.histograms[0].bins == written.histograms[0].bins);
        CHECK(read.histograms[0].low_pc == 0x410);
        CHECK(read.histograms[0].high_pc == 0x1620);
        CHECK(read.histograms[0].prof_rate == 1000);
        CHECK(read.histograms[0].dimension == "seconds");
        CHECK(read.arcs == written.arcs);
    }
}

TEST_CASE("the header is the GNU one") {
    const auto bytes = serialize_gmon(sample({4, ByteOrder::kLittle}));
    CHECK(std::string(bytes.begin(), bytes.begin() + 4) == "gmon");
    CHECK(get_uint(bytes.data() + 4, 4, ByteOrder::kLittle) == 1);
    CHECK(bytes[20] == 0);  // first record: a histogram
}

TEST_CASE("4.4BSD and old BSD files are read") {
    std::vector<std::uint8_t> f;
    const ByteOrder le = ByteOrder::kLittle;
    put_uint(f, 0x410, 4, le);
    put_uint(f, 0x418, 4, le);
    put_uint(f, 32 + 8, 4, le);  // ncnt: header + 4 bins
    put_uint(f, 0x51879, 4, le);
    put_uint(f, 5, 4, le);        // profrate
    f.insert(f.end(), 12, 0xCC);  // spare, garbage as the thesis wrote it
    for (int b : {1, 0, 65535, 2}) put_uint(f, static_cast<std::uint64_t>(b), 2, le);
    for (std::uint64_t v : {0x520u, 0xF21u, 14u, 0x530u, 0xF45u, 12u}) put_uint(f, v, 4, le);
    const GmonData d = parse_gmon(f, {4, le});
    CHECK(d.format == GmonFormat::kBsd44);
    REQUIRE(d.histograms.size() == 1);
    CHECK(d.histograms[0].prof_rate == 5);
    CHECK(d.histograms[0].bins == std::vector<std::uint64_t>{1, 0, 65535, 2});
    CHECK(d.arcs == std::vector<ArcCount>{{0x520, 0xF21, 14}, {0x530, 0xF45, 12}});

    std::vector<std::uint8_t> old;
    put_uint(old, 0x410, 4, le);
    put_uint(old, 0x414, 4, le);
    put_uint(old, 12 + 4, 4, le);
    put_uint(old, 7, 2, le);
    put_uint(old, 8, 2, le);
    const GmonData o = parse_gmon(old, {4, le});
    CHECK(o.format == GmonFormat::kBsd);
    CHECK(o.histograms[0].bins == std::vector<std::uint64_t>{7, 8});
    CHECK(o.arcs.empty());
}

TEST_CASE("truncated and malformed files are clear errors") {
    const auto bytes = serialize_gmon(sample({4, ByteOrder::kLittle}));
    for (std::size_t cut : {std::size_t{3}, std::size_t{10}, std::size_t{25}, bytes.size() - 1}) {
        std::vector<std::uint8_t> partial(bytes.begin(), bytes.begin() + static_cast<long>(cut));
        CHECK_THROWS_AS(parse_gmon(partial, {4, ByteOrder::kLittle}), GmonFormatError);
    }
    std::vector<std::uint8_t> bad_tag = bytes;
    bad_tag[20] = 7;
    CHECK_THROWS_WITH_AS(parse_gmon(bad_tag, {4, ByteOrder::kLittle}),
                         doctest::Contains("unknown gmon.out record tag"), GmonFormatError);
    CHECK_THROWS_AS(parse_gmon(std::vector<std::uint8_t>{}, {4, ByteOrder::kLittle}),
                    GmonFormatError);
}

// A fuzz input (gmon): a reader that skips to the end of a BSD header longer than the file
// passes every later bounds check (a huge allocation, then reads past the end).
TEST_CASE("a BSD file shorter than its own header is refused, not read past its end") {
    // 64-bit old BSD: low, high, ncnt (20 bytes) then 3 of the 4 header padding bytes.
    std::vector<std::uint8_t> old_bsd(23, 0x51);
    old_bsd[21] = old_bsd[22] = 0xFF;
    CHECK_THROWS_WITH_AS(parse_gmon(old_bsd, {8, ByteOrder::kLittle}),
                         doctest::Contains("truncated"), GmonFormatError);
    // 32-bit 4.4BSD: low, high, ncnt, version, rate (20 bytes) of its 32-byte header.
    const std::vector<std::uint8_t> bsd44 = {0x00, 0x04, 0,    0, 0x40, 0x04, 0, 0, 0x40, 0, 0, 0,
                                             0x79, 0x18, 0x05, 0, 0xE8, 0x03, 0, 0};
    CHECK_THROWS_WITH_AS(parse_gmon(bsd44, {4, ByteOrder::kLittle}), doctest::Contains("truncated"),
                         GmonFormatError);
}

// A fuzz input (gmon): a 64-bit BSD arc count near 2^64, split into 2^32 records of 21 bytes
// written one at a time, would need a buffer of tens of GB.
TEST_CASE("counts too wide for any sane gmon.out are refused, not written for ever") {
    GmonData arcs;
    arcs.arcs = {{0x100, 0x200, std::uint64_t{1} << 63}};
    CHECK_THROWS_AS(serialize_gmon(arcs), std::length_error);
    GmonData bins;
    bins.histograms.push_back({0x100, 0x900, 1000, "seconds", 's', {}});
    bins.histograms[0].bins.assign(1024, 0);
    bins.histograms[0].bins[3] = std::uint64_t{1} << 40;  // 2^24 records of 2 KB each
    CHECK_THROWS_AS(serialize_gmon(bins), std::length_error);
    bins.histograms[0].bins[3] = 70000;  // two records: written
    CHECK(serialize_gmon(bins).size() > 2 * 2048);
}

TEST_CASE("partially overlapping histograms are refused, as gprof refuses them") {
    GmonData d;
    Histogram a;
    a.low_pc = 0x100;
    a.high_pc = 0x200;
    a.bins.assign(128, 1);
    Histogram b = a;
    b.low_pc = 0x180;
    b.high_pc = 0x280;
    d.histograms = {a, b};
    CHECK_THROWS_AS(merge_duplicates(d), GmonFormatError);
}

// index_gmon against parse_gmon + merge_duplicates on the same bytes: the same shapes, arcs
// and bins (read in place, copies summed).
void check_index_reads_as_parse(const std::vector<std::uint8_t>& bytes, const TargetLayout& t) {
    const GmonData merged = merge_duplicates(parse_gmon(bytes, t));
    const GmonIndex index = index_gmon(bytes, t);
    CHECK(index.format == merged.format);
    CHECK(index.arcs == merged.arcs);
    REQUIRE(index.histograms.size() == merged.histograms.size());
    for (std::size_t h = 0; h < merged.histograms.size(); ++h) {
        const Histogram& m = merged.histograms[h];
        const HistogramInPlace& in = index.histograms[h];
        CHECK(in.header.low_pc == m.low_pc);
        CHECK(in.header.high_pc == m.high_pc);
        CHECK(in.header.prof_rate == m.prof_rate);
        CHECK(in.header.bins.empty());  // never widened
        REQUIRE(in.bins == m.bins.size());
        for (std::uint64_t i = 0; i < in.bins; ++i)
            CHECK(bin_in_place(bytes, in, i, t.order) == m.bins[i]);
    }
}

TEST_CASE("index_gmon reads what parse_gmon and merge_duplicates read, bins left in place") {
    for (const TargetLayout t :
         {TargetLayout{4, ByteOrder::kLittle}, TargetLayout{8, ByteOrder::kBig}}) {
        CAPTURE(t.addr_bytes);
        GmonData d;
        d.layout = t;
        Histogram high;
        high.low_pc = 0x2000;
        high.high_pc = 0x2010;
        high.prof_rate = 5;
        high.bins = {1, 0, 70000, 3, 0, 0, 9, 65535};  // 70000: two records, summed back
        Histogram low;
        low.low_pc = 0x1000;
        low.high_pc = 0x1006;
        low.bins = {4, 0, 2};
        d.histograms = {high, low};
        d.arcs = {{0x1004, 0x2000, 7}, {0x1002, 0x2000, 1}, {0x1004, 0x2000, 3}};
        check_index_reads_as_parse(serialize_gmon(d), t);
    }
    // A 4.4BSD file: one histogram after the header, pointer-sized arc counts.
    std::vector<std::uint8_t> f;
    const ByteOrder le = ByteOrder::kLittle;
    put_uint(f, 0x410, 4, le);
    put_uint(f, 0x418, 4, le);
    put_uint(f, 32 + 8, 4, le);
    put_uint(f, 0x51879, 4, le);
    put_uint(f, 5, 4, le);
    f.insert(f.end(), 12, 0);
    for (int b : {1, 0, 65535, 2}) put_uint(f, static_cast<std::uint64_t>(b), 2, le);
    for (std::uint64_t v : {0x520u, 0xF21u, 14u}) put_uint(f, v, 4, le);
    check_index_reads_as_parse(f, {4, le});
    // The same refusals.
    GmonData overlapping;
    Histogram a;
    a.low_pc = 0x100;
    a.high_pc = 0x200;
    a.bins.assign(128, 1);
    Histogram b = a;
    b.low_pc = 0x180;
    b.high_pc = 0x280;
    overlapping.histograms = {a, b};
    CHECK_THROWS_AS(index_gmon(serialize_gmon(overlapping), {}), GmonFormatError);
    auto cut = serialize_gmon(overlapping);
    cut.resize(cut.size() - 1);
    CHECK_THROWS_WITH_AS(index_gmon(cut, {}), doctest::Contains("truncated"), GmonFormatError);
}

// A gmon.out may hold tens of thousands of histogram records (one per code region of a
// profiled build): reading, merging and binning them stay near linear (each was a scan of all
// the others per record and per PC: 80 000 records took 20 s to import and 15 s per export).
TEST_CASE("many histogram records: read, merged and binned exactly, in near-linear time") {
    constexpr std::uint64_t kRecords = 40'000;
    const TargetLayout t{4, ByteOrder::kLittle};
    Aggregate a;
    std::vector<HistogramSpec> specs;
    for (std::uint64_t i = 0; i < kRecords; ++i) {
        // Regions 16 bytes apart, 8 bytes each (4 bins of 2 bytes), listed out of order.
        const std::uint64_t low = 0x10000 + 16 * ((i * 7919) % kRecords);
        specs.push_back({low, low + 8, 2, 1000, 4});
        a.add_pc(low + 2 * (i % 4), i + 1);
    }
    a.add_pc(0x10000 + 10, 5);  // between two regions
    const auto started = std::chrono::steady_clock::now();
    const BinningResult binned = to_gmon_data(a, specs, t);
    const std::vector<std::uint8_t> bytes = serialize_gmon(binned.data);
    GmonData read = parse_gmon(bytes, t);
    read.histograms.push_back(read.histograms[17]);  // a copy of one range: merged, not refused
    const GmonData merged = merge_duplicates(read);
    const GmonIndex index = index_gmon(bytes, t);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    MESSAGE(kRecords << " histogram records binned, written, read, merged and indexed in "
                     << seconds << " s");
    std::cout << "FIGURE many_histogram_records.seconds = " << seconds << " s for " << kRecords
              << " records\n";
    CHECK(seconds < 5.0);  // near-linear: a few hundred ms, even sanitized

    CHECK(binned.samples_outside == 5);
    REQUIRE(merged.histograms.size() == kRecords);
    REQUIRE(index.histograms.size() == kRecords);
    std::uint64_t total = 0, doubled_low = 0;
    for (const Histogram& h : merged.histograms) total += h.total();
    for (const Histogram& h : read.histograms)
        if (h.low_pc == read.histograms[17].low_pc) doubled_low += h.total();
    CHECK(total == kRecords * (kRecords + 1) / 2 + read.histograms[17].total());
    CHECK(doubled_low == 2 * read.histograms[17].total());
    bool in_order = true;
    for (std::size_t i = 1; i < merged.histograms.size(); ++i)
        in_order = in_order && merged.histograms[i - 1].high_pc <= merged.histograms[i].low_pc;
    CHECK(in_order);
}

TEST_CASE("PCs spread over the whole address space give wider bins, not a giant histogram") {
    Aggregate a;
    a.add_pc(0x10, 3);
    a.add_pc(0x2000, 1);
    a.add_pc(0xFFFFFFF0, 2);  // e.g. decoded from garbage, or a HELLO's bogus text range
    for (const auto& spec :
         {histogram_spec(a, std::nullopt),
          histogram_spec(a, std::pair<std::uint64_t, std::uint64_t>(0, std::uint64_t{1} << 32))}) {
        CHECK(spec.bin_bytes > 2);
        CHECK((spec.high_pc - spec.low_pc) / spec.bin_bytes <= (1u << 22));
        const auto binned = to_gmon_data(a, spec, TargetLayout{});
        REQUIRE(binned.data.histograms.size() == 1);
        CHECK(binned.data.histograms[0].total() == 6);  // every sample kept
    }
    // A small range keeps gprof's 2-byte bins.
    Aggregate small;
    small.add_pc(0x410, 1);
    small.add_pc(0x2000, 1);
    const auto spec = histogram_spec(small, std::nullopt);
    CHECK(spec.bin_bytes == 2);
    CHECK(spec.low_pc == 0x410);
    CHECK(spec.high_pc == 0x2002);
}

}  // namespace
}  // namespace rackprof::gmon
