// The stack and call-graph exports (folded, speedscope, dot, svg) by all three roads: rackprof
// convert --export, a session's /export/{format} and a selection's /profile/export/{format}.
// The oracles are the simulator's exact truth, speedscope's JSON schema with a real validator
// (python3-jsonschema), Graphviz's dot and an XML parser.
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "tests/integration/test_support.h"

namespace rackprof {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using Folded = std::map<std::string, std::uint64_t>;

const std::filesystem::path kSchema = std::filesystem::path(RACKPROF_SOURCE_DIR) / "tests" /
                                      "integration" / "data" / "speedscope-file-format-schema.json";
// Debian's python3 with python3-jsonschema (setup.sh), whatever python3 PATH finds first.
constexpr const char* kPython = "/usr/bin/python3";

struct Simulated {
    std::filesystem::path capture, elf, truth;
};

Simulated simulate(const testing::TempDir& dir, const std::string& model, int iterations,
                   const std::string& name) {
    Simulated out{dir / (name + ".bin"), dir / (name + ".elf"), dir / (name + ".truth.json")};
    const auto r = testing::rackprof(
        {"simulate", "--model", model, "--iterations", std::to_string(iterations), "-o",
         out.capture.string(), "--truth", out.truth.string(), "--write-elf", out.elf.string()});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return out;
}

std::uint64_t truth_samples(const std::filesystem::path& truth) {
    const json document = json::parse(testing::read_text(truth));  // outlives the loop
    std::uint64_t samples = 0;
    for (const auto& pc : document["pc_samples"]) samples += pc["count"].get<std::uint64_t>();
    return samples;
}

std::string converted(const Simulated& s, const std::string& format,
                      const std::filesystem::path& out) {
    const auto r = testing::rackprof({"convert", s.capture.string(), "--elf", s.elf.string(),
                                      "--export", format, "-o", out.string()});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return testing::read_text(out);
}

// `stack count` lines; every line must be one.
Folded folded_of(const std::string& text) {
    Folded out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        const auto space = line.rfind(' ');
        REQUIRE_MESSAGE(space != std::string::npos, line);
        out[line.substr(0, space)] += std::stoull(line.substr(space + 1));
    }
    return out;
}

std::uint64_t sum_of(const Folded& folded) {
    std::uint64_t sum = 0;
    for (const auto& [stack, count] : folded) sum += count;
    return sum;
}

// The deterministic model's call paths per pass of its main loop, with the samples each
// leaves in its last function: every function has one caller (the ping/pong cycle is entered
// from main only), so gprof's estimate is the truth.
Folded deterministic_stacks(std::uint64_t iterations) {
    Folded per_pass = {{"main", 1},
                       {"main;alpha", 6},
                       {"main;alpha;beta", 6},
                       {"main;alpha;beta;gamma", 120},
                       {"main;factorial", 5},
                       {"main;ping", 6},
                       {"main;ping;pong", 4}};
    for (auto& [stack, count] : per_pass) count *= iterations;
    return per_pass;
}

// The functions (nodes) of a DOT graph as the export writes them: "\tfN [".
std::vector<std::string> dot_nodes(const std::string& dot) {
    std::vector<std::string> out;
    const std::regex node(R"(\n\t(f\d+) \[)");
    for (auto it = std::sregex_iterator(dot.begin(), dot.end(), node); it != std::sregex_iterator();
         ++it)
        out.push_back((*it)[1]);
    std::sort(out.begin(), out.end());
    return out;
}

// The node titles of an SVG that Graphviz drew, read by Python's XML parser (which fails on a
// document that is not well-formed).
std::vector<std::string> svg_nodes(const std::filesystem::path& svg) {
    const auto r =
        testing::run({kPython, "-c",
                      "import sys, xml.etree.ElementTree as ET\n"
                      "ns = {'s': 'http://www.w3.org/2000/svg'}\n"
                      "root = ET.parse(sys.argv[1]).getroot()\n"
                      "for g in root.iter('{http://www.w3.org/2000/svg}g'):\n"
                      "    if g.get('class') == 'node': print(g.find('s:title', ns).text)\n",
                      svg.string()});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    std::vector<std::string> out;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    std::sort(out.begin(), out.end());
    return out;
}

