// The calling-context tree end to end: an ITM capture with orbuculum's orbstat enter/exit words
// (known 24-bit cycle stamps, wrapping) of the thesis' fig. 4 shape, fast() -> doSomething()
// taking 100 cycles and slow() -> doSomething() 900, by `rackprof convert` and through a real
// daemon's import and exports. The measured split is 10 % / 90 % where gprof's call-count
// estimate says 50 / 50. The oracles: exact cycles, speedscope's JSON schema with a real
// validator, `go tool pprof -traces`.
#include <signal.h>

#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "gmon/synthetic_elf.h"
#include "protocol/swo_encoder.h"
#include "tests/integration/test_support.h"

namespace rackprof {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr std::uint32_t kStart = 0x1400, kMain = 0x1000, kFast = 0x1100, kSlow = 0x1200,
                        kDo = 0x1300;
constexpr int kRounds = 5;
constexpr std::uint16_t kOrbstatPort = 30;

const std::filesystem::path kSchema = std::filesystem::path(RACKPROF_SOURCE_DIR) / "tests" /
                                      "browser" / "node_modules" / "speedscope" / "dist" /
                                      "release" / "file-format-schema.json";

// The firmware: _start calls main, main calls fast and slow, each calls doSomething.
std::filesystem::path write_elf(const std::filesystem::path& dir) {
    const auto path = dir / "fig4.elf";
    gmon::write_synthetic_elf(path,
                              {{"main", kMain, 0x100},
                               {"fast", kFast, 0x100},
                               {"slow", kSlow, 0x100},
                               {"doSomething", kDo, 0x100},
                               {"_start", kStart, 0x40}},
                              0x1000, 0x1440);
    return path;
}

// orbstat: 0x4 (enter) or 0x5 (exit) with a 24-bit stamp, then call site, then the function
// (Thumb bit set, as -finstrument-functions passes it).
class OrbstatWriter {
  public:
    explicit OrbstatWriter(protocol::ItmEncoder& itm) : itm_(itm) {}
    void at(std::uint32_t cycles_later) { stamp_ += cycles_later; }
    void enter(std::uint32_t site, std::uint32_t fn) { event(0x4, site, fn); }
    void exit(std::uint32_t site, std::uint32_t fn) { event(0x5, site, fn); }

  private:
    void event(std::uint32_t kind, std::uint32_t site, std::uint32_t fn) {
        for (const std::uint32_t word : {kind << 28 | (stamp_ & 0xFFFFFF), site | 1, fn | 1})
            itm_.software(kOrbstatPort, word, 4);
    }
    protocol::ItmEncoder& itm_;
    std::uint32_t stamp_ = 0xFFFF00;  // wraps in the first round
};

std::filesystem::path write_capture(const std::filesystem::path& dir) {
    std::vector<std::uint8_t> bytes;
    protocol::ItmEncoder itm(bytes);
    itm.sync();
    OrbstatWriter o(itm);
    o.enter(kStart + 0x10, kMain);  // main never returns
    for (int round = 0; round < kRounds; ++round) {
        o.at(10);
        o.enter(kMain + 0x20, kFast);
        o.at(10);
        o.enter(kFast + 0x10, kDo);
        o.at(100);
        o.exit(kFast + 0x10, kDo);
        o.at(5);
        o.exit(kMain + 0x20, kFast);
        o.at(5);
        o.enter(kMain + 0x30, kSlow);
        o.at(10);
        o.enter(kSlow + 0x10, kDo);
        o.at(900);
        o.exit(kSlow + 0x10, kDo);
        o.at(5);
        o.exit(kMain + 0x30, kSlow);
    }
    for (int i = 0; i < 20; ++i) itm.pc_sample(kDo + 4);  // a profile for gprof's side
    const auto path = dir / "fig4.itm";
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
    return path;
}

using Folded = std::map<std::string, std::uint64_t>;
Folded folded_of(const std::string& text) {
    Folded out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        const auto space = line.rfind(' ');
        out[line.substr(0, space)] += std::stoull(line.substr(space + 1));
    }
    return out;
}

// Main is open at the end of the capture: its node is marked, its callees are exact.
const Folded kExpected = {
    {"main [incomplete]", kRounds * 15},
    {"main [incomplete];fast", kRounds * 15},
    {"main [incomplete];fast;doSomething", kRounds * 100},
    {"main [incomplete];slow", kRounds * 15},
    {"main [incomplete];slow;doSomething", kRounds * 900},
};

