// The rackprof binary end to end: simulate a board, convert its capture, check the result
// against the simulator's ground truth and against gprof; and every bad input.
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "gmon/gmon_reader.h"
#include "storage/storage_writer.h"
#include "tests/integration/test_support.h"

namespace rackprof {
namespace {

using nlohmann::json;
using testing::rackprof;

std::map<std::pair<std::string, std::string>, std::uint64_t> arcs_of(const json& list) {
    std::map<std::pair<std::string, std::string>, std::uint64_t> out;
    for (const auto& a : list) out[{a["from"], a["self"]}] += a["count"].get<std::uint64_t>();
    return out;
}

std::uint64_t sum_counts(const json& list) {
    std::uint64_t total = 0;
    for (const auto& e : list) total += e["count"].get<std::uint64_t>();
    return total;
}

TEST_CASE("convert(simulate(model)) equals the model exactly, for every model and encoding") {
    testing::TempDir dir;
    for (const char* model : {"blinky", "conflation", "deterministic"}) {
        for (const char* format : {"bin", "hex"}) {
            for (const char* width : {"3", "4"}) {
                CAPTURE(model);
                CAPTURE(format);
                CAPTURE(width);
                const auto capture = dir / "capture";
                const auto truth_path = dir / "truth.json";
                const auto elf = dir / "model.elf";
                const auto sim =
                    rackprof({"simulate", "--model", model, "--format", format, "--addr-bytes",
                              width, "--iterations", "30", "-o", capture.string(), "--truth",
                              truth_path.string(), "--write-elf", elf.string()});
                REQUIRE_MESSAGE(sim.exit_code == 0, sim.err);
                const auto out = dir / "gmon.out";
                const auto conv =
                    rackprof({"convert", capture.string(), "--addr-bytes", width, "--elf",
                              elf.string(), "-o", out.string(), "--report", "json"});
                REQUIRE_MESSAGE(conv.exit_code == 0, conv.err);
                const json truth = json::parse(testing::read_text(truth_path));
                const json report = json::parse(conv.out);
                CHECK(report["source"]["format"] == format);  // detected, not told
                CHECK(report["source"]["decoder"]["bytes_discarded"] == 0);
                CHECK(report["source"]["decoder"]["arcs"] == truth["arcs_sent"]);
                CHECK(report["source"]["decoder"]["pc_samples"] == truth["pc_samples_sent"]);
                CHECK(report["source"]["decoder"]["bytes_in"] == truth["wire_bytes"]);
                CHECK(arcs_of(report["raw"]["arcs"]) == arcs_of(truth["arcs"]));
                CHECK(report["raw"]["histograms"][0]["samples"] == sum_counts(truth["pc_samples"]));
                CHECK(report["raw"]["samples_outside_histogram"] == 0);
                // Per function: the profile's samples equal the truth's samples inside it.
                std::map<std::string, double> expected;
                for (const auto& f : truth["functions"]) {
                    const auto lo = std::stoull(f["addr"].get<std::string>(), nullptr, 16);
                    const auto hi = lo + f["size"].get<std::uint64_t>();
                    for (const auto& p : truth["pc_samples"]) {
                        const auto pc = std::stoull(p["pc"].get<std::string>(), nullptr, 16);
                        if (pc >= lo && pc < hi) expected[f["name"]] += p["count"].get<double>();
                    }
                }
                for (const auto& row : report["profile"]["flat"]) {
                    CHECK(row["samples"].get<double>() == expected[row["name"]]);
                }
                // And gprof, reading the same gmon.out, prints what rackprof prints.
                const auto text = rackprof({"convert", out.string(), "--elf", elf.string()});
                CHECK(text.out == testing::gprof_brief(elf, out));
            }
        }
    }
}

TEST_CASE("convert --protocol framed: exact counts, frames lost on the link counted exactly") {
    testing::TempDir dir;
    const auto capture = dir / "framed.bin";
    const auto truth_path = dir / "truth.json";
    const auto elf = dir / "model.elf";
    REQUIRE(
        rackprof({"simulate", "--model", "deterministic", "--protocol", "framed", "--arc-cache",
                  "8", "--iterations", "200", "--drop-frames", "0.05", "--seed", "4", "-o",
                  capture.string(), "--truth", truth_path.string(), "--write-elf", elf.string()})
            .exit_code == 0);
    const json truth = json::parse(testing::read_text(truth_path));
    const auto dropped = truth["faults"]["frames_dropped"].get<std::uint64_t>();
    REQUIRE(dropped > 0);
    const auto conv =
        rackprof({"convert", capture.string(), "--protocol", "framed", "--elf", elf.string(), "-o",
                  (dir / "gmon.out").string(), "--report", "json"});
    REQUIRE_MESSAGE(conv.exit_code == 0, conv.err);
    const json source = json::parse(conv.out)["source"];
    CHECK(source["protocol"] == "framed");
    CHECK(source["decoder"]["frames_lost"] == dropped);
    CHECK(source["decoder"]["frames"] == truth["frames_sent"].get<std::uint64_t>() - dropped);
    CHECK(source["decoder"]["frames_bad"] == 0);
    CHECK(source["decoder"]["bytes_discarded"] == 0);
    CHECK(conv.err.find(std::to_string(dropped) + " lost") != std::string::npos);

    // Without losses the arcs are exactly the truth's, ARC_N counts included.
    REQUIRE(rackprof({"simulate", "--model", "deterministic", "--protocol", "framed", "--arc-cache",
                      "8", "--iterations", "50", "-o", capture.string(), "--truth",
                      truth_path.string()})
                .exit_code == 0);
    const json exact = json::parse(testing::read_text(truth_path));
    const auto whole = rackprof({"convert", capture.string(), "--protocol", "framed", "-o",
                                 (dir / "gmon.out").string(), "--report", "json"});
    REQUIRE_MESSAGE(whole.exit_code == 0, whole.err);
    CHECK(arcs_of(json::parse(whole.out)["raw"]["arcs"]) == arcs_of(exact["arcs"]));

    // The wrong protocol either way: a clear error, exit 1.
    const auto as_legacy =
        rackprof({"convert", capture.string(), "--elf", elf.string(), "-o", (dir / "x").string()});
    CHECK(as_legacy.exit_code == 1);
    CHECK(as_legacy.err.find("check --protocol") != std::string::npos);
    REQUIRE(rackprof({"simulate", "--iterations", "5", "-o", (dir / "legacy.bin").string()})
                .exit_code == 0);
    const auto as_framed = rackprof({"convert", (dir / "legacy.bin").string(), "--protocol",
                                     "framed", "-o", (dir / "x").string()});
    CHECK(as_framed.exit_code == 1);
    CHECK(as_framed.err.find("is it a framed capture?") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dir / "x"));
}

TEST_CASE("with injected faults: nothing crashes, discards are counted, decoded <= sent") {
    testing::TempDir dir;
    for (int seed = 1; seed <= 6; ++seed) {
        CAPTURE(seed);
        const auto capture = dir / "capture";
        const auto truth_path = dir / "truth.json";
        const auto elf = dir / "model.elf";
        const std::string rate = seed % 2 ? "0.001" : "0.02";
        REQUIRE(rackprof({"simulate",
                          "--model",
                          "deterministic",
                          "--iterations",
                          "200",
                          "--seed",
                          std::to_string(seed),
                          "--drop",
                          rate,
                          "--flip",
                          rate,
                          "--insert",
                          rate,
                          "--format",
                          seed % 3 ? "bin" : "hex",
                          "-o",
                          capture.string(),
                          "--truth",
                          truth_path.string(),
                          "--write-elf",
                          elf.string()})
                    .exit_code == 0);
        const auto conv = rackprof({"convert", capture.string(), "--elf", elf.string(), "-o",
                                    (dir / "g.out").string(), "--report", "json"});
        REQUIRE_MESSAGE(conv.exit_code == 0, conv.err);
        const json truth = json::parse(testing::read_text(truth_path));
        const json d = json::parse(conv.out)["source"]["decoder"];
        const std::uint64_t faults = truth["faults"]["dropped"].get<std::uint64_t>() +
                                     truth["faults"]["flipped"].get<std::uint64_t>() +
                                     truth["faults"]["inserted"].get<std::uint64_t>();
        REQUIRE(faults > 0);
        CHECK(d["bytes_discarded"].get<std::uint64_t>() > 0);
        CHECK(d["resyncs"].get<std::uint64_t>() > 0);
        CHECK(d["arcs"].get<std::uint64_t>() + d["pc_samples"].get<std::uint64_t>() <=
              truth["arcs_sent"].get<std::uint64_t>() +
                  truth["pc_samples_sent"].get<std::uint64_t>());
        CHECK(d["bytes_in"] == truth["wire_bytes"]);
        // Most records survive a 0.1% fault rate.
        if (rate == "0.001") {
            CHECK(d["arcs"].get<double>() > 0.95 * truth["arcs_sent"].get<double>());
        }
    }
}

TEST_CASE("bad input: clear errors, non-zero exit, no partial gmon.out, nothing overwritten") {
    testing::TempDir dir;
    const auto out = dir / "gmon.out";
    { std::ofstream(out) << "previous result"; }
    const auto garbage = dir / "garbage.bin";
    {
        std::ofstream f(garbage, std::ios::binary);
        for (int i = 0; i < 5000; ++i)
            f.put(static_cast<char>((i * 7919) % 251 == 0x41 ? 0 : (i * 7919) % 251));
    }
    const auto empty = dir / "empty.txt";
    { std::ofstream(empty) << ""; }

    auto expect_failure = [&](const std::vector<std::string>& args, int code,
                              const std::string& says) {
        CAPTURE(says);
        const auto r = rackprof(args);
        CHECK(r.exit_code == code);
        CHECK(r.err.find(says) != std::string::npos);
        CHECK(testing::read_text(out) == "previous result");
        for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
            CHECK(e.path().filename().string().find(".tmp-") == std::string::npos);
        }
    };
    expect_failure({"convert", (dir / "missing.txt").string(), "-o", out.string()}, 1,
                   "no such file");
    expect_failure({"convert", garbage.string(), "-o", out.string()}, 1, "no records found");
    expect_failure({"convert", empty.string(), "-o", out.string()}, 1, "no records found");
    expect_failure({"convert", dir.path().string(), "-o", out.string()}, 1, "directory");
    expect_failure({"convert", garbage.string(), "--elf", garbage.string(), "-o", out.string()}, 1,
                   "not an ELF");
    expect_failure({"convert", garbage.string(), "--addr-bytes", "5", "-o", out.string()}, 2,
                   "--addr-bytes");
    expect_failure({"convert", garbage.string(), "--frobnicate", "-o", out.string()}, 2,
                   "unknown option");
    expect_failure({"convert", out.string(), "--format", "gmon", "--elf", garbage.string()}, 1,
                   "not an ELF");
    expect_failure({"simulate", "--model", "nope", "-o", (dir / "x").string()}, 1, "unknown model");
    expect_failure({"frobnicate"}, 2, "unknown command");

