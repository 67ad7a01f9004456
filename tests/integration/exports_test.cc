// The pprof and callgrind exports read by the real tools: `go tool pprof -raw` gives back every
// PC sample and arc count exactly, and callgrind_annotate prints gprof's self and propagated
// totals. Each export is made by the three roads every format takes: `rackprof convert
// --export`, a session's /export/{format} and a fleet selection's /profile/export/{format}.
// A tool that is not installed is a visible SKIP.
#include <signal.h>

#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "tests/integration/test_support.h"

namespace rackprof {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// A pprof sample: its addresses, leaf first -> its values (samples, calls).
using Stack = std::vector<std::uint64_t>;
using Values = std::pair<std::int64_t, std::int64_t>;
using Samples = std::map<Stack, Values>;

std::uint64_t hex(const json& text) {
    return std::stoull(text.get<std::string>(), nullptr, 16);
}

// What the pprof export must hold for a simulator's ground truth (added to `into`): a
// one-frame sample per PC, a [callee, caller] sample per arc.
void add_truth(Samples& into, const std::filesystem::path& truth_file) {
    const json truth = json::parse(testing::read_text(truth_file));
    for (const auto& pc : truth["pc_samples"])
        into[{hex(pc["pc"])}].first += pc["count"].get<std::int64_t>();
    for (const auto& arc : truth["arcs"])
        into[{hex(arc["self"]), hex(arc["from"])}].second += arc["count"].get<std::int64_t>();
}

// The same from rackprof's CSV export of the aggregate (kind,from,self,pc,count).
Samples samples_in_csv(const std::string& csv) {
    Samples out;
    std::istringstream lines(csv);
    std::string line;
    std::getline(lines, line);  // the header
    while (std::getline(lines, line)) {
        std::vector<std::string> cell;
        std::istringstream cells(line);
        for (std::string c; std::getline(cells, c, ',');) cell.push_back(c);
        REQUIRE(cell.size() == 5);
        const auto count = std::stoll(cell[4]);
        if (cell[0] == "pc")
            out[{std::stoull(cell[3], nullptr, 16)}].first += count;
        else
            out[{std::stoull(cell[2], nullptr, 16), std::stoull(cell[1], nullptr, 16)}].second +=
                count;
    }
    return out;
}

// An external tool, or a visible SKIP when it is not installed.
bool installed(const std::string& program, const char* test) {
    if (testing::run({"sh", "-c", "command -v " + program}).exit_code == 0) return true;
    std::cout << "SKIP: " << test << ": " << program << " is not installed\n";
    return false;
}

// `go tool pprof` kept to a scratch folder: its caches, no module downloads or toolchain
// switches, no search for binaries to symbolize with.
std::vector<std::string> go_env(const std::filesystem::path& scratch) {
    std::filesystem::create_directories(scratch / "home");
    return {"HOME=" + (scratch / "home").string(),
            "GOCACHE=" + (scratch / "gocache").string(),
            "GOPATH=" + (scratch / "gopath").string(),
            "GOFLAGS=-mod=mod",
            "GOPROXY=off",
            "GOTOOLCHAIN=local",
            "PPROF_TMPDIR=" + (scratch / "pprof").string(),
            "PPROF_BINARY_PATH=" + (scratch / "pprof").string()};
}

std::string go_pprof(const std::vector<std::string>& args, const std::filesystem::path& scratch) {
    std::vector<std::string> argv = {"go", "tool", "pprof", "-symbolize=none"};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto r = testing::run(argv, go_env(scratch));
    CAPTURE(r.err);
    REQUIRE(r.exit_code == 0);
    return r.out;
}

// What `go tool pprof -raw` prints: samples by address, the label lines, the comments.
struct RawProfile {
    Samples samples;
    std::size_t sample_lines = 0;
    std::vector<std::string> label_lines;
    std::vector<std::string> comments;
};

RawProfile pprof_raw(const std::filesystem::path& file, const std::filesystem::path& scratch) {
    const std::string text = go_pprof({"-raw", file.string()}, scratch);
    static const std::regex sample_line(R"(^\s*(-?\d+)\s+(-?\d+): ([\d ]*)$)");
    static const std::regex location_line(R"(^\s*(\d+): 0x([0-9a-f]+) )");
    std::istringstream lines(text);
    std::string line;
    std::string section;
    std::vector<std::pair<Values, std::vector<std::uint64_t>>> by_id;
    std::map<std::uint64_t, std::uint64_t> address_of;
    RawProfile out;
    while (std::getline(lines, line)) {
        std::smatch m;
        if (line == "Samples:" || line == "Locations" || line == "Mappings") {
            section = line;
        } else if (line.rfind("Comment: ", 0) == 0) {
            out.comments.push_back(line.substr(9));
        } else if (section == "Samples:" && std::regex_match(line, m, sample_line)) {
            std::vector<std::uint64_t> ids;
            std::istringstream id_text(m[3].str());
            for (std::uint64_t id; id_text >> id;) ids.push_back(id);
            by_id.push_back({{std::stoll(m[1].str()), std::stoll(m[2].str())}, ids});
            ++out.sample_lines;
        } else if (section == "Samples:" && line.rfind("                ", 0) == 0) {
            out.label_lines.push_back(line.substr(line.find_first_not_of(' ')));
        } else if (section == "Locations" && std::regex_search(line, m, location_line)) {
            address_of[std::stoull(m[1].str())] = std::stoull(m[2].str(), nullptr, 16);
        }
    }
    for (const auto& [values, ids] : by_id) {
        Stack stack;
        for (const auto id : ids) stack.push_back(address_of.at(id));
        auto& sum = out.samples[stack];
        sum.first += values.first;
        sum.second += values.second;
    }
    return out;
}

// The PC samples by their leaf address (the export puts them on gprof's stacks, each PC's
// count exact over its stacks), the arcs as they are: what the aggregate holds.
Samples by_leaf(const Samples& samples) {
    Samples out;
    for (const auto& [stack, values] : samples) {
        if (values.first) out[{stack.front()}].first += values.first;
        if (values.second) out[stack].second += values.second;
    }
    return out;
}

std::int64_t total_samples(const Samples& samples) {
    std::int64_t n = 0;
    for (const auto& entry : samples) n += entry.second.first;
    return n;
}

// The numbers callgrind_annotate prints: "PROGRAM TOTALS" and "file:function" -> samples.
std::map<std::string, std::uint64_t> annotate(const std::filesystem::path& file, bool inclusive) {
    const auto r = testing::run({"callgrind_annotate", "--threshold=100", "--auto=no",
                                 inclusive ? "--inclusive=yes" : "--inclusive=no", file.string()});
    CAPTURE(r.err);
    REQUIRE(r.exit_code == 0);
    static const std::regex row(R"(^\s*([0-9,]+)\s+(?:\(\s*[0-9.]+%\)\s+)?(\S.*)$)");
    std::map<std::string, std::uint64_t> out;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) {
        std::smatch m;
        if (!std::regex_match(line, m, row)) continue;
        std::string digits = m[1].str();
        std::erase(digits, ',');
        out[m[2].str()] = std::stoull(digits);
    }
    return out;
}

