// Issue 19, items 5-7 end to end through the rackprof binary: the sampling error of each flat
// row (convert --intervals), the synchronisation alarm (simulate --model synced, --dither,
// check-sync) and the Tiva-style binned PC report as an input (convert --format tiva).
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "gmon/synthetic_elf.h"
#include "gmon/tiva_test_support.h"
#include "tests/integration/test_support.h"

namespace rackprof {
namespace {

using gmon::testing::printed_tiva_report;
using gmon::testing::tiva_item_report;
using nlohmann::json;
using testing::rackprof;

// A capture of `model` and its ELF in `dir`, named by `name`.
void simulate(const testing::TempDir& dir, const std::string& name, const std::string& model,
              std::vector<std::string> extra) {
    std::vector<std::string> args = {"simulate",
                                     "--model",
                                     model,
                                     "-o",
                                     (dir / (name + ".bin")).string(),
                                     "--write-elf",
                                     (dir / (name + ".elf")).string()};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto sim = rackprof(args);
    REQUIRE_MESSAGE(sim.exit_code == 0, sim.err);
}

testing::CommandResult check_sync(const testing::TempDir& dir, const std::string& fixed,
                                  const std::string& dithered) {
    return rackprof({"check-sync", (dir / (fixed + ".bin")).string(),
                     (dir / (dithered + ".bin")).string(), "--elf",
                     (dir / (fixed + ".elf")).string(), "--json"});
}

// Functions where the report found its time (fig. 10-1): tasks.obj in bins 42-47, driverLib
// in 289-290, portasm.obj in 321-323.
void write_tiva_elf(const std::filesystem::path& path) {
    gmon::write_synthetic_elf(path,
                              {{"startup", 0x0000, 0xA80},
                               {"Task_ProgramTrace", 0xA80, 0x180},    // bins 42..47
                               {"TimerIntClear", 0x4840, 0x80},        // bins 289, 290
                               {"xPortPendSVHandler", 0x5040, 0xC0}},  // bins 321..323
                              0x0, 0x8000);
}

const json& flat_row(const json& profile, const std::string& name) {
    for (const auto& row : profile["flat"])
        if (row["name"] == name) return row;
    FAIL("no flat row " << name);
    throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("convert --intervals: gprof's text, then each flat row's 95 % Wilson interval") {
    testing::TempDir dir;
    simulate(dir, "blinky", "blinky", {"--iterations", "40"});
    const auto plain = rackprof({"convert", (dir / "blinky.bin").string(), "--elf",
                                 (dir / "blinky.elf").string(), "-o", (dir / "g.out").string()});
    REQUIRE_MESSAGE(plain.exit_code == 0, plain.err);
    const auto with =
        rackprof({"convert", (dir / "blinky.bin").string(), "--elf", (dir / "blinky.elf").string(),
                  "-o", (dir / "g.out").string(), "--intervals"});
    REQUIRE_MESSAGE(with.exit_code == 0, with.err);
    CHECK(plain.out.find("Wilson") == std::string::npos);
    const auto graph = plain.out.find("\f\n");
    REQUIRE(graph != std::string::npos);
    CHECK(with.out.substr(0, graph) == plain.out.substr(0, graph));
    CHECK(with.out.ends_with(plain.out.substr(graph)));
    CHECK(with.out.find("95% Wilson score intervals") != std::string::npos);
    // The JSON report: every flat row has the interval, around its percent.
    const auto report =
        rackprof({"convert", (dir / "blinky.bin").string(), "--elf", (dir / "blinky.elf").string(),
                  "-o", (dir / "g.out").string(), "--report", "json"});
    REQUIRE(report.exit_code == 0);
    const json profile = json::parse(report.out)["profile"];
    REQUIRE(!profile["flat"].empty());
    for (const auto& row : profile["flat"]) {
        REQUIRE(row.contains("self_percent_interval"));
        REQUIRE(row.contains("self_seconds_interval"));
        CHECK(row["self_percent_interval"][0].get<double>() <= row["percent"].get<double>());
        CHECK(row["self_percent_interval"][1].get<double>() >= row["percent"].get<double>());
    }
}

TEST_CASE("the synchronisation alarm: the synced model trips it, blinky does not") {
    testing::TempDir dir;
    // The synced model's loop lasts exactly the sampling period: at a fixed period every sample
    // lands in compute() at one PC; dithered, the true 10 / 60 / 30 %.
    simulate(dir, "synced-fixed", "synced", {"--iterations", "3000"});
    simulate(dir, "synced-dithered", "synced", {"--iterations", "3000", "--dither", "125"});
    const auto alarm = check_sync(dir, "synced-fixed", "synced-dithered");
    CHECK_MESSAGE(alarm.exit_code == 1, alarm.err);
    const json check = json::parse(alarm.out);
    CHECK(check["synchronised"] == true);
    CHECK(check["warning"].get<std::string>().find("compute (100.0 % fixed") != std::string::npos);
    std::map<std::string, double> dithered;
    for (const auto& f : check["functions"]) {
        CHECK(f["flagged"] == true);
        dithered[f["name"]] = f["dithered"]["self_percent"].get<double>();
    }
    CHECK(dithered["main"] == doctest::Approx(10).epsilon(0.25));
    CHECK(dithered["compute"] == doctest::Approx(60).epsilon(0.05));
    CHECK(dithered["idle_wait"] == doctest::Approx(30).epsilon(0.1));
    CHECK(alarm.err.find("sampling synchronised with the program?") != std::string::npos);

    // blinky: its samples do not lock to a phase; dither or not, the shares agree.
    simulate(dir, "blinky-fixed", "blinky", {"--iterations", "300", "--seed", "3"});
    simulate(dir, "blinky-dithered", "blinky",
             {"--iterations", "300", "--seed", "4", "--dither", "125"});
    const auto calm = check_sync(dir, "blinky-fixed", "blinky-dithered");
    CHECK_MESSAGE(calm.exit_code == 0, calm.out << calm.err);
    CHECK(json::parse(calm.out)["synchronised"] == false);
    CHECK(json::parse(calm.out)["warning"].is_null());
    // And the text form says so.
    const auto text = rackprof({"check-sync", (dir / "blinky-fixed.bin").string(),
                                (dir / "blinky-dithered.bin").string(), "--elf",
                                (dir / "blinky-fixed.elf").string()});
    CHECK(text.out.find("no synchronisation") != std::string::npos);
    CHECK(rackprof({"check-sync", (dir / "blinky-fixed.bin").string()}).exit_code == 2);
    CHECK(rackprof({"simulate", "--model", "synced", "--dither", "1000", "-o", "-"}).exit_code ==
          2);
}

TEST_CASE("convert --format tiva: a Tiva binned PC report becomes a profile and a gmon.out") {
    testing::TempDir dir;
    const auto elf = dir / "tiva.elf";
    write_tiva_elf(elf);
    const std::map<std::uint32_t, std::uint64_t> first = {
        {42, 310}, {43, 95}, {47, 40}, {289, 3}, {290, 1}, {321, 512}, {322, 870}, {323, 4100}};
    const std::map<std::uint32_t, std::uint64_t> second = {{42, 290},  {46, 9},    {290, 2},
                                                           {321, 498}, {322, 901}, {323, 4104}};
    const auto report = dir / "tiva-report.txt";
    std::ofstream(report) << "console up\n"
                          << tiva_item_report(1, first) << tiva_item_report(2, second);
    for (const char* format : {"auto", "tiva"}) {
        CAPTURE(format);
        const auto out = dir / "gmon.out";
        const auto conv = rackprof({"convert", report.string(), "--format", format, "--elf",
                                    elf.string(), "-o", out.string(), "--report", "json"});
        REQUIRE_MESSAGE(conv.exit_code == 0, conv.err);
        const json doc = json::parse(conv.out);
        CHECK(doc["source"]["format"] == "tiva");
        const json& profile = doc["profile"];
        CHECK(profile["prof_rate"] == 100);
        CHECK(profile["total_samples"] == 11735);
        CHECK(flat_row(profile, "Task_ProgramTrace")["samples"].get<double>() == 744);
        CHECK(flat_row(profile, "TimerIntClear")["samples"].get<double>() == 6);
        CHECK(flat_row(profile, "xPortPendSVHandler")["samples"].get<double>() == 10985);
        CHECK(flat_row(profile, "xPortPendSVHandler")["self_seconds"].get<double>() ==
              doctest::Approx(109.85));
        // The gmon.out gprof reads: the same flat profile.
        const std::string gprof = testing::gprof_brief(elf, out);
        CHECK(gprof.find("xPortPendSVHandler") != std::string::npos);
        CHECK(gprof.find("Each sample counts as 0.01 seconds.") != std::string::npos);
        const auto text = rackprof({"convert", report.string(), "--format", format, "--elf",
                                    elf.string(), "-o", (dir / "again.out").string()});
        REQUIRE(text.exit_code == 0);
        CHECK(text.out == gprof);
    }
    // Garbage and a truncated report: clear errors, no gmon.out.
    std::ofstream(dir / "garbage.txt") << "hello\nworld\n";
    const auto garbage = rackprof({"convert", (dir / "garbage.txt").string(), "--format", "tiva",
                                   "--elf", elf.string(), "-o", (dir / "bad.out").string()});
    CHECK(garbage.exit_code != 0);
    CHECK(garbage.err.find("not a Tiva binned PC report") != std::string::npos);
    // A report cut mid-line (a reset, a lost UART): what came is profiled, the loss is said.
    const std::string whole = tiva_item_report(1, first);
    std::ofstream(dir / "cut.txt") << whole.substr(0, whole.find("\n600300,42,0,") + 12);
    const auto cut = rackprof({"convert", (dir / "cut.txt").string(), "--elf", elf.string(), "-o",
                               (dir / "cut.out").string()});
    REQUIRE_MESSAGE(cut.exit_code == 0, cut.err);
    CHECK(cut.err.find("a Tiva report file of 1 report(s): profiled") != std::string::npos);
    CHECK(cut.err.find("1 bin line(s) unreadable") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dir / "bad.out"));
}

// The Tiva project's TI ARM linker map (armcl's layout) with the functions write_tiva_elf puts
// in its ELF: a Tiva report profiled where only the map was kept.
TEST_CASE("convert --map: a Tiva report named by its TI linker map") {
    testing::TempDir dir;
    std::ofstream(dir / "tiva.map")
        << "******************************************************************************\n"
           "                  TI ARM Linker PC v20.2.5\n"
           "******************************************************************************\n"
           "OUTPUT FILE NAME:   <EECS690_Profiler.out>\n\n"
           "SECTION ALLOCATION MAP\n\n"
           " output                                  attributes/\n"
           "section   page    origin      length       input sections\n"
           "--------  ----  ----------  ----------   ----------------\n"
           ".text      0    00000000    00008000     \n"
           "                  00000000    00000a80     startup_ccs.obj (.text:startup)\n"
           "                  00000a80    00000180     Task_ProgramTrace.obj "
           "(.text:Task_ProgramTrace)\n"
           "                  00004840    00000080     driverlib.lib : timer.obj "
           "(.text:TimerIntClear)\n"
           "                  00005040    000000c0     portasm.obj (.text)\n\n"
           "GLOBAL SYMBOLS: SORTED BY Symbol Address \n\n"
           "address   name                          \n"
           "-------   ----                          \n"
           "00000a81  Task_ProgramTrace             \n"
           "00004841  TimerIntClear                 \n"
           "00005041  xPortPendSVHandler            \n\n"
           "[3 symbols]\n";
    const std::map<std::uint32_t, std::uint64_t> first = {
        {42, 310}, {43, 95}, {47, 40}, {289, 3}, {290, 1}, {321, 512}, {322, 870}, {323, 4100}};
    std::ofstream(dir / "report.txt") << tiva_item_report(1, first);
    const auto conv =
        rackprof({"convert", (dir / "report.txt").string(), "--map", (dir / "tiva.map").string(),
                  "-o", (dir / "gmon.out").string(), "--report", "json"});
    REQUIRE_MESSAGE(conv.exit_code == 0, conv.err);
    CHECK(conv.err.find("symbols from the TI map") != std::string::npos);
    const json doc = json::parse(conv.out);
    CHECK(doc["source"]["symbols_from"] == "TI map");
    CHECK(flat_row(doc["profile"], "Task_ProgramTrace")["samples"].get<double>() == 445);
    CHECK(flat_row(doc["profile"], "TimerIntClear")["samples"].get<double>() == 4);
    CHECK(flat_row(doc["profile"], "xPortPendSVHandler")["samples"].get<double>() == 5482);
}

TEST_CASE("convert: Tiva reports as printf prints them, summed or one by --tiva-report") {
    testing::TempDir dir;
    const auto elf = dir / "tiva.elf";
    write_tiva_elf(elf);
    const std::map<std::uint32_t, std::uint64_t> first = {{42, 310}, {289, 3}, {323, 4100}};
    const std::map<std::uint32_t, std::uint64_t> second = {{46, 9}, {290, 2}, {322, 901}};
    const auto report = dir / "uart.log";
    std::ofstream(report, std::ios::binary)
        << "\x1b[0m FreeRTOS up\r\n"
        << printed_tiva_report(1, first) << printed_tiva_report(2, second);
    const auto json_of = [&](std::vector<std::string> extra) {
        std::vector<std::string> args = {
            "convert",  report.string(), "--elf", elf.string(), "-o", (dir / "gmon.out").string(),
            "--report", "json"};
        args.insert(args.end(), extra.begin(), extra.end());
        const auto conv = rackprof(args);
        REQUIRE_MESSAGE(conv.exit_code == 0, conv.err);
        return std::make_pair(json::parse(conv.out), conv.err);
    };
    const auto [summed, summed_err] = json_of({});  // detected: no --format
    CHECK(summed["source"]["format"] == "tiva");
    CHECK(summed["source"]["tiva"]["reports"] == 2);
    CHECK(summed["source"]["tiva"]["profiled"] == "sum");
    CHECK(summed["source"]["tiva"]["lines_skipped"] == 1);
    CHECK(summed["profile"]["total_samples"] == 310 + 3 + 4100 + 9 + 2 + 901);
    CHECK(summed_err.find("summed (one profile; --tiva-report N profiles one") !=
          std::string::npos);
    CHECK(flat_row(summed["profile"], "xPortPendSVHandler")["samples"].get<double>() == 5001);
    const auto [one, one_err] = json_of({"--tiva-report", "2"});
    CHECK(one["source"]["tiva"]["profiled"] == 2);
    CHECK(one["profile"]["total_samples"] == 9 + 2 + 901);
    CHECK(flat_row(one["profile"], "Task_ProgramTrace")["samples"].get<double>() == 9);
    CHECK(flat_row(one["profile"], "TimerIntClear")["samples"].get<double>() == 2);
    // The sampler's constants as options: 32-byte bins at 1 kHz halve every bin's address (bin
    // 42 is 0x540 now, in startup; 289 and 323 fall between functions).
    const auto [fine, fine_err] =
        json_of({"--tiva-report", "1", "--bin-bytes", "32", "--rate", "1000"});
    CHECK(fine["profile"]["prof_rate"] == 1000);
    CHECK(flat_row(fine["profile"], "startup")["samples"].get<double>() == 310);
    const auto none = rackprof({"convert", report.string(), "--elf", elf.string(), "-o",
                                (dir / "x.out").string(), "--tiva-report", "3"});
    CHECK(none.exit_code != 0);
    CHECK(none.err.find("no report 3: the file holds 2") != std::string::npos);
}

}  // namespace rackprof
