// The thesis' real captures (../shared/data/thesis): decoded and profiled by rackprof, checked
// against the thesis' own gmon.out files and against gprof. Skipped, visibly, without them.
#include <doctest/doctest.h>

#include <map>

#include "gmon/gmon_reader.h"
#include "gmon/profile.h"
#include "gmon/report.h"
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

}  // namespace
}  // namespace rackprof