testing::CommandResult validate_speedscope(const std::filesystem::path& document) {
    return testing::run({kPython, "-c",
                         "import json, sys, jsonschema\n"
                         "schema = json.load(open(sys.argv[2]))\n"
                         "jsonschema.validators.validator_for(schema).check_schema(schema)\n"
                         "jsonschema.validate(json.load(open(sys.argv[1])), schema)\n",
                         document.string(), kSchema.string()});
}

TEST_CASE("folded stacks: the deterministic model's exact call paths, every sample once") {
    testing::TempDir dir;
    const auto det = simulate(dir, "deterministic", 7, "det");
    const Folded folded = folded_of(converted(det, "folded", dir / "det.folded"));
    CHECK(folded == deterministic_stacks(7));
    CHECK(sum_of(folded) == truth_samples(det.truth));
}

// fast() and slow() each call doSomething() once a pass, slow()'s call doing 100 times the
// work: gprof charges each caller half of doSomething's time, and so do the stacks.
TEST_CASE("folded stacks charge a callee's time by calls, as gprof does (not the truth)") {
    testing::TempDir dir;
    const auto conflation = simulate(dir, "conflation", 4, "conflation");
    const Folded folded = folded_of(converted(conflation, "folded", dir / "c.folded"));
    CHECK(folded == Folded{{"main;fast;doSomething", 202}, {"main;slow;doSomething", 202}});
    CHECK(sum_of(folded) == truth_samples(conflation.truth));
}

TEST_CASE("speedscope: valid by speedscope's schema, weights sum to the samples") {
    testing::TempDir dir;
    const auto det = simulate(dir, "deterministic", 3, "det");
    const auto file = dir / "det.speedscope.json";
    const json doc = json::parse(converted(det, "speedscope", file));
    const auto valid = validate_speedscope(file);
    CHECK_MESSAGE(valid.exit_code == 0, valid.err);
    const auto& profile = doc["profiles"][0];
    std::uint64_t weights = 0;
    Folded stacks;
    for (std::size_t i = 0; i < profile["samples"].size(); ++i) {
        std::string names;
        for (const auto& f : profile["samples"][i]) {
            names += (names.empty() ? "" : ";") +
                     doc["shared"]["frames"][f.get<std::size_t>()]["name"].get<std::string>();
        }
        stacks[names] += profile["weights"][i].get<std::uint64_t>();
        weights += profile["weights"][i].get<std::uint64_t>();
    }
    CHECK(weights == truth_samples(det.truth));
    CHECK(stacks == deterministic_stacks(3));

    // The validator does reject: the same document without its weights is not speedscope's.
    json broken = doc;
    broken["profiles"][0].erase("weights");
    std::ofstream(dir / "broken.json") << broken.dump();
    CHECK(validate_speedscope(dir / "broken.json").exit_code != 0);
}

TEST_CASE("speedscope frames carry source files and lines from the ELF's DWARF") {
    const auto data = testing::shared_data("speedscope source lines");
    if (data.empty()) return;
    testing::TempDir dir;
    const auto file = dir / "blink.speedscope.json";
    const auto r = testing::rackprof({"convert", (data / "blink1gmon.out").string(), "--format",
                                      "gmon", "--elf", (data / "blinky.elf").string(), "--export",
                                      "speedscope", "-o", file.string()});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(validate_speedscope(file).exit_code == 0);
    const json doc = json::parse(testing::read_text(file));
    std::size_t with_lines = 0;
    for (const auto& frame : doc["shared"]["frames"]) {
        if (frame.contains("file") && frame.contains("line")) ++with_lines;
    }
    CHECK(with_lines > 0);
}

TEST_CASE("dot: Graphviz's dot draws it; the svg export has one node per function kept") {
    testing::TempDir dir;
    const auto det = simulate(dir, "deterministic", 5, "det");
    const std::string dot = converted(det, "dot", dir / "det.dot");
    const auto drawn = testing::run(
        {"dot", "-Tsvg", (dir / "det.dot").string(), "-o", (dir / "by-dot.svg").string()});
    CHECK_MESSAGE(drawn.exit_code == 0, drawn.err);
    CHECK(drawn.err.empty());  // not even a warning
    // Every function of the model holds more than 0.5 % of the time.
    const auto nodes = dot_nodes(dot);
    CHECK(nodes.size() == 7);
    converted(det, "svg", dir / "det.svg");
    CHECK(svg_nodes(dir / "det.svg") == nodes);
    CHECK(svg_nodes(dir / "by-dot.svg") == nodes);
}

