// Where inside a function: `rackprof annotate` and the API's /lines and /disasm, checked
// against binutils reading the same ELF (addr2line for each sample's line, objdump for the
// instructions) and against gprof -l on the same data.
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "gmon/annotate.h"
#include "gmon/gmon_writer.h"
#include "gmon/symbolizer.h"
#include "gmon/synthetic_elf.h"
#include "tests/integration/api_daemon.h"
#include "tests/integration/test_support.h"

namespace rackprof {
namespace {

using nlohmann::json;

constexpr const char* kSource = R"(volatile int sink;
__attribute__((noinline)) void leaf(int n) {
    for (int i = 0; i < n; ++i)
        sink += i;
}
__attribute__((noinline)) void hot(int n) {
    for (int i = 0; i < n; ++i) {
        sink ^= i * 3;
        leaf(4);
    }
}
#line 1 "/etc/passwd"
__attribute__((noinline)) void elsewhere(void) { sink = 1; }
#line 14 "hot.c"
void _start(void) { for (;;) { hot(100); elsewhere(); } }
)";

struct Insn {
    std::uint64_t addr;
    std::string mnemonic;
};

// objdump's instructions of one function.
std::vector<Insn> objdump_function(const std::filesystem::path& elf, const std::string& name) {
    const auto r =
        testing::run({"arm-none-eabi-objdump", "-d", "--no-show-raw-insn", elf.string()});
    REQUIRE(r.exit_code == 0);
    std::vector<Insn> out;
    std::istringstream in(r.out);
    bool inside = false;
    static const std::regex insn(R"(^\s*([0-9a-f]+):\s+(\S+))");
    for (std::string line; std::getline(in, line);) {
        if (line.find("<" + name + ">:") != std::string::npos) {
            inside = true;
            continue;
        }
        if (inside && line.empty()) break;
        std::smatch m;
        if (inside && std::regex_search(line, m, insn))
            out.push_back({std::stoull(m[1].str(), nullptr, 16), m[2].str()});
    }
    return out;
}

int addr2line(const std::filesystem::path& elf, std::uint64_t addr) {
    char hex[24];
    std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(addr));
    const auto r = testing::run({"arm-none-eabi-addr2line", "-e", elf.string(), hex});
    REQUIRE(r.exit_code == 0);
    return std::atoi(r.out.substr(r.out.rfind(':') + 1).c_str());
}