    // A capture from one board converted with another board's ELF.
    const auto capture = dir / "capture";
    const auto other_elf = dir / "other.elf";
    REQUIRE(
        rackprof({"simulate", "--model", "blinky", "--iterations", "20", "-o", capture.string()})
            .exit_code == 0);
    REQUIRE(rackprof({"simulate", "--model", "deterministic", "--iterations", "1", "--write-elf",
                      other_elf.string()})
                .exit_code == 0);
    expect_failure({"convert", capture.string(), "--elf", other_elf.string(), "-o", out.string()},
                   1, "wrong ELF");

    // Truncated gmon.out.
    const auto good = dir / "good.gmon";
    REQUIRE(rackprof({"convert", capture.string(), "-o", good.string(), "--report", "none"})
                .exit_code == 0);
    const std::string bytes = testing::read_text(good);
    const auto cut = dir / "cut.gmon";
    { std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() - 3); }
    expect_failure({"convert", cut.string(), "--elf", other_elf.string()}, 1, "truncated");
}

TEST_CASE("the summary line and the report without an ELF") {
    testing::TempDir dir;
    const auto capture = dir / "capture.txt";
    REQUIRE(rackprof({"simulate", "--model", "conflation", "--iterations", "5", "--format", "hex",
                      "-o", capture.string()})
                .exit_code == 0);
    const auto r = rackprof({"convert", capture.string(), "-o", (dir / "gmon.out").string()});
    REQUIRE(r.exit_code == 0);
    // conflation: 4 arcs and 1 + 100 samples per pass; hex doubles the 7- and 4-byte records.
    const int arcs = 4 * 5, samples = 101 * 5, bytes = 2 * (7 * arcs + 4 * samples);
    const std::string summary = "decoded " + std::to_string(arcs + samples) + " records (" +
                                std::to_string(arcs) + " arcs, " + std::to_string(samples) +
                                " PC samples) from " + std::to_string(bytes) +
                                " bytes; 0 bytes discarded in 0 resyncs";
    CHECK(r.err.find(summary) != std::string::npos);
    CHECK(r.out.find("0x849 -> 0x885: 5") != std::string::npos);  // fast() -> doSomething()
    CHECK(std::filesystem::file_size(dir / "gmon.out") > 20);
}

