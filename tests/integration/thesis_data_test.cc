// The thesis' real captures (../shared/data/thesis): decoded and profiled by rackprof, checked
// against the thesis' own gmon.out files and against gprof. Skipped, visibly, without them.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <random>

#include <nlohmann/json.hpp>

#include "gmon/gmon_reader.h"
#include "gmon/profile.h"
#include "gmon/report.h"
#include "protocol/legacy_decoder.h"
#include "tests/integration/test_support.h"

namespace rackprof {
namespace {

std::map<std::string, std::uint64_t> calls_by_function(const gmon::Profile& p) {
    std::map<std::string, std::uint64_t> calls;
    for (std::size_t i = 0; i < p.symbols.size(); ++i) {
        if (p.nodes[i].ncalls) calls[p.symbols[i].name] = p.nodes[i].ncalls;
    }
    return calls;
}

TEST_CASE("thesis gmon.out files: rackprof's report equals gprof's") {
    const auto data = testing::shared_data("thesis gmon.out files");
    if (data.empty()) return;
    for (const char* pair : {"blink1gmon.out:blinky.elf", "shield1gmon.out:shield.elf"}) {
        const std::string s = pair;
        const auto gmon_path = data / s.substr(0, s.find(':'));
        const auto elf_path = data / s.substr(s.find(':') + 1);
        CAPTURE(gmon_path);
        const auto r = testing::rackprof(
            {"convert", gmon_path.string(), "--format", "gmon", "--elf", elf_path.string()});
        REQUIRE(r.exit_code == 0);
        CHECK(r.out == testing::gprof_brief(elf_path, gmon_path));
        // Without --format a BSD gmon.out (no magic number) is tried as a capture; the error
        // must say what the file is instead of blaming the ELF alone.
        const auto guessed =
            testing::rackprof({"convert", gmon_path.string(), "--elf", elf_path.string()});
        CHECK(guessed.exit_code == 1);
        CHECK(guessed.err.find("reads as a BSD gmon.out: give --format gmon") != std::string::npos);
    }
}

// gprof -l: a symbol per source line from the ELFs' DWARF (blinky: DWARF 4 from one toolchain;
// shield: FreeRTOS, with sequences of code removed by --gc-sections overlapping at address 0,
// where the unit BFD happens to read first names the line).
TEST_CASE("thesis gmon.out files by line: rackprof's report equals gprof -l's") {
    const auto data = testing::shared_data("thesis gmon.out files by line");
    if (data.empty()) return;
    for (const char* pair : {"blink1gmon.out:blinky.elf", "shield1gmon.out:shield.elf"}) {
        const std::string s = pair;
        const auto gmon_path = data / s.substr(0, s.find(':'));
        const auto elf_path = data / s.substr(s.find(':') + 1);
        CAPTURE(gmon_path);
        const auto r = testing::rackprof({"convert", gmon_path.string(), "--format", "gmon",
                                          "--elf", elf_path.string(), "--lines"});
        REQUIRE(r.exit_code == 0);
        const std::string theirs = testing::gprof_brief(elf_path, gmon_path, true);
        CHECK(r.out == theirs);
        // The thesis' hot spot: the busy-wait loop of WAIT1.c, by line.
        if (s.rfind("blink1", 0) == 0)
            CHECK(r.out.find("59.35     10.22    10.22                             loop "
                             "(WAIT1.c:154 @ 146a)") != std::string::npos);
        const auto exported = testing::rackprof({"convert", gmon_path.string(), "--format", "gmon",
                                                 "--elf", elf_path.string(), "--export",
                                                 "text-lines", "-o", "-", "--report", "none"});
        REQUIRE(exported.exit_code == 0);
        CHECK(exported.out == theirs);
    }
}

TEST_CASE("thesis hex capture: same calls as the thesis' gmon.out, same samples bin by bin") {
    const auto data = testing::shared_data("thesis hex capture");
    if (data.empty()) return;
    testing::TempDir dir;
    const auto ours = dir / "blink.gmon";
    const auto r = testing::rackprof({"convert", (data / "blink1hex.txt").string(), "--elf",
                                      (data / "blinky.elf").string(), "-o", ours.string(),
                                      "--report", "json"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.err.find("decoded 43654 records (26440 arcs, 17214 PC samples) from 507872 bytes; 0 "
                     "bytes discarded") != std::string::npos);

    const auto elf = gmon::Symbolizer::load(data / "blinky.elf");
    const auto thesis =
        gmon::merge_duplicates(gmon::read_gmon_file(data / "blink1gmon.out", elf->layout()));
    const auto mine = gmon::merge_duplicates(gmon::read_gmon_file(ours, elf->layout()));
    CHECK(calls_by_function(gmon::compute_profile(mine, *elf)) ==
          calls_by_function(gmon::compute_profile(thesis, *elf)));

    // gprof reads our gmon.out, and prints what our own report says.
    const auto text =
        testing::rackprof({"convert", ours.string(), "--elf", (data / "blinky.elf").string()});
    CHECK(text.out == testing::gprof_brief(data / "blinky.elf", ours));

    // The thesis host program binned PCs into 4-byte bins from 0x410; binned the same way,
    // rackprof's decode gives exactly its counts in every bin.
    const auto four = dir / "blink4.gmon";
    REQUIRE(testing::rackprof({"convert", (data / "blink1hex.txt").string(), "--elf",
                               (data / "blinky.elf").string(), "-o", four.string(), "--bin-bytes",
                               "4", "--report", "none"})
                .exit_code == 0);
    const auto binned = gmon::merge_duplicates(gmon::read_gmon_file(four, elf->layout()));
    REQUIRE(binned.histograms.size() == 1);
    REQUIRE(thesis.histograms.size() == 1);
    const auto& a = binned.histograms[0];
    const auto& b = thesis.histograms[0];
    CHECK(a.low_pc == b.low_pc);
    std::uint64_t compared = 0;
    for (std::size_t i = 0; i < b.bins.size(); ++i) {
        const std::uint64_t mine_bin = i < a.bins.size() ? a.bins[i] : 0;
        if (mine_bin != b.bins[i])
            FAIL_CHECK("bin " << i << ": rackprof " << mine_bin << ", thesis " << b.bins[i]);
        compared += b.bins[i];
    }
    CHECK(compared == 17214);
    CHECK(a.total() == 17214);
}

// Issue 16: hex text never found its way back after one lost character (half a byte): every
// later byte was made of two bytes' halves. Characters deleted from the real capture now cost
// the records around each loss, counted to the character.
TEST_CASE("thesis hex capture with lost characters: decoding resynchronises after each") {
    const auto data = testing::shared_data("thesis hex capture with lost characters");
    if (data.empty()) return;
    std::ifstream file(data / "blink1hex.txt", std::ios::binary);
    const std::string clean((std::istreambuf_iterator<char>(file)),
                            std::istreambuf_iterator<char>());
    REQUIRE(clean.size() == 507872);
    const auto elf = gmon::Symbolizer::load(data / "blinky.elf");
    const protocol::LegacyOptions options{
        3, protocol::LegacyEncoding::kHex,
        protocol::AddressRange{static_cast<std::uint32_t>(elf->code_low()),
                               static_cast<std::uint32_t>(elf->code_high())}};
    auto decode = [&](const std::string& text) {
        protocol::LegacyDecoder decoder(options);
        protocol::RecordCollector sink;
        decoder.feed(std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()),
                     sink);
        decoder.finish(sink);
        return std::pair{sink.records, decoder.stats()};
    };
    const auto [all, clean_stats] = decode(clean);
    REQUIRE(all.size() == 43654);
    REQUIRE(clean_stats.bytes_discarded == 0);

    // Positions as fractions of the file: one loss; five spread out; the five, whose
    // odd-numbered stretches (all misaligned before) make 92 % of the file.
    const std::vector<std::vector<double>> cases = {
        {0.002}, {0.5}, {0.17, 0.33, 0.5, 0.67, 0.83}, {0.08, 0.5, 0.5001, 0.9, 0.9001}};
    std::mt19937 rng(16);
    std::vector<std::vector<std::size_t>> losses;
    for (const auto& fractions : cases) {
        std::vector<std::size_t> at;
        for (double f : fractions) at.push_back(static_cast<std::size_t>(f * clean.size()));
        losses.push_back(at);
    }
    for (int round = 0; round < 20; ++round) {  // and 1..5 characters anywhere
        std::vector<std::size_t> at(1 + round % 5);
        for (auto& p : at) p = rng() % clean.size();
        losses.push_back(at);
    }
    for (auto at : losses) {
        std::sort(at.rbegin(), at.rend());
        at.erase(std::unique(at.begin(), at.end()), at.end());
        std::string text = clean;
        for (std::size_t p : at) text.erase(p, 1);
        CAPTURE(at.size());
        CAPTURE(at.front());
        const auto [records, stats] = decode(text);
        const std::uint64_t record_chars = 2 * (7 * stats.arcs + 4 * stats.pc_samples);
        CHECK(stats.bytes_in == text.size());
        CHECK(stats.bytes_discarded + record_chars == text.size());  // every character counted
        // Each lost character costs its record and at most the one before (whose look-ahead
        // byte it damaged): at most 2 records and 2 * 14 characters less the lost one.
        CHECK(records.size() + 2 * at.size() >= all.size());
        CHECK(stats.bytes_discarded <= 27 * at.size());
        CHECK(stats.resyncs <= at.size());
        // No record that was not sent (a look-alike inside a damaged record aside: at most one
        // per loss, and none in these cases).
        std::size_t i = 0;
        for (const auto& r : all) {
            if (i < records.size() && records[i] == r) ++i;
        }
        CHECK(i == records.size());
    }

    // Through `rackprof convert`: the five losses leave a usable profile, not "wrong ELF".
    testing::TempDir dir;
    std::string text = clean;
    for (auto it = losses[3].rbegin(); it != losses[3].rend(); ++it) text.erase(*it, 1);
    const auto damaged = dir / "blink1hex-5-lost.txt";
    std::ofstream(damaged, std::ios::binary) << text;
    const auto r =
        testing::rackprof({"convert", damaged.string(), "--elf", (data / "blinky.elf").string(),
                           "-o", (dir / "gmon.out").string(), "--report", "none"});
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.err.find("decoded 436") != std::string::npos);
}

// The simulator's model of a real ELF agrees with the decoder's check of it: every function it
// calls was built with -pg, each call's target lies just past that function's prologue call and
// each PC in code, so a capture of it (any seed) converts with its own ELF, says exactly the
// calls the simulator made, and gprof prints what rackprof prints; it did not with the default
// seed (0 records) and was refused as "wrong ELF" with the others.
TEST_CASE("simulate --model elf of the thesis ELFs: captures that fit them, gprof's numbers") {
    const auto data = testing::shared_data("simulate --model elf of the thesis ELFs");
    if (data.empty()) return;
    testing::TempDir dir;
    for (const char* elf_name : {"blinky.elf", "shield.elf"}) {
        for (const char* seed : {"1", "7"}) {
            CAPTURE(std::string(elf_name));
            CAPTURE(std::string(seed));
            const auto elf = (data / elf_name).string();
            const auto capture = (dir / "elf.bin").string(), gmon = (dir / "elf.gmon").string();
            const auto truth_path = dir / "truth.json";
            const auto made =
                testing::rackprof({"simulate", "--model", "elf", "--elf", elf, "--seed", seed, "-o",
                                   capture, "--truth", truth_path.string()});
            REQUIRE_MESSAGE(made.exit_code == 0, made.err);
            const auto truth = nlohmann::json::parse(testing::read_text(truth_path));
            CHECK(truth["arcs"].size() >= 10);
            CHECK(truth["pc_samples"].size() >= 10);
            const auto converted =
                testing::rackprof({"convert", capture, "--elf", elf, "-o", gmon});
            REQUIRE_MESSAGE(converted.exit_code == 0, converted.err);
            CHECK(converted.out == testing::gprof_brief(data / elf_name, gmon));
            // Calls per function (by entry address), as the simulator made them.
            const auto hex = [](const nlohmann::json& v) {
                return std::stoull(v.get<std::string>(), nullptr, 16) & ~1ull;
            };
            std::map<std::uint64_t, std::uint64_t> made_calls, profiled_calls;
            for (const auto& arc : truth["arcs"]) {
                for (const auto& f : truth["functions"]) {
                    const auto entry = hex(f["addr"]);
                    if (hex(arc["self"]) >= entry &&
                        hex(arc["self"]) < entry + f["size"].get<std::uint64_t>())
                        made_calls[entry] += arc["count"].get<std::uint64_t>();
                }
            }
            const auto report = nlohmann::json::parse(
                testing::rackprof({"convert", capture, "--elf", elf, "--export", "json", "-o", "-"})
                    .out);
            for (const auto& row : report["profile"]["flat"])
                if (row["calls"].is_number()) profiled_calls[hex(row["address"])] = row["calls"];
            CHECK(profiled_calls == made_calls);
        }
    }
}

// Issue 16: the blinky capture decoded with shield.elf (same code range, no build-id) gave exit
// 0 and an entirely wrong profile. Its call targets are checked against the ELF's code now.
TEST_CASE("thesis capture with the wrong ELF of the same code range: refused with the evidence") {
    const auto data = testing::shared_data("thesis capture with the wrong ELF");
    if (data.empty()) return;
    testing::TempDir dir;
    const auto capture = (data / "blink1hex.txt").string();
    const auto out = (dir / "gmon.out").string();
    const auto wrong =
        testing::rackprof({"convert", capture, "--elf", (data / "shield.elf").string(), "-o", out,
                           "--report", "none"});
    INFO(wrong.err);
    CHECK(wrong.exit_code == 1);
    CHECK(wrong.err.find("10 of 10 call targets (26440 of 26440 calls) are not at a function entry "
                         "in shield.elf") != std::string::npos);
    CHECK(wrong.err.find("wrong ELF for this capture? (--force profiles it anyway)") !=
          std::string::npos);
    CHECK_FALSE(std::filesystem::exists(out));

    const auto forced = testing::rackprof(
        {"convert", capture, "--elf", (data / "shield.elf").string(), "-o", out, "--force"});
    CHECK(forced.exit_code == 0);
    CHECK(forced.err.find("warning: 10 of 10 call targets") != std::string::npos);

    const auto right =
        testing::rackprof({"convert", capture, "--elf", (data / "blinky.elf").string(), "-o", out,
                           "--report", "none"});
    CHECK(right.exit_code == 0);
    CHECK(right.err.find("call targets") == std::string::npos);

    // The thesis' gmon.out files: each fits its own ELF, not the other.
    const auto elf = [&](const char* name) { return (data / name).string(); };
    auto gmon = [&](const char* file, const char* elf_name) {
        return testing::rackprof({"convert", (data / file).string(), "--format", "gmon", "--elf",
                                  elf(elf_name), "--report", "none"});
    };
    CHECK(gmon("blink1gmon.out", "blinky.elf").exit_code == 0);
    CHECK(gmon("shield1gmon.out", "shield.elf").exit_code == 0);
    const auto crossed = gmon("shield1gmon.out", "blinky.elf");
    CHECK(crossed.exit_code == 1);
    CHECK(crossed.err.find("18 of 18 call targets") != std::string::npos);
}

}  // namespace
}  // namespace rackprof