std::string config_of(const testing::TempDir& dir, const std::vector<std::string>& boards) {
    std::string config = "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\npath = \"" +
                         (dir / "rack.db").string() + "\"\n";
    for (const auto& name : boards) {
        config += "[[boards]]\nname = \"" + name + "\"\nlink = \"file://" +
                  (dir / (name + ".bin")).string() + "?pace=fast\"\n";
        if (name != "no-elf") config += "elf = \"" + (dir / "det.elf").string() + "\"\n";
    }
    return config;
}

TEST_CASE("the stack and graph exports of a stored session and of a fleet selection") {
    testing::TempDir dir;
    const auto a = simulate(dir, "deterministic", 3, "det-a");
    simulate(dir, "deterministic", 5, "det-b");
    simulate(dir, "deterministic", 2, "no-elf");
    std::filesystem::copy_file(a.elf, dir / "det.elf");  // one build for all three
    std::ofstream(dir / "rack.toml") << config_of(dir, {"det-a", "det-b", "no-elf"});
    testing::Process daemon(
        testing::rackprof_argv({"serve", "--config", (dir / "rack.toml").string()}),
        dir / "serve.log");
    const std::string port = testing::wait_for_api_port(dir / "serve.log");
    std::map<std::string, std::string> session_of;  // board -> session id
    REQUIRE(testing::eventually(
        [&] {
            const auto reply = testing::http_get(port, "/api/v1/sessions");
            if (reply.status != 200) return false;
            const json sessions = json::parse(reply.body);
            session_of.clear();
            for (const auto& s : sessions) {
                if (s["state"] != "completed") return false;
                session_of[s["board"]] = std::to_string(s["id"].get<std::int64_t>());
            }
            return session_of.size() == 3;
        },
        20s));

    // A session: the same bytes convert writes for its capture.
    const std::string session = "/api/v1/sessions/" + session_of["det-a"] + "/export/";
    const auto folded = testing::http_get(port, session + "folded");
    REQUIRE(folded.status == 200);
    CHECK(folded.body == converted(a, "folded", dir / "a.folded"));
    CHECK(folded_of(folded.body) == deterministic_stacks(3));
    const auto speedscope = dir / "session.speedscope.json";
    CHECK(testing::http_get(port, session + "speedscope", speedscope).status == 200);
    CHECK(validate_speedscope(speedscope).exit_code == 0);
    const auto dot = testing::http_get(port, session + "dot");
    REQUIRE(dot.status == 200);
    CHECK(dot.body == converted(a, "dot", dir / "a.dot"));
    const auto svg = dir / "session.svg";
    CHECK(testing::http_get(port, session + "svg", svg).status == 200);
    CHECK(svg_nodes(svg) == dot_nodes(dot.body));
    // Without an ELF no function has a name: refused as the profile is.
    const auto no_elf =
        testing::http_get(port, "/api/v1/sessions/" + session_of["no-elf"] + "/export/folded");
    CHECK(no_elf.status == 422);
    CHECK(no_elf.body.find("no_elf") != std::string::npos);

    // A selection of two boards: the sum of their stacks.
    const std::string selection = "?board=det-a,det-b";
    const auto fleet = testing::http_get(port, "/api/v1/profile/export/folded" + selection);
    REQUIRE(fleet.status == 200);
    CHECK(folded_of(fleet.body) == deterministic_stacks(8));
    const auto fleet_svg = dir / "fleet.svg";
    CHECK(testing::http_get(port, "/api/v1/profile/export/svg" + selection, fleet_svg).status ==
          200);
    CHECK(svg_nodes(fleet_svg).size() == 7);
    const auto fleet_speedscope = dir / "fleet.speedscope.json";
    CHECK(testing::http_get(port, "/api/v1/profile/export/speedscope" + selection, fleet_speedscope)
              .status == 200);
    CHECK(validate_speedscope(fleet_speedscope).exit_code == 0);
}

}  // namespace
}  // namespace rackprof