std::string file_of(const json& flat_row) {
    return flat_row.contains("source") ? flat_row["source"]["file"].get<std::string>() : "???";
}

// callgrind_annotate against rackprof's JSON report of the same data: the total is every
// sample, each function's self cost is its flat-profile samples, and with --inclusive=yes a
// function's cost is gprof's self + children for it (in samples; whole for these captures).
void check_callgrind(const std::filesystem::path& file, const json& report, std::int64_t samples,
                     bool check_inclusive) {
    const json& profile = report["profile"];
    const double rate = profile["prof_rate"].get<double>();
    const auto self = annotate(file, false);
    CHECK(self.at("PROGRAM TOTALS") == static_cast<std::uint64_t>(samples));
    CHECK(profile["total_samples"].get<std::int64_t>() == samples);
    std::map<std::string, std::string> file_by_name;
    std::size_t with_samples = 0;
    for (const auto& row : profile["flat"]) {
        const std::string name = file_of(row) + ":" + row["name"].get<std::string>();
        file_by_name[row["name"]] = file_of(row);
        CAPTURE(name);
        REQUIRE(self.count(name) == 1);
        CHECK(self.at(name) == std::llround(row["samples"].get<double>()));
        if (self.at(name) > 0) ++with_samples;
    }
    CHECK(with_samples > 0);
    if (!check_inclusive) return;
    const auto inclusive = annotate(file, true);
    CHECK(inclusive.at("PROGRAM TOTALS") == static_cast<std::uint64_t>(samples));
    std::size_t compared = 0;
    for (const auto& entry : profile["call_graph"]) {
        if (!entry["cycle"].is_null() || !file_by_name.count(entry["name"])) continue;
        const std::string name =
            file_by_name[entry["name"]] + ":" + entry["name"].get<std::string>();
        CAPTURE(name);
        const double total =
            (entry["self_seconds"].get<double>() + entry["children_seconds"].get<double>()) * rate;
        CHECK(inclusive.at(name) == std::llround(total));
        ++compared;
    }
    CHECK(compared > 2);
}