TEST_CASE("demo --qemu: example firmware in QEMU, profiled as gprof profiles it") {
    const auto firmware = std::filesystem::path(RACKPROF_BINARY).parent_path() / "target-fw";
    if (testing::run({"sh", "-c", "command -v qemu-system-arm"}).exit_code != 0 ||
        !std::filesystem::exists(firmware / "deterministic-microbit-framed.elf")) {
        MESSAGE("SKIP: demo --qemu needs qemu-system-arm and target-fw built (./setup.sh)");
        return;
    }
    for (const std::string board : {"mps2-an385", "microbit"}) {
        CAPTURE(board);
        testing::TempDir dir;
        const auto r = rackprof({"demo", "--qemu", "--board", board, "--dir", dir.path().string()});
        REQUIRE(r.exit_code == 0);
        CHECK(r.out.find("0 bytes discarded in 0 resyncs; frames: ") != std::string::npos);
        CHECK(r.out.find(" bad, 0 lost") != std::string::npos);
        // The arc cache sends one record per eviction: the summary says the calls they carry,
        // exactly the calls in the gmon.out written.
        std::smatch m;
        REQUIRE(std::regex_search(r.out, m,
                                  std::regex("\\(([0-9]+) arcs, [0-9]+ PC samples; counted on "
                                             "the target: ([0-9]+) calls, ([0-9]+) samples\\)")));
        const auto written = gmon::read_gmon_file(dir / "gmon.out", gmon::TargetLayout{});
        std::uint64_t calls = 0;
        for (const auto& arc : written.arcs) calls += arc.count;
        std::uint64_t samples = 0;
        for (const auto& h : written.histograms) samples += h.total();
        CHECK(std::stoull(m[2].str()) == calls);
        CHECK(std::stoull(m[3].str()) == samples);
        CHECK(std::stoull(m[1].str()) < calls);
        // The profile printed is what gprof prints from the gmon.out written beside it.
        const auto elf = firmware / ("deterministic-" + board + "-framed.elf");
        const std::string theirs = testing::gprof_brief(elf, dir / "gmon.out");
        CHECK(r.out.find(theirs) != std::string::npos);
        // The hot function heads the flat profile.
        const auto first_row = theirs.find('\n', theirs.find("ms/call  name")) + 1;
        const auto row = theirs.substr(first_row, theirs.find('\n', first_row) - first_row);
        CHECK(row.ends_with(" crunch"));
    }
    testing::TempDir dir;
    const auto missing = rackprof(
        {"demo", "--qemu", "--firmware-dir", "/nonexistent", "--dir", dir.path().string()});
    CHECK(missing.exit_code == 1);
    CHECK(missing.err.find("no firmware /nonexistent/deterministic-mps2-an385-framed.elf") !=
          std::string::npos);
}

