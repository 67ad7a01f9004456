// The stack and call-graph exports on a small profile: folded, speedscope, dot and svg.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>

#include "gmon/dot_export.h"
#include "gmon/export.h"
#include "gmon/folded_export.h"
#include "gmon/speedscope_export.h"
#include "gmon/svg_render.h"
#include "gmon/synthetic_elf.h"
#include "gmon/temp_elf_test.h"

namespace rackprof::gmon {
namespace {

// The program of this file's tests.
struct ProgramElf : TempElf {
    ProgramElf()
        : TempElf({{"main", 0x100, 0x20},
                   {"fast", 0x120, 0x20},
                   {"slow", 0x140, 0x20},
                   {"work", 0x160, 0x20},
                   {"rare", 0x180, 0x20}},
                  0x100, 0x1A0) {}
};

// main -> fast -> work, main -> slow -> work, main -> rare (0.2 % of the time).
std::shared_ptr<ExportInput> input_of(const TempElf& elf) {
    auto a = std::make_shared<Aggregate>();
    a->add_arc(0x105, 0x125, 10);
    a->add_arc(0x109, 0x145, 10);
    a->add_arc(0x10D, 0x185, 1);
    a->add_arc(0x129, 0x165, 10);
    a->add_arc(0x149, 0x165, 30);
    a->add_pc(0x168, 398);
    a->add_pc(0x104, 100);
    a->add_pc(0x188, 1);
    a->add_pc(0x12A, 1);
    auto input = std::make_shared<ExportInput>();
    input->source.aggregate = a;
    input->source.elf = Symbolizer::load(elf.path);
    return input;
}

std::string all_of(const std::string& format, std::shared_ptr<const ExportInput> input) {
    std::string out;
    export_to(format, std::move(input), [&](std::string_view chunk) { out += chunk; });
    return out;
}

std::size_t count_of(const std::string& text, const std::regex& pattern) {
    return static_cast<std::size_t>(std::distance(
        std::sregex_iterator(text.begin(), text.end(), pattern), std::sregex_iterator()));
}

TEST_CASE("gprof2dot's temperature colours: dark blue, green, red") {
    CHECK(temperature_colour(0) == "#0d0d73");
    CHECK(temperature_colour(1) == "#ff0000");
    CHECK(temperature_colour(-3) == "#0d0d73");
    CHECK(temperature_colour(0.5) == "#0ab60a");  // HSL(1/3, 0.9, 0.375)
}

TEST_CASE("folded and speedscope exports hold every sample, on the same stacks") {
    ProgramElf elf;
    const auto input = input_of(elf);
    CHECK(all_of("folded", input) ==
          "main 100\nmain;fast 1\nmain;fast;work 100\nmain;rare 1\nmain;slow;work 298\n");
    const auto doc = nlohmann::json::parse(all_of("speedscope", input));
    CHECK(doc["$schema"] == "https://www.speedscope.app/file-format-schema.json");
    REQUIRE(doc["profiles"].size() == 1);
    const auto& profile = doc["profiles"][0];
    CHECK(profile["type"] == "sampled");
    CHECK(profile["endValue"] == 500);
    REQUIRE(profile["samples"].size() == profile["weights"].size());
    std::uint64_t sum = 0;
    std::map<std::string, std::uint64_t> stacks;
    for (std::size_t i = 0; i < profile["samples"].size(); ++i) {
        std::string names;
        for (const auto& f : profile["samples"][i])
            names += (names.empty() ? "" : ";") +
                     doc["shared"]["frames"][f.get<std::size_t>()]["name"].get<std::string>();
        stacks[names] += profile["weights"][i].get<std::uint64_t>();
        sum += profile["weights"][i].get<std::uint64_t>();
    }
    CHECK(sum == 500);
    CHECK(stacks["main;slow;work"] == 298);
    CHECK(doc["shared"]["frames"].size() == 5);  // each function once
    // Timed samples are time: a sample is a period of 1 ms at 1000 Hz, 4 ms at 250 Hz.
    CHECK(profile["unit"] == "milliseconds");
    input->profile_options.prof_rate_override = 250;
    const auto slower = nlohmann::json::parse(all_of("speedscope", input))["profiles"][0];
    CHECK(slower["endValue"] == 2000);
    double ms = 0;
    for (const auto& w : slower["weights"]) ms += w.get<double>();
    CHECK(ms == 2000);
}

TEST_CASE("the dot call graph leaves out what is below the thresholds, as gprof2dot does") {
    ProgramElf elf;
    const auto input = input_of(elf);
    const std::string dot = all_of("dot", input);
    CAPTURE(dot);
    // rare holds 0.2 % of the time: below 0.5 %, left out with its arc.
    CHECK(count_of(dot, std::regex(R"(\n\tf\d+ \[)")) == 4);
    CHECK(dot.find("rare") == std::string::npos);
    CHECK(dot.find("label=\"main\\n100.00%\\n(20.00%)\"") != std::string::npos);
    CHECK(dot.find("label=\"work\\n79.60%\\n(79.60%)\\n40\xC3\x97\"") != std::string::npos);
    CHECK(count_of(dot, std::regex(R"(\n\tf\d+ -> f\d+ )")) == 4);
    CHECK(dot.find("label=\"59.70%\\n30\xC3\x97\"") != std::string::npos);  // slow -> work
    DotOptions all;
    all.node_threshold = 0;
    all.edge_threshold = 0;
    CHECK(call_graph_dot(profile_of(input->source), all).find("rare") != std::string::npos);

    const std::string svg = all_of("svg", input);
    CHECK(svg.find("<svg") != std::string::npos);
    CHECK(count_of(svg, std::regex(R"(class="node")")) == 4);
    CHECK(count_of(svg, std::regex(R"(class="edge")")) == 4);
    CHECK_THROWS_WITH_AS(render_svg("digraph {"), doctest::Contains("syntax error"),
                         std::runtime_error);
}

TEST_CASE("stack and graph exports need the ELF") {
    auto input = std::make_shared<ExportInput>();
    for (const char* format : {"folded", "speedscope", "dot", "svg"}) {
        CAPTURE(format);
        CHECK_THROWS_AS(open_export(format, input), std::invalid_argument);
    }
}

}  // namespace
}  // namespace rackprof::gmon