// pprof's view of an export against the samples it must hold, and its -top's total.
void check_pprof(const std::filesystem::path& file, const Samples& expected,
                 const std::filesystem::path& scratch) {
    const RawProfile raw = pprof_raw(file, scratch);
    CHECK(by_leaf(raw.samples) == expected);
    const std::string top = go_pprof({"-top", file.string()}, scratch);
    CHECK(top.find("Type: samples") != std::string::npos);
    CHECK(top.find("of " + std::to_string(total_samples(expected)) + " total") !=
          std::string::npos);
}

// `go tool pprof -top -cum`: function -> cum (samples).
std::map<std::string, std::int64_t> pprof_cum(const std::filesystem::path& file,
                                              const std::filesystem::path& scratch) {
    const std::string top = go_pprof({"-top", "-cum", "-nodecount=10000", file.string()}, scratch);
    static const std::regex row(R"(^\s*(\d+)\s+\S+%\s+\S+%\s+(\d+)\s+\S+%\s+(\S+)\s*$)");
    std::map<std::string, std::int64_t> out;
    std::istringstream lines(top);
    for (std::string line; std::getline(lines, line);) {
        std::smatch m;
        if (std::regex_match(line, m, row)) out[m[3].str()] = std::stoll(m[2].str());
    }
    return out;
}

std::string export_text(const std::vector<std::string>& args) {
    const auto r = testing::rackprof(args);
    CAPTURE(r.err);
    REQUIRE(r.exit_code == 0);
    return r.out;
}

TEST_CASE("pprof and callgrind from rackprof convert: the simulator's truth, exactly") {
    testing::TempDir dir;
    const auto capture = (dir / "blinky.bin").string();
    const auto elf = (dir / "blinky.elf").string();
    REQUIRE(testing::rackprof({"simulate", "--model", "blinky", "--iterations", "30", "-o", capture,
                               "--truth", (dir / "truth.json").string(), "--write-elf", elf})
                .exit_code == 0);
    Samples truth;
    add_truth(truth, dir / "truth.json");
    REQUIRE(total_samples(truth) > 1000);
    for (const char* format : {"pprof", "callgrind"}) {
        const auto out = (dir / format).string();
        export_text({"convert", capture, "--elf", elf, "--export", format, "-o", out});
    }
    if (installed("go", "pprof from rackprof convert"))
        check_pprof(dir / "pprof", truth, dir.path());
    if (installed("callgrind_annotate", "callgrind from rackprof convert")) {
        const json report = json::parse(
            export_text({"convert", capture, "--elf", elf, "--export", "json", "-o", "-"}));
        check_callgrind(dir / "callgrind", report, total_samples(truth), true);
    }
    // Without an ELF: pprof holds the addresses; callgrind cannot name functions.
    export_text({"convert", capture, "--export", "pprof", "-o", (dir / "bare.pb.gz").string()});
    if (installed("go", "pprof without an ELF"))
        CHECK(pprof_raw(dir / "bare.pb.gz", dir.path()).samples == truth);  // one frame each
    const auto refused =
        testing::rackprof({"convert", capture, "--export", "callgrind", "-o", "/dev/null"});
    CHECK(refused.exit_code != 0);
    CHECK(refused.err.find("needs the firmware's ELF") != std::string::npos);
    // Both are listed in the help, as every registered format.
    const auto help = testing::rackprof({"convert", "--help"});
    CHECK(help.out.find("pprof") != std::string::npos);
    CHECK(help.out.find("callgrind") != std::string::npos);
}