// The linker map the firmware build wrote (arm-none-eabi-ld -Map) names the functions as the
// ELF does: the same profile, but for gprof's index numbers (the ELF has functions the map
// cannot show: statics without a section of their own).
TEST_CASE("convert --map: target-fw's own GNU ld map instead of its ELF, the same profile") {
    const auto firmware = std::filesystem::path(RACKPROF_BINARY).parent_path() / "target-fw";
    if (testing::run({"sh", "-c", "command -v qemu-system-arm"}).exit_code != 0 ||
        !std::filesystem::exists(firmware / "nested-mps2-an385-framed.map")) {
        MESSAGE("SKIP: convert --map needs qemu-system-arm and target-fw built (./setup.sh)");
        return;
    }
    testing::TempDir dir;
    REQUIRE(rackprof({"demo", "--qemu", "--example", "nested", "--dir", dir.path().string()})
                .exit_code == 0);
    const auto convert = [&](const std::string& flag, const std::filesystem::path& symbols) {
        const auto r = rackprof({"convert", (dir / "capture.bin").string(), "--protocol",
                                 "framed", flag, symbols.string(), "-o",
                                 (dir / (flag.substr(2) + ".out")).string()});
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        return r;
    };
    const auto with_map = convert("--map", firmware / "nested-mps2-an385-framed.map");
    const auto with_elf = convert("--elf", dir / "firmware.elf");
    CHECK(with_map.err.find("symbols from the GNU ld map") != std::string::npos);
    const auto without_indices = [](const std::string& text) {
        return std::regex_replace(text, std::regex("\\[[0-9]+\\]"), "[]");
    };
    CHECK(with_map.out.find("work") != std::string::npos);
    CHECK(without_indices(with_map.out) == without_indices(with_elf.out));
    const auto json_report = rackprof({"convert", (dir / "capture.bin").string(), "--protocol",
                                       "framed", "--map",
                                       (firmware / "nested-mps2-an385-framed.map").string(),
                                       "--report", "json", "-o", (dir / "j.out").string()});
    REQUIRE(json_report.exit_code == 0);
    CHECK(json::parse(json_report.out)["source"]["symbols_from"] == "GNU ld map");
    const auto both = rackprof({"convert", (dir / "capture.bin").string(), "--map",
                                (firmware / "nested-mps2-an385-framed.map").string(), "--elf",
                                (dir / "firmware.elf").string()});
    CHECK(both.exit_code != 0);
    const auto not_a_map = rackprof({"convert", (dir / "capture.bin").string(), "--protocol",
                                     "framed", "--map", (dir / "capture.bin").string()});
    CHECK(not_a_map.exit_code != 0);
    CHECK(not_a_map.err.find("not a linker map") != std::string::npos);
}