TEST_CASE("rackprof annotate: samples and calls per line and instruction, as binutils reads them") {
    testing::TempDir dir;
    std::ofstream(dir / "hot.c") << kSource;
    const auto built =
        testing::run({"sh", "-c",
                      "cd '" + dir.path().string() +
                          "' && arm-none-eabi-gcc -mcpu=cortex-m3 -mthumb -O1 -g -nostdlib "
                          "-Wl,-Ttext=0x1000 -o hot.elf hot.c"});
    REQUIRE_MESSAGE(built.exit_code == 0, built.err);
    const auto elf_path = dir / "hot.elf";
    const auto elf = gmon::Symbolizer::load(elf_path);
    const std::vector<Insn> insns = objdump_function(elf_path, "hot");
    REQUIRE(insns.size() > 5);

    // A sample count per instruction of hot(), and the calls of its bl to leaf.
    gmon::Aggregate aggregate;
    std::map<int, std::uint64_t> want_lines;
    std::uint64_t bl_site = 0;
    for (std::size_t i = 0; i < insns.size(); ++i) {
        aggregate.add_pc(insns[i].addr, 10 * (i + 1));
        want_lines[addr2line(elf_path, insns[i].addr)] += 10 * (i + 1);
        if (insns[i].mnemonic == "bl") bl_site = insns[i].addr;
    }
    REQUIRE(bl_site != 0);
    aggregate.add_arc((bl_site + 4) | 1, (insns.front().addr - 0x10) | 1, 400);  // leaf's entry
    const auto gmon_path = dir / "hot.gmon";
    const auto binned = gmon::to_gmon_data(
        aggregate, gmon::HistogramSpec{elf->code_low(), elf->code_high(), 2, 1000}, elf->layout());
    gmon::write_file_atomically(gmon_path, gmon::serialize_gmon(binned.data));

    auto annotate = [&](std::vector<std::string> extra) {
        std::vector<std::string> argv = {"annotate", gmon_path.string(), "--elf", elf_path.string(),
                                         "--json"};
        argv.insert(argv.end(), extra.begin(), extra.end());
        const auto r = testing::rackprof(argv);
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        return json::parse(r.out);
    };
    const json a = annotate({"--function", "hot", "--disasm"});
    REQUIRE(a["functions"].size() == 1);
    const json& f = a["functions"][0];
    CHECK(f["samples"] == aggregate.total_samples());
    CHECK(f["calls"] == 400);
    CHECK(f["source_shown"] == true);  // hot.c sits in the compilation directory
    std::map<int, std::uint64_t> got_lines;
    std::uint64_t calls_on_bl_line = 0;
    for (const json& l : f["lines"]) {
        if (l["samples"] > 0) got_lines[l["line"]] = l["samples"];
        if (l["line"] == addr2line(elf_path, bl_site)) calls_on_bl_line = l["calls"];
        const int n = l["line"];
        if (n == 8) CHECK(l["text"] == "        sink ^= i * 3;");
        // The share's interval holds the share.
        CHECK(l["interval"][0].get<double>() <= l["share"].get<double>());
        CHECK(l["share"].get<double>() <= l["interval"][1].get<double>());
    }
    CHECK(got_lines == want_lines);
    CHECK(calls_on_bl_line == 400);
    // capstone's instructions are objdump's, address for address, mnemonic for mnemonic.
    REQUIRE(f["instructions"].size() == insns.size());
    for (std::size_t i = 0; i < insns.size(); ++i) {
        const json& in = f["instructions"][i];
        CAPTURE(i);
        CHECK(std::stoull(in["address"].get<std::string>(), nullptr, 16) == insns[i].addr);
        // The same mnemonic; objdump alone spells the encoding's width (.n, .w).
        auto bare = [](std::string m) {
            if (m.size() > 2 && (m.ends_with(".n") || m.ends_with(".w"))) m.resize(m.size() - 2);
            return m;
        };
        const std::string text = in["text"];
        CHECK(bare(text.substr(0, text.find(' '))) == bare(insns[i].mnemonic));
        CHECK(in["samples"] == 10 * (i + 1));
    }

    // The exports carry the same lines: callgrind_annotate with the source prints line 8's
    // samples beside it, and go tool pprof -list (the source found under the source path) too.
    const auto callgrind = dir / "hot.callgrind";
    REQUIRE(
        testing::rackprof({"convert", gmon_path.string(), "--format", "gmon", "--elf",
                           elf_path.string(), "--export", "callgrind", "-o", callgrind.string()})
            .exit_code == 0);
    if (testing::run({"sh", "-c", "command -v callgrind_annotate"}).exit_code == 0) {
        const auto annotated =
            testing::run({"callgrind_annotate", "--auto=yes", "--include=" + dir.path().string(),
                          callgrind.string()});
        REQUIRE(annotated.exit_code == 0);
        const std::regex line8(R"(^\s*([0-9,]+) \([ 0-9.]+%\)\s+sink \^= i \* 3;)",
                               std::regex::multiline);
        std::smatch m;
        REQUIRE_MESSAGE(std::regex_search(annotated.out, m, line8), annotated.out);
        std::string digits = m[1].str();
        std::erase(digits, ',');
        CHECK(std::stoull(digits) == want_lines[8]);
    } else {
        MESSAGE("SKIP: callgrind_annotate (valgrind) is not installed");
    }
    const auto pprof = dir / "hot.pprof";
    REQUIRE(testing::rackprof({"convert", gmon_path.string(), "--format", "gmon", "--elf",
                               elf_path.string(), "--export", "pprof", "-o", pprof.string()})
                .exit_code == 0);
    if (testing::run({"sh", "-c", "command -v go"}).exit_code == 0) {
        const std::string d = dir.path().string();
        const auto listed =
            testing::run({"go", "tool", "pprof", "-symbolize=none", "-list", "^hot$",
                          "-source_path", d, pprof.string()},
                         {"HOME=" + d, "GOCACHE=" + d + "/gocache", "GOPATH=" + d + "/gopath",
                          "GOPROXY=off", "GOTOOLCHAIN=local", "PPROF_TMPDIR=" + d + "/pprof"});
        REQUIRE_MESSAGE(listed.exit_code == 0, listed.err);
        const std::regex line8(R"(^\s*([0-9]+)\s+[0-9]+\s+8:\s+sink \^= i \* 3;)",
                               std::regex::multiline);
        std::smatch m;
        REQUIRE_MESSAGE(std::regex_search(listed.out, m, line8), listed.out);
        CHECK(std::stoull(m[1].str()) == want_lines[8]);
    } else {
        MESSAGE("SKIP: go tool pprof (golang-go) is not installed");
    }

    // Two runs compared by line: line 8 three times busier in B, everything else the same.
    gmon::Aggregate busier;
    for (const Insn& i : insns) {
        const std::uint64_t n = addr2line(elf_path, i.addr) == 8 ? 3000 : 1000;
        busier.add_pc(i.addr, n);
    }
    gmon::Aggregate even;
    for (const Insn& i : insns) even.add_pc(i.addr, 1000);
    auto write_gmon = [&](const gmon::Aggregate& agg, const std::string& name) {
        const auto path = dir / name;
        gmon::write_file_atomically(
            path, gmon::serialize_gmon(
                      gmon::to_gmon_data(
                          agg, gmon::HistogramSpec{elf->code_low(), elf->code_high(), 2, 1000},
                          elf->layout())
                          .data));
        return path.string();
    };
    const auto by_line =
        testing::rackprof({"diff", write_gmon(even, "even.gmon"), write_gmon(busier, "busier.gmon"),
                           "--format", "gmon", "--elf", elf_path.string(), "--lines", "--json"});
    REQUIRE_MESSAGE(by_line.exit_code == 0, by_line.err);
    std::map<std::string, int> direction;
    const json diff = json::parse(by_line.out);
    for (const json& row : diff["functions"]) {
        const std::string change = row["change"];
        direction[row["name"].get<std::string>()] = change == "slower"   ? 1
                                                    : change == "faster" ? -1
                                                                         : 0;
    }
    bool line8_slower = false;
    for (const auto& [name, d] : direction) {
        if (name.find("(hot.c:8)") != std::string::npos) line8_slower = d == 1;
    }
    CHECK(line8_slower);
    CHECK(direction.size() > 3);

    // Source text comes only from the roots: another root shows none, and a line table naming
    // /etc/passwd never reads it.
    testing::TempDir other;
    const json elsewhere = annotate({"--function", "hot", "--source-root", other.path().string()});
    CHECK(elsewhere["functions"][0]["source_shown"] == false);
    CHECK(elsewhere["functions"][0]["lines"][0]["text"].is_null());
    const auto passwd = testing::rackprof(
        {"annotate", gmon_path.string(), "--elf", elf_path.string(), "--function", "elsewhere"});
    REQUIRE(passwd.exit_code == 0);
    CHECK(passwd.out.find("in /etc/passwd") != std::string::npos);
    CHECK(passwd.out.find("source not under a source root") != std::string::npos);
    CHECK(passwd.out.find("root:") == std::string::npos);

    // The text layout, and a clear error for a function the ELF does not have.
    const auto text = testing::rackprof({"annotate", gmon_path.string(), "--elf", elf_path.string(),
                                         "--function", "hot", "--disasm"});
    REQUIRE(text.exit_code == 0);
    CHECK(text.out.find("ROUTINE ======================== hot in ") != std::string::npos);
    CHECK(text.out.find("        sink ^= i * 3;") != std::string::npos);
    const auto missing = testing::rackprof(
        {"annotate", gmon_path.string(), "--elf", elf_path.string(), "--function", "nope"});
    CHECK(missing.exit_code == 2);
    CHECK(missing.err.find("no function 'nope' in hot.elf") != std::string::npos);
}