// pprof users read inclusive time from -top -cum, -tree and -peek: the export's stacks must make
// them gprof's self + children, for a recursive function and through a cycle too (a cycle's
// entry member carries the cycle as a whole). One-frame samples made cum = flat.
TEST_CASE("pprof: go tool pprof -top -cum gives the call graph's inclusive samples") {
    if (!installed("go", "pprof -top -cum")) return;
    testing::TempDir dir;
    const auto capture = (dir / "d.bin").string();
    const auto elf = (dir / "d.elf").string();
    REQUIRE(testing::rackprof({"simulate", "--model", "deterministic", "--iterations", "50", "-o",
                               capture, "--write-elf", elf})
                .exit_code == 0);
    export_text(
        {"convert", capture, "--elf", elf, "--export", "pprof", "-o", (dir / "d.pb.gz").string()});
    const auto cum = pprof_cum(dir / "d.pb.gz", dir.path());
    const json report =
        json::parse(export_text({"convert", capture, "--elf", elf, "--export", "json", "-o", "-"}));
    const double rate = report["profile"]["prof_rate"].get<double>();
    const auto inclusive = [&](const json& entry) {
        return std::llround(
            (entry["self_seconds"].get<double>() + entry["children_seconds"].get<double>()) * rate);
    };
    std::map<int, std::int64_t> cycle_whole, cycle_max_cum;
    std::size_t compared = 0;
    for (const auto& entry : report["profile"]["call_graph"]) {
        const std::string name = entry["name"];
        CAPTURE(name);
        if (entry.contains("members")) {
            cycle_whole[entry["cycle"].get<int>()] = inclusive(entry);
        } else if (!entry["cycle"].is_null()) {
            REQUIRE(cum.count(name));
            auto& most = cycle_max_cum[entry["cycle"].get<int>()];
            most = std::max(most, cum.at(name));
        } else {
            REQUIRE(cum.count(name));
            CHECK(cum.at(name) == inclusive(entry));
            ++compared;
        }
    }
    CHECK(compared >= 5);  // main, alpha, beta, gamma, factorial (recursive)
    REQUIRE(cycle_whole.size() == 1);
    CHECK(cycle_max_cum == cycle_whole);
}

TEST_CASE("pprof and callgrind of the thesis capture: pprof holds its aggregate exactly") {
    const auto data = testing::shared_data("pprof and callgrind of the thesis capture");
    if (data.empty()) return;
    testing::TempDir dir;
    const auto capture = (data / "blink1hex.txt").string();
    const auto elf = (data / "blinky.elf").string();
    const Samples aggregate = samples_in_csv(
        export_text({"convert", capture, "--elf", elf, "--export", "csv", "-o", "-"}));
    for (const char* format : {"pprof", "callgrind"})
        export_text(
            {"convert", capture, "--elf", elf, "--export", format, "-o", (dir / format).string()});
    if (installed("go", "pprof of the thesis capture")) {
        check_pprof(dir / "pprof", aggregate, dir.path());
        // DWARF's files and lines reach pprof: the busy loop is in WAIT1.c.
        const std::string lines =
            go_pprof({"-top", "-lines", (dir / "pprof").string()}, dir.path());
        CHECK(lines.find("loop ../Generated_Code/WAIT1.c:") != std::string::npos);
    }
    if (installed("callgrind_annotate", "callgrind of the thesis capture")) {
        const json report = json::parse(
            export_text({"convert", capture, "--elf", elf, "--export", "json", "-o", "-"}));
        // Self costs and the total are whole samples here; inclusive ones are rounded per arc.
        check_callgrind(dir / "callgrind", report, total_samples(aggregate), false);
    }
}