// A capture of `model` run `iterations` times and the ELF it ran, simulated into `dir`.
struct Simulated {
    std::filesystem::path capture;
    std::filesystem::path elf;
};
Simulated simulate_with_elf(const testing::TempDir& dir, const std::string& model,
                            const std::string& iterations) {
    Simulated out{dir / "capture", dir / "model.elf"};
    REQUIRE(rackprof({"simulate", "--model", model, "--iterations", iterations, "-o",
                      out.capture.string(), "--write-elf", out.elf.string()})
                .exit_code == 0);
    return out;
}

TEST_CASE("a gmon.out keeps its profiling rate and histogram through convert (gprof agrees)") {
    testing::TempDir dir;
    const auto [capture, elf] = simulate_with_elf(dir, "blinky", "300");
    // A 5 Hz profile with 4-byte bins, as another tool would have written it.
    const auto five_hz = dir / "five.gmon";
    REQUIRE(rackprof({"convert", capture.string(), "--elf", elf.string(), "--rate", "5",
                      "--bin-bytes", "4", "-o", five_hz.string(), "--report", "none"})
                .exit_code == 0);
    const auto again = dir / "again.gmon";
    const auto conv = rackprof({"convert", five_hz.string(), "--elf", elf.string(), "--export",
                                "gmon", "-o", again.string()});
    REQUIRE_MESSAGE(conv.exit_code == 0, conv.err);
    const std::string original = testing::gprof_brief(elf, five_hz);
    CHECK(original.find("each sample hit covers 4 byte(s)") != std::string::npos);
    CHECK(testing::gprof_brief(elf, again) == original);
    CHECK(testing::read_text(again) == testing::read_text(five_hz));
    // And rackprof's own report of it is gprof's.
    const auto text = rackprof({"convert", five_hz.string(), "--elf", elf.string()});
    REQUIRE(text.exit_code == 0);
    CHECK(text.out == original);
}