Folded times(const Folded& f, std::uint64_t k) {
    Folded out = f;
    for (auto& entry : out) entry.second *= k;
    return out;
}

std::vector<std::string> convert_args(const std::filesystem::path& capture,
                                      const std::filesystem::path& elf, const std::string& format,
                                      const std::filesystem::path& out) {
    return {"convert",   capture.string(), "--protocol", "itm",      "--orbstat-port", "30",
            "--elf",     elf.string(),     "--force",    "--export", format,           "-o",
            out.string()};
}

// The arc caller -> doSomething in a cct-json document.
json arc_to_do(const json& doc, const std::string& caller) {
    for (const auto& a : doc["calling_context"]["arcs"]) {
        if (a["caller"] == caller && a["callee"] == "doSomething") return a;
    }
    FAIL("no arc " << caller << " -> doSomething");
    return {};
}

void check_split(const json& doc, std::uint64_t k) {
    const json fast = arc_to_do(doc, "fast"), slow = arc_to_do(doc, "slow");
    CHECK(fast["measured_cycles"] == k * kRounds * 100);
    CHECK(slow["measured_cycles"] == k * kRounds * 900);
    CHECK(fast["measured_share"].get<double>() == doctest::Approx(0.1).epsilon(1e-12));
    CHECK(slow["measured_share"].get<double>() == doctest::Approx(0.9).epsilon(1e-12));
    CHECK(fast["estimated_share"].get<double>() == doctest::Approx(0.5).epsilon(1e-12));
    CHECK(slow["estimated_share"].get<double>() == doctest::Approx(0.5).epsilon(1e-12));
    CHECK(fast["difference_cycles"].get<double>() ==
          doctest::Approx(-static_cast<double>(k * kRounds * 400)));
    CHECK(fast["incomplete"] == false);
}

bool installed(const std::string& program, const char* test) {
    if (testing::run({"sh", "-c", "command -v " + program}).exit_code == 0) return true;
    std::printf("SKIP: %s: %s is not installed\n", test, program.c_str());
    return false;
}

// `go tool pprof -traces` of a cct-pprof file: cycles per stack of names, root first.
Folded pprof_traces(const std::filesystem::path& file, const std::filesystem::path& scratch) {
    std::filesystem::create_directories(scratch / "home");
    const auto r = testing::run(
        {"go", "tool", "pprof", "-symbolize=none", "-sample_index=cycles", "-traces",
         file.string()},
        {"HOME=" + (scratch / "home").string(), "GOCACHE=" + (scratch / "gocache").string(),
         "GOPATH=" + (scratch / "gopath").string(), "GOPROXY=off", "GOTOOLCHAIN=local",
         "PPROF_TMPDIR=" + (scratch / "pprof").string()});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    Folded out;
    std::istringstream in(r.out);
    static const std::regex first(R"(^\s+(\d+)\s+(\S.*)$)");
    static const std::regex more(R"(^\s+(\S.*)$)");
    std::vector<std::string> frames;
    std::uint64_t value = 0;
    const auto flush = [&] {
        if (frames.empty()) return;
        std::string stack;
        for (auto it = frames.rbegin(); it != frames.rend(); ++it)
            stack += (stack.empty() ? "" : ";") + *it;
        out[stack] += value;
        frames.clear();
    };
    for (std::string line; std::getline(in, line);) {
        std::smatch m;
        if (line.rfind("-----", 0) == 0) {
            flush();
        } else if (std::regex_match(line, m, first) && frames.empty()) {
            value = std::stoull(m[1].str());
            frames.push_back(m[2].str());
        } else if (!frames.empty() && std::regex_match(line, m, more)) {
            frames.push_back(m[1].str());
        }
    }
    flush();
    return out;
}

