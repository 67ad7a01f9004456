#include "gmon/profile_pipeline.h"

#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <set>

#include "gmon/export.h"
#include "gmon/gmon_reader.h"
#include "gmon/gmon_writer.h"
#include "gmon/report.h"
#include "gmon/synthetic_elf.h"
#include "gmon/temp_elf_test.h"

namespace rackprof::gmon {
namespace {

// The program of this file's tests.
struct ProgramElf : TempElf {
    ProgramElf() : TempElf({{"main", 0x100, 0x40}, {"work", 0x140, 0x40}}, 0x100, 0x180) {}
};

std::shared_ptr<const Aggregate> some_aggregate() {
    auto a = std::make_shared<Aggregate>();
    a->add_arc(0x104, 0x140, 7);
    a->add_pc(0x150, 30);
    a->add_pc(0x110, 10);
    return a;
}

std::string all_of(const std::string& format, std::shared_ptr<const ExportInput> input) {
    std::string out;
    export_to(format, std::move(input), [&](std::string_view chunk) { out += chunk; });
    return out;
}

TEST_CASE("the code range: the ELF's, else the announced text range, else the PCs seen") {
    ProgramElf elf;
    ProfileSource s;
    s.aggregate = some_aggregate();
    CHECK_FALSE(code_range_of(s).has_value());
    CHECK(histogram_specs(s).front().low_pc == 0x110);  // the PCs seen
    s.announced_range = CodeRange{0x100, 0x200};
    CHECK(code_range_of(s) == CodeRange{0x100, 0x200});
    s.elf = Symbolizer::load(elf.path);
    CHECK(code_range_of(s) == CodeRange{0x100, 0x180});  // the ELF wins
    const auto binned = gmon_data_of(s);
    REQUIRE(binned.data.histograms.size() == 1);
    CHECK(binned.data.histograms[0].low_pc == 0x100);
    CHECK(binned.data.histograms[0].high_pc == 0x180);
    CHECK(binned.data.histograms[0].total() == 40);
    CHECK(binned.samples_outside == 0);
    s.announced_range = CodeRange{0x200, 0x100};  // empty: ignored
    s.elf = nullptr;
    CHECK_FALSE(code_range_of(s).has_value());
}

TEST_CASE("histogram shapes from a gmon.out are reproduced exactly, with their rate") {
    // 7 bins over 20 bytes: a fractional bin width, at 5 samples per second.
    Histogram h;
    h.low_pc = 0x100;
    h.high_pc = 0x114;
    h.prof_rate = 5;
    h.bins = {1, 0, 3, 70000, 5, 0, 9};
    const HistogramSpec shape = shape_of(h);
    CHECK(shape.bins == 7);
    Aggregate a;
    for (std::uint64_t i = 0; i < h.bins.size(); ++i) {
        const auto pc = bin_address(shape, i);
        CHECK(pc >= h.low_pc);
        CHECK(pc < h.high_pc);
        if (h.bins[i]) a.add_pc(pc, h.bins[i]);
    }
    ProfileSource s;
    s.aggregate = std::make_shared<const Aggregate>(a);
    s.histograms = std::vector<HistogramSpec>{shape};
    const auto binned = gmon_data_of(s);
    REQUIRE(binned.data.histograms.size() == 1);
    CHECK(binned.data.histograms[0].bins == h.bins);
    CHECK(binned.data.histograms[0].low_pc == h.low_pc);
    CHECK(binned.data.histograms[0].high_pc == h.high_pc);
    CHECK(binned.data.histograms[0].prof_rate == 5);
    // No histograms at all stays none (an arcs-only gmon.out).
    s.histograms = std::vector<HistogramSpec>{};
    CHECK(gmon_data_of(s).data.histograms.empty());
}

TEST_CASE("a profile needs the ELF; with it, the pipeline equals the engine on the same data") {
    ProgramElf elf;
    ProfileSource s;
    s.aggregate = some_aggregate();
    CHECK_THROWS_AS(profile_of(s), std::invalid_argument);
    s.elf = Symbolizer::load(elf.path);
    const auto data =
        to_gmon_data(*s.aggregate, histogram_spec(*s.aggregate, CodeRange{0x100, 0x180}),
                     s.elf->layout())
            .data;
    CHECK(render_gprof_text(profile_of(s)) == render_gprof_text(compute_profile(data, *s.elf)));
}

TEST_CASE("every export format is registered once and opens") {
    ProgramElf elf;
    auto input = std::make_shared<ExportInput>();
    input->source.aggregate = some_aggregate();
    input->source.elf = Symbolizer::load(elf.path);
    input->records = [n = 0]() mutable -> std::optional<std::vector<RecordBatch>> {
        if (n++) return std::nullopt;
        return std::vector<RecordBatch>{{42, {protocol::Record::arc(0x104, 0x140)}}};
    };
    input->raw = [n = 0]() mutable -> std::optional<std::string> {
        if (n++ == 2) return std::nullopt;
        return std::string("ab");
    };
    std::set<std::string_view> suffixes;
    for (const auto& f : export_formats()) {
        CAPTURE(f.name);
        CHECK(find_export_format(f.name) == &f);
        CHECK_FALSE(f.content_type.empty());
        CHECK_FALSE(f.file_suffix.empty());
        // Two downloads of one session never share a file name (text and text-intervals did).
        CHECK(suffixes.insert(f.file_suffix).second);
    }
    CHECK(
        export_format_names() ==
        "gmon, text, text-intervals, text-lines, json, csv, ndjson, raw, pprof, callgrind, folded, "
        "speedscope, dot, svg, cct-folded, cct-speedscope, cct-pprof, cct-json, tasks, tasks-json "
        "or trace");
    const auto gmon = all_of("gmon", input);
    const auto expected = serialize_gmon(gmon_data_of(input->source).data);
    CHECK(gmon == std::string(expected.begin(), expected.end()));
    CHECK(all_of("text", input) == render_gprof_text(profile_of(input->source)));
    CHECK(all_of("csv", input) ==
          "kind,from,self,pc,count\narc,0x104,0x140,,7\npc,,,0x110,10\npc,,,0x150,30\n");
    CHECK(all_of("ndjson", input) ==
          "{\"t\":42,\"kind\":\"arc\",\"from\":\"0x104\",\"self\":\"0x140\",\"count\":1}\n");
    CHECK(all_of("raw", input) == "abab");
    const auto report = nlohmann::json::parse(all_of("json", input));
    CHECK(report["schema"] == "rackprof.report/1");
    CHECK(report["raw"]["histograms"][0]["samples"] == 40);
    CHECK(report["profile"]["total_samples"] == 40);
    CHECK_THROWS_AS(open_export("bmp", input), std::invalid_argument);
}

// The JSON export is streamed; it prints what dump(2) printed of the report as a document.
TEST_CASE("the JSON export equals the report document it replaced, byte for byte") {
    ProgramElf elf;
    auto aggregate = std::make_shared<Aggregate>();
    for (std::uint64_t i = 0; i < 200; ++i) {
        aggregate->add_arc(0x100 + 2 * (i * 7 % 0x40) + 1, (i % 3 ? 0x140 : 0x100) + 1, 1 + i);
        aggregate->add_pc(0x100 + 2 * (i * 13 % 0x40), 1 + i % 9);
    }
    for (const bool with_elf : {true, false}) {
        CAPTURE(with_elf);
        auto input = std::make_shared<ExportInput>();
        input->source.aggregate = aggregate;
        if (with_elf) input->source.elf = Symbolizer::load(elf.path);
        input->summary = {{"input", "capture.bin"},
                          {"decoder", {{"arcs", 200}, {"resyncs", 0}}},
                          {"board", "b\xB5"}};
        input->json_options = {5, 0.0, {}, {}, {}};
        const auto binned = gmon_data_of(input->source);
        nlohmann::json arcs = nlohmann::json::array();
        for (const auto& a : binned.data.arcs) {
            arcs.push_back({{"from", hex_address(a.from_pc)},
                            {"self", hex_address(a.self_pc)},
                            {"count", a.count}});
        }
        nlohmann::json histograms = nlohmann::json::array();
        for (const auto& h : binned.data.histograms) {
            histograms.push_back({{"low_pc", hex_address(h.low_pc)},
                                  {"high_pc", hex_address(h.high_pc)},
                                  {"bins", h.bins.size()},
                                  {"prof_rate", h.prof_rate},
                                  {"samples", h.total()}});
        }
        const nlohmann::json reference = {
            {"schema", "rackprof.report/1"},
            {"source", input->summary},
            {"raw",
             {{"arcs", arcs},
              {"histograms", histograms},
              {"samples_outside_histogram", binned.samples_outside}}},
            {"profile", with_elf ? profile_json(profile_of(input->source), input->json_options)
                                 : nlohmann::json(nullptr)}};
        CHECK(all_of("json", input) ==
              reference.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    }
}

// An import's ?board= with a byte 0xB5 is stored as it came; the JSON export must not throw on
// it (a 500 for that session for ever).
TEST_CASE("the JSON export replaces bytes that are not UTF-8") {
    auto input = std::make_shared<ExportInput>();
    input->source.aggregate = some_aggregate();
    input->summary = {{"board", "b\xB5"}};
    CHECK(nlohmann::json::parse(all_of("json", input))["source"]["board"] == "b\xEF\xBF\xBD");
}

TEST_CASE("exports say what a source lacks") {
    auto input = std::make_shared<ExportInput>();
    input->source.aggregate = some_aggregate();
    CHECK_THROWS_AS(open_export("ndjson", input), std::invalid_argument);
    CHECK_THROWS_AS(open_export("raw", input), std::invalid_argument);
    // Without an ELF: the text lists the arcs, the JSON report has no profile.
    CHECK(all_of("text", input) == "Call arcs (from -> self: count):\n  0x104 -> 0x140: 7\n");
    CHECK(nlohmann::json::parse(all_of("json", input))["profile"].is_null());
}

}  // namespace
}  // namespace rackprof::gmon