TEST_CASE("convert --export writes every registered format; the stored session's too") {
    testing::TempDir dir;
    const Simulated simulated = simulate_with_elf(dir, "deterministic", "40");
    const auto& capture = simulated.capture;  // lambdas take no structured bindings (clang 14)
    const auto& elf = simulated.elf;
    auto exported = [&](const std::string& format) {
        const auto out = dir / ("out." + format);
        const auto r = rackprof({"convert", capture.string(), "--elf", elf.string(), "--export",
                                 format, "-o", out.string()});
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        CHECK(r.out.empty());  // no report unless asked for
        return testing::read_text(out);
    };
    const std::string raw = exported("raw");
    CHECK(raw == testing::read_text(capture));
    const std::string csv = exported("csv");
    CHECK(csv.rfind("kind,from,self,pc,count\n", 0) == 0);
    const std::string ndjson = exported("ndjson");
    const auto first = json::parse(ndjson.substr(0, ndjson.find('\n')));
    CHECK(first["t"] == 0);
    CHECK(first.contains("kind"));
    const auto report = json::parse(exported("json"));
    CHECK(report["schema"] == "rackprof.report/1");
    CHECK(report["source"]["decoder"]["bytes_discarded"] == 0);
    const std::string text = exported("text");
    CHECK(text.find("Flat profile") != std::string::npos);
    exported("gmon");
    CHECK(testing::gprof_brief(elf, dir / "out.gmon") == text);
    // Records in the NDJSON are exactly the capture's arcs and samples.
    std::uint64_t records = 0;
    for (std::size_t at = 0; at < ndjson.size(); at = ndjson.find('\n', at) + 1) ++records;
    CHECK(records == report["source"]["decoder"]["arcs"].get<std::uint64_t>() +
                         report["source"]["decoder"]["pc_samples"].get<std::uint64_t>());

    const auto bad = rackprof({"convert", capture.string(), "--export", "bmp", "-o", "x"});
    CHECK(bad.exit_code == 2);
    const auto no_output = rackprof({"convert", capture.string(), "--export", "csv"});
    CHECK(no_output.exit_code == 2);
    CHECK(no_output.err.find("-o") != std::string::npos);
}

// Reads a FIFO on a thread until told to stop (held open read-write, so opening it never
// blocks and a writer that never comes cannot hang the test).
class FifoReader {
  public:
    explicit FifoReader(const std::filesystem::path& path)
        : fd_(::open(path.c_str(), O_RDWR | O_NONBLOCK)), thread_([this] { run(); }) {}
    ~FifoReader() {
        stop_ = true;
        thread_.join();
        ::close(fd_);
    }
    // Everything read so far, once nothing more came for 200 ms.
    std::string drained() {
        stop_ = true;
        thread_.join();
        thread_ = std::thread([] {});
        return bytes_;
    }

  private:
    void run() {
        int quiet_ms = 0;
        while (!stop_ || quiet_ms < 200) {
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, 20) <= 0) {
                quiet_ms += 20;
                continue;
            }
            char buffer[4096];
            const ssize_t n = ::read(fd_, buffer, sizeof buffer);
            if (n > 0) bytes_.append(buffer, static_cast<std::size_t>(n));
            quiet_ms = 0;
        }
    }
    int fd_;
    std::atomic<bool> stop_{false};
    std::string bytes_;
    std::thread thread_;
};