TEST_CASE("calling-context tree: rackprof convert of an ITM capture, 10 %/90 % measured") {
    testing::TempDir dir;
    const auto elf = write_elf(dir.path());
    const auto capture = write_capture(dir.path());

    const auto folded_file = dir / "fig4.folded";
    auto r = testing::rackprof(convert_args(capture, elf, "cct-folded", folded_file));
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(folded_of(testing::read_text(folded_file)) == kExpected);
    // gprof's estimate, for contrast: the old export still splits doSomething 50/50.
    r = testing::rackprof(convert_args(capture, elf, "folded", dir / "estimate.folded"));
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    std::uint64_t via_fast = 0, via_slow = 0;  // stacks from _start, which calls main
    for (const auto& [stack, samples] : folded_of(testing::read_text(dir / "estimate.folded"))) {
        if (stack.ends_with("main;fast;doSomething")) via_fast += samples;
        if (stack.ends_with("main;slow;doSomething")) via_slow += samples;
    }
    CHECK(via_fast == 10);  // the 20 samples in doSomething, half to each caller
    CHECK(via_slow == 10);

    r = testing::rackprof(convert_args(capture, elf, "cct-json", dir / "fig4.cct.json"));
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const json doc = json::parse(testing::read_text(dir / "fig4.cct.json"));
    CHECK(doc["schema"] == "rackprof.cct/1");
    check_split(doc, 1);
    CHECK(doc["calling_context"]["incomplete_nodes"] == 1);  // main, never returned

    // The JSON report carries the same arcs beside gprof's profile.
    r = testing::rackprof(convert_args(capture, elf, "json", dir / "report.json"));
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    check_split(json::parse(testing::read_text(dir / "report.json")), 1);

    // Where events measured the split, it is what convert prints first, gprof's report (the
    // estimate) after it; it printed only the 50/50 estimate.
    SUBCASE("the text report: the measured split first, gprof's estimate after it") {
        r = testing::rackprof({"convert", capture.string(), "--protocol", "itm", "--orbstat-port",
                               "30", "--elf", elf.string(), "--force", "-o",
                               (dir / "gmon.out").string()});
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        const auto measured = r.out.find("Measured calling contexts");
        REQUIRE(measured != std::string::npos);
        CHECK(measured < r.out.find("Flat profile"));
        CHECK(std::regex_search(
            r.out, std::regex(R"(\n\s+10\.0%\s+50\.0%\s+\d+\s+\d+  fast -> doSomething\n)")));
        CHECK(std::regex_search(
            r.out, std::regex(R"(\n\s+90\.0%\s+50\.0%\s+\d+\s+\d+  slow -> doSomething\n)")));
    }

    // cct-speedscope is the measured tree alone; speedscope, the export users ask for, shows it
    // first where events exist, gprof's estimated stacks as its second profile.
    for (const char* format : {"cct-speedscope", "speedscope"}) {
        SUBCASE((std::string(
                     "speedscope: evented profiles valid by speedscope's schema, exact cycles: ") +
                 format)
                    .c_str()) {
            const auto file = dir / "fig4.speedscope.json";
            r = testing::rackprof(convert_args(capture, elf, format, file));
            REQUIRE_MESSAGE(r.exit_code == 0, r.err);
            if (std::string(format) == "speedscope") {
                const json both = json::parse(testing::read_text(file));
                CHECK(both["activeProfileIndex"] == 0);
                CHECK(both["profiles"].back()["type"] == "sampled");
                CHECK(both["profiles"].size() >= 2);
            }
            if (std::filesystem::exists(kSchema)) {
                const auto valid =
                    testing::run({"/usr/bin/python3", "-c",
                                  "import json, sys, jsonschema\n"
                                  "schema = json.load(open(sys.argv[2]))\n"
                                  "jsonschema.validate(json.load(open(sys.argv[1])), schema)\n",
                                  file.string(), kSchema.string()});
                CHECK_MESSAGE(valid.exit_code == 0, valid.err);
            } else {
                std::printf("SKIP: cct speedscope schema: %s is missing (run ./setup.sh)\n",
                            kSchema.string().c_str());
            }
            // The events replayed: each path's inclusive cycles, stacks nested properly.
            const json s = json::parse(testing::read_text(file));
            const auto& profile = s["profiles"][0];
            CHECK(profile["type"] == "evented");
            CHECK(profile["endValue"] == kRounds * (15 + 15 + 100 + 15 + 900));
            std::vector<std::pair<std::string, std::uint64_t>> open;
            Folded inclusive;
            for (const auto& e : profile["events"]) {
                const std::string name =
                    s["shared"]["frames"][e["frame"].get<std::size_t>()]["name"];
                const auto at = e["at"].get<std::uint64_t>();
                if (e["type"] == "O") {
                    open.emplace_back(name, at);
                    continue;
                }
                REQUIRE(!open.empty());
                REQUIRE(open.back().first == name);
                std::string path;
                for (const auto& f : open) path += (path.empty() ? "" : ";") + f.first;
                inclusive[path] += at - open.back().second;
                open.pop_back();
            }
            CHECK(open.empty());
            CHECK(inclusive["main [incomplete];fast;doSomething"] == kRounds * 100);
            CHECK(inclusive["main [incomplete];slow;doSomething"] == kRounds * 900);
            CHECK(inclusive["main [incomplete];slow"] == kRounds * 915);
        }
    }

    SUBCASE("pprof: go tool pprof reads every path's cycles") {
        const auto file = dir / "fig4.cct.pb.gz";
        r = testing::rackprof(convert_args(capture, elf, "cct-pprof", file));
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        if (!installed("go", "cct pprof")) return;
        const Folded traces = pprof_traces(file, dir / "go");
        Folded expected;  // pprof names functions without the [incomplete] mark (a label)
        for (const auto& [stack, cycles] : kExpected)
            expected[std::regex_replace(stack, std::regex(" \\[incomplete\\]"), "")] = cycles;
        CHECK(traces == expected);
    }
}