TEST_CASE("pprof and callgrind over HTTP: a session's export and a fleet selection's") {
    testing::TempDir dir;
    Samples fleet;
    std::map<std::string, Samples> truth;
    const int iterations[] = {7, 12};
    for (int i = 0; i < 2; ++i) {
        const auto n = std::to_string(i);
        REQUIRE(testing::rackprof({"simulate", "--model", "blinky", "--iterations",
                                   std::to_string(iterations[i]), "--seed", n, "-o",
                                   (dir / ("b" + n + ".bin")).string(), "--truth",
                                   (dir / ("b" + n + ".json")).string(), "--write-elf",
                                   (dir / "blinky.elf").string()})
                    .exit_code == 0);
        add_truth(truth["board-" + n], dir / ("b" + n + ".json"));
        add_truth(fleet, dir / ("b" + n + ".json"));
    }
    {
        std::ofstream config(dir / "rack.toml");
        config << "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\npath = \""
               << (dir / "rack.db").string() << "\"\n";
        for (int i = 0; i < 2; ++i) {
            config << "[[boards]]\nname = \"board-" << i << "\"\nlink = \"file://"
                   << (dir / ("b" + std::to_string(i) + ".bin")).string()
                   << "?pace=fast\"\nelf = \"" << (dir / "blinky.elf").string() << "\"\n";
        }
        // The same bytes without an ELF: addresses only.
        config << "[[boards]]\nname = \"bare\"\nlink = \"file://" << (dir / "b0.bin").string()
               << "?pace=fast\"\n";
    }
    testing::Process daemon(
        testing::rackprof_argv({"serve", "--config", (dir / "rack.toml").string()}),
        dir / "serve.log");
    const std::string port = testing::wait_for_api_port(dir / "serve.log");
    const json sessions = testing::wait_for_completed_sessions(port, 3);
    const bool have_go = installed("go", "pprof over HTTP");
    const bool have_annotate = installed("callgrind_annotate", "callgrind over HTTP");

    for (const auto& s : sessions) {
        const std::string board = s["board"];
        const std::string id = std::to_string(s["id"].get<std::int64_t>());
        CAPTURE(board);
        const std::string base = "/api/v1/sessions/" + id + "/export/";
        const auto pprof_file = dir / (board + ".pb.gz");
        REQUIRE(testing::http_get(port, base + "pprof", pprof_file).status == 200);
        if (board == "bare") {
            // No ELF: pprof by address; callgrind refused as the profile views are.
            if (have_go)
                CHECK(by_leaf(pprof_raw(pprof_file, dir.path()).samples) == truth["board-0"]);
            const auto refused = testing::http_get(port, base + "callgrind");
            CHECK(refused.status == 422);
            CHECK(refused.body.find("no_elf") != std::string::npos);
            continue;
        }
        if (have_go) {
            check_pprof(pprof_file, truth[board], dir.path());
            // The board and session label every sample.
            const RawProfile raw = pprof_raw(pprof_file, dir.path());
            CHECK(raw.label_lines.size() == raw.sample_lines);
            for (const auto& labels : raw.label_lines)
                CHECK(labels == "board:[" + board + "] session:[" + id + "]");
        }
        const auto callgrind_file = dir / (board + ".callgrind");
        REQUIRE(testing::http_get(port, base + "callgrind", callgrind_file).status == 200);
        if (have_annotate) {
            const json report = json::parse(testing::http_get(port, base + "json").body);
            check_callgrind(callgrind_file, report, total_samples(truth[board]), true);
        }
    }

    // The fleet: both boards merged. Its samples cannot say which board they came from, so
    // the selection is in the profile's comments.
    const std::string selection = "?board=board-0,board-1";
    const auto fleet_pprof = dir / "fleet.pb.gz";
    REQUIRE(
        testing::http_get(port, "/api/v1/profile/export/pprof" + selection, fleet_pprof).status ==
        200);
    if (have_go) {
        check_pprof(fleet_pprof, fleet, dir.path());
        const RawProfile raw = pprof_raw(fleet_pprof, dir.path());
        CHECK(raw.label_lines.empty());
        CHECK(std::count(raw.comments.begin(), raw.comments.end(), "boards: board-0, board-1") ==
              1);
    }
    const auto fleet_callgrind = dir / "fleet.callgrind";
    REQUIRE(testing::http_get(port, "/api/v1/profile/export/callgrind" + selection, fleet_callgrind)
                .status == 200);
    if (have_annotate) {
        // The selection's JSON profile is the report's "profile" member.
        const json profile =
            json::parse(testing::http_get(port, "/api/v1/profile" + selection).body);
        check_callgrind(fleet_callgrind, json{{"profile", profile}}, total_samples(fleet), true);
    }
    // A selection still refuses what only a session has, naming every format it does export.
    const auto raw_refused = testing::http_get(port, "/api/v1/profile/export/raw" + selection);
    CHECK(raw_refused.status == 404);
    CHECK(raw_refused.body.find("pprof") != std::string::npos);
    daemon.signal(SIGTERM);
    CHECK(daemon.wait(5s) == 0);
}

}  // namespace
}  // namespace rackprof