TEST_CASE("convert -o onto a FIFO or device writes into it and leaves it one") {
    testing::TempDir dir;
    const auto [capture, elf] = simulate_with_elf(dir, "deterministic", "40");
    const auto fifo = dir / "pipe";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    FifoReader reader(fifo);
    const auto r = rackprof({"convert", capture.string(), "--elf", elf.string(), "--report", "none",
                             "-o", fifo.string()});
    CHECK_MESSAGE(r.exit_code == 0, r.err);
    const std::string written = reader.drained();
    CHECK(std::filesystem::is_fifo(fifo));  // not replaced by a regular file
    CHECK(written.rfind("gmon", 0) == 0);   // the gmon.out went through the pipe
    CHECK(written.size() > 20);
    // Nothing left beside it either.
    for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
        CHECK(entry.path().filename().string().find(".tmp-") == std::string::npos);

    // A character device: /dev/null takes the file and is still /dev/null after (as root, an
    // atomic rename would have put a regular file in its place for the whole machine).
    REQUIRE(std::filesystem::is_character_file("/dev/null"));
    const auto null = rackprof({"convert", capture.string(), "--elf", elf.string(), "--report",
                                "none", "-o", "/dev/null"});
    CHECK_MESSAGE(null.exit_code == 0, null.err);
    CHECK(std::filesystem::is_character_file("/dev/null"));
    for (const auto& entry : std::filesystem::directory_iterator("/dev"))
        CHECK(entry.path().filename().string().rfind("null.tmp-", 0) == std::string::npos);
}

// A database of a few MiB written by the storage writer, as the daemon writes one.
void write_database(const std::filesystem::path& path) {
    storage::StorageWriter writer(path);
    const auto id = writer.reserve_session_id();
    storage::NewSession spec;
    spec.board = "board";
    spec.link = "sim://blinky";
    writer.submit(storage::OpenSessionOp{id, spec});
    storage::SessionCounters counters;
    for (int i = 0; i < 400; ++i) {
        std::vector<protocol::Record> records(100, protocol::Record::pc_sample(0x1000 + 2 * i));
        counters.pc_samples += records.size();
        storage::ChunkOp op{
            id, i + 1, std::vector<std::uint8_t>(8 << 10, 0x5A), std::move(records), counters, {},
            {}, {}};
        op.delta.emplace().add(op.records);  // its sender sums a chunk
        writer.submit(std::move(op));
    }
    writer.submit(storage::CloseSessionOp{id, "completed", 401, counters});
    writer.stop();
}

TEST_CASE(
    "check --db: ok for a sound database; garbage in its middle is listed, and serve refuses it") {
    testing::TempDir dir;
    const auto db = dir / "rack.db";
    write_database(db);
    const auto sound = rackprof({"check", "--db", db.string()});
    CHECK_MESSAGE(sound.exit_code == 0, sound.err);
    CHECK(sound.out == db.string() + ": ok\n");

    {  // 64 KiB of garbage over the middle of the file
        const auto size = std::filesystem::file_size(db);
        std::fstream f(db, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(static_cast<std::streamoff>(size / 2));
        std::uint32_t x = 88172645u;
        for (int i = 0; i < (64 << 10); ++i) {
            x = x * 1664525u + 1013904223u;
            f.put(static_cast<char>(x >> 24));
        }
    }
    const auto damaged = rackprof({"check", "--db", db.string()});
    CHECK(damaged.exit_code == 1);
    CHECK(damaged.out.rfind(db.string() + ": damaged, ", 0) == 0);
    CHECK(std::count(damaged.out.begin(), damaged.out.end(), '\n') >= 2);  // problems listed

    std::ofstream(dir / "rack.toml")
        << "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\npath = \"" << db.string() << "\"\n";
    const auto serve = rackprof({"serve", "--config", (dir / "rack.toml").string()});
    CHECK(serve.exit_code == 1);
    CHECK(serve.err.find(db.string() + " is damaged") != std::string::npos);
    CHECK(serve.err.find("rackprof check --db") != std::string::npos);
    CHECK(serve.err.find("HTTP API listening") == std::string::npos);  // never started

    CHECK(rackprof({"check"}).exit_code == 2);
    CHECK(rackprof({"check", "--db", (dir / "none.db").string()}).exit_code == 1);
}

}  // namespace
}  // namespace rackprof