TEST_CASE("calling-context tree: a capture without entry/exit events has none (422, not a guess)") {
    testing::TempDir dir;
    const auto elf = dir / "model.elf";
    const auto capture = dir / "det.bin";
    REQUIRE(testing::rackprof({"simulate", "--model", "deterministic", "--iterations", "2", "-o",
                               capture.string(), "--write-elf", elf.string()})
                .exit_code == 0);
    const auto r = testing::rackprof({"convert", capture.string(), "--elf", elf.string(),
                                      "--export", "cct-folded", "-o", (dir / "x").string()});
    CHECK(r.exit_code != 0);
    CHECK(r.err.find("no calling-context tree") != std::string::npos);
}

TEST_CASE("calling-context tree: stored by a daemon's import, exported and merged by selection") {
    testing::TempDir dir;
    const auto elf = write_elf(dir.path());
    const auto capture = write_capture(dir.path());
    std::ofstream(dir / "rack.toml") << "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\npath = \""
                                     << (dir / "rack.db").string() << "\"\n";
    testing::Process daemon(
        testing::rackprof_argv({"serve", "--config", (dir / "rack.toml").string()}),
        dir / "serve.log");
    const std::string port = testing::wait_for_api_port(dir / "serve.log");
    const auto call = [&](const std::string& method, const std::string& path,
                          const std::vector<std::string>& extra = {}) {
        std::vector<std::string> argv = {
            "curl", "-sS", "-X", method, "-o", (dir / "body").string(), "-w", "%{http_code}"};
        argv.insert(argv.end(), extra.begin(), extra.end());
        argv.push_back("http://127.0.0.1:" + port + path);
        const auto r = testing::run(argv);
        return std::pair{std::stoi(r.out.empty() ? "0" : r.out), testing::read_text(dir / "body")};
    };
    const auto put = call("PUT", "/api/v1/firmware", {"--data-binary", "@" + elf.string()});
    REQUIRE(put.first == 201);
    const std::string fw = json::parse(put.second)["id"];
    std::vector<std::string> ids;
    for (int i = 0; i < 2; ++i) {
        const auto imported = call(
            "POST",
            "/api/v1/sessions/import?format=bin&protocol=itm&orbstat_port=30&board=fig4&firmware=" +
                fw,
            {"--data-binary", "@" + capture.string()});
        REQUIRE_MESSAGE(imported.first == 201, imported.second);
        ids.push_back(std::to_string(json::parse(imported.second)["id"].get<std::int64_t>()));
    }
    const auto folded = call("GET", "/api/v1/sessions/" + ids[0] + "/export/cct-folded");
    REQUIRE_MESSAGE(folded.first == 200, folded.second);
    CHECK(folded_of(folded.second) == kExpected);
    const auto cct = call("GET", "/api/v1/sessions/" + ids[0] + "/export/cct-json");
    REQUIRE(cct.first == 200);
    check_split(json::parse(cct.second), 1);

    // A selection of both sessions: the trees added by path.
    const auto both =
        call("GET", "/api/v1/profile/export/cct-folded?session=" + ids[0] + "," + ids[1]);
    REQUIRE_MESSAGE(both.first == 200, both.second);
    CHECK(folded_of(both.second) == times(kExpected, 2));
    const auto both_json =
        call("GET", "/api/v1/profile/export/cct-json?session=" + ids[0] + "," + ids[1]);
    REQUIRE(both_json.first == 200);
    check_split(json::parse(both_json.second), 2);

    // A time window cannot be cut from a whole-session tree: refused, not guessed.
    CHECK(call("GET", "/api/v1/sessions/" + ids[0] + "/export/cct-folded?from=0&to=1").first ==
          422);
    daemon.signal(SIGTERM);
    CHECK(daemon.wait(10s) == 0);
}

}  // namespace
}  // namespace rackprof