// An ELF may claim a function of any size: only its first 256 KiB are decoded, and said so.
TEST_CASE("annotate: a function an ELF claims is huge is decoded only up to its first 256 KiB") {
    testing::TempDir dir;
    const std::uint32_t low = 0x1000, size = 4u << 20;
    gmon::write_synthetic_elf(dir / "huge.elf", {{"huge", low, size, true, true}}, low, low + size);
    const auto elf = gmon::Symbolizer::load(dir / "huge.elf");
    gmon::Aggregate aggregate;
    aggregate.add_pc(low + 10, 5);
    aggregate.add_pc(low + (3u << 20), 7);  // past what is decoded
    gmon::AnnotateOptions options;
    options.function = "huge";
    options.instructions = true;
    const auto a = gmon::annotate(aggregate, *elf, gmon::SourceRoots(), options);
    REQUIRE(a.functions.size() == 1);
    const auto& f = a.functions[0];
    CHECK(f.truncated);
    REQUIRE(!f.instructions.empty());
    CHECK(f.instructions.back().addr < low + gmon::kMaxAnnotatedBytes);
    CHECK(f.samples == 5);
    CHECK(a.total_samples == 12);
    CHECK(gmon::annotation_json(a)["functions"][0]["truncated"] == true);
}

// The thesis capture through the daemon: /lines of a session and /disasm of a selection, the
// per-line samples equal to what gprof -l prints for the session's own gmon.out.
TEST_CASE("API /lines and /disasm of the thesis capture: gprof -l's numbers by line") {
    const auto data = testing::shared_data("API /lines and /disasm");
    if (data.empty()) return;
    testing::ApiDaemon d;
    const auto put =
        d.call("PUT", "/api/v1/firmware", {"--data-binary", "@" + (data / "blinky.elf").string()});
    REQUIRE(put.first / 100 == 2);
    const std::string fw = json::parse(put.second)["id"];
    const auto imported =
        d.call("POST", "/api/v1/sessions/import?format=hex&board=thesis&firmware=" + fw,
               {"--data-binary", "@" + (data / "blink1hex.txt").string()});
    REQUIRE(imported.first == 201);
    const auto id = std::to_string(json::parse(imported.second)["id"].get<std::int64_t>());

    const auto lines = d.call("GET", "/api/v1/sessions/" + id + "/lines?function=WAIT1_WaitCycles");
    REQUIRE(lines.first == 200);
    const json a = json::parse(lines.second);
    CHECK(a["total_samples"] == 17214);
    REQUIRE(a["functions"].size() == 1);
    CHECK(a["functions"][0]["instructions"].empty());
    std::map<int, double> ours;
    for (const json& l : a["functions"][0]["lines"]) ours[l["line"]] += l["samples"].get<double>();

    // gprof -l on the session's gmon.out: self seconds per line symbol, at 1000 samples/s.
    const auto gmon = d.dir() / "thesis.gmon";
    const auto gmon_out = d.call("GET", "/api/v1/sessions/" + id + "/gmon.out");
    REQUIRE(gmon_out.first == 200);
    std::ofstream(gmon, std::ios::binary) << gmon_out.second;
    const auto gprof = testing::run(
        {"arm-none-eabi-gprof", "-l", "-b", "-p", (data / "blinky.elf").string(), gmon.string()});
    REQUIRE(gprof.exit_code == 0);
    std::map<int, double> theirs;
    static const std::regex row(R"(\s+\S+\s+\S+\s+(\S+)\s.*WAIT1_WaitCycles \(WAIT1\.c:(\d+) @)");
    std::istringstream in(gprof.out);
    for (std::string line; std::getline(in, line);) {
        std::smatch m;
        if (std::regex_search(line, m, row))
            theirs[std::stoi(m[2].str())] += 1000 * std::stod(m[1].str());
    }
    REQUIRE(theirs.size() >= 4);
    for (const auto& [line, samples] : theirs) {
        const int at = line;  // a copy: CAPTURE's lambda cannot capture a binding (clang 14)
        CAPTURE(at);
        CHECK(std::abs(ours[at] - samples) <= 5.0 * (1 + theirs.size()));  // %.2f seconds
    }

    const auto disasm =
        d.call("GET", "/api/v1/profile/disasm?session=" + id + "&function=WAIT1_Wait100Cycles");
    REQUIRE(disasm.first == 200);
    const json dj = json::parse(disasm.second);
    REQUIRE(dj["functions"].size() == 1);
    CHECK(dj["functions"][0]["instructions"][0]["text"] == "push {r0}");
    CHECK(d.call("GET", "/api/v1/sessions/" + id + "/lines?function=nope").first == 404);
}

}  // namespace
}  // namespace rackprof
