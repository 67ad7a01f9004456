#include "gmon/callgrind_export.h"

#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>

#include "gmon/synthetic_elf.h"
#include "gmon/temp_elf_test.h"

namespace rackprof::gmon {
namespace {

// The program of this file's tests.
struct ProgramElf : TempElf {
    ProgramElf()
        : TempElf({{"main", 0x100, 0x40}, {"work", 0x140, 0x40}, {"leaf", 0x180, 0x40}}, 0x100,
                  0x1c0) {}
};

std::string body_of(const std::string& file) {
    return file.substr(file.find("events: Samples\n") + 16);
}

TEST_CASE("callgrind: self samples per function, gprof's inclusive cost per arc") {
    ProgramElf elf;
    auto a = std::make_shared<Aggregate>();
    a->add_arc(0x104, 0x140, 3);  // main -> work, 3 of work's 4 calls
    a->add_arc(0x184, 0x140, 1);  // leaf -> work
    a->add_arc(0x108, 0x180, 1);  // main -> leaf
    a->add_arc(0x144, 0x140, 5);  // work -> work: set aside, as gprof does
    a->add_pc(0x110, 10);
    a->add_pc(0x150, 40);
    a->add_pc(0x190, 6);
    auto input = std::make_shared<ExportInput>();
    input->source.aggregate = a;
    input->source.elf = Symbolizer::load(elf.path);
    input->summary = {{"board", "bench-1"}, {"session", 4}};
    std::string file;
    export_to("callgrind", input, [&](std::string_view chunk) { file += chunk; });

    CHECK(file.rfind("# callgrind format\nversion: 1\ncreator: rackprof\n", 0) == 0);
    CHECK(file.find("desc: board: bench-1\n") != std::string::npos);
    CHECK(file.find("desc: session: 4\n") != std::string::npos);
    CHECK(file.find("positions: line\nevents: Samples\n") != std::string::npos);
    // leaf's 6 and the 10 of work's 40 charged through its call from leaf (1 of 4 calls) are
    // what main gets through leaf: 16; through its own 3 calls, 30 of work's 40.
    CHECK(body_of(file) ==
          "summary: 56\n"
          "\nfl=???\nfn=main\n0 10\n"
          "cfl=???\ncfn=work\ncalls=3 0\n0 30\n"
          "cfl=???\ncfn=leaf\ncalls=1 0\n0 16\n"
          "\nfl=???\nfn=work\n0 40\n"
          "\nfl=???\nfn=leaf\n0 6\n"
          "cfl=???\ncfn=work\ncalls=1 0\n0 10\n");
    // A stored session's summary object: its id stands for it.
    input->summary["session"] = {{"id", 5}, {"state", "completed"}};
    std::string stored;
    export_to("callgrind", input, [&](std::string_view chunk) { stored += chunk; });
    CHECK(stored.find("desc: session: 5\n") != std::string::npos);
}

TEST_CASE("callgrind: samples credited to no function are a block of their own") {
    ProgramElf elf;
    auto a = std::make_shared<Aggregate>();
    a->add_pc(0x110, 3);
    auto input = std::make_shared<ExportInput>();
    input->source.aggregate = a;
    input->source.elf = Symbolizer::load(elf.path);
    input->source.histograms = std::vector<HistogramSpec>{{0x80, 0x1c0, 2, 1000, 0}};
    auto with_outside = std::make_shared<Aggregate>(*a);
    with_outside->add_pc(0x90, 2);  // in the histogram, before the first function
    input->source.aggregate = with_outside;
    const std::string file = callgrind_profile(*input);
    CHECK(body_of(file) ==
          "summary: 5\n\nfl=???\nfn=main\n0 3\n"
          "\nfl=???\nfn=(outside every function)\n0 2\n");
}

TEST_CASE("callgrind needs the ELF: refused when opened, as ExportNeedsElf") {
    auto input = std::make_shared<ExportInput>();
    CHECK_THROWS_AS(open_export("callgrind", input), ExportNeedsElf);
    CHECK_THROWS_AS(callgrind_profile(*input), ExportNeedsElf);
}

}  // namespace
}  // namespace rackprof::gmon
