// Real gmon.out files nobody on this project wrote: host programs built with gcc -pg and run,
// so glibc's own profiler writes them. `convert --report text` must print exactly what GNU
// gprof -b prints for the same pair (C, C++, a partial -pg build, a run too short to sample).
#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <vector>

#include "tests/integration/test_support.h"

namespace rackprof {
namespace {

using testing::rackprof;

// The program's known calls: main -> outer 3, outer -> work 20 each, work -> leaf 7 each
// (and leaf -> leaf through its recursion), ping <-> pong a cycle.
constexpr const char* kProgram = R"(
volatile unsigned long sink;
__attribute__((noinline)) unsigned long leaf(unsigned long x, int depth) {
    for (unsigned long i = 0; i < 100000; ++i) sink += i ^ x;
    return depth > 0 ? leaf(x + 1, depth - 1) : sink;
}
__attribute__((noinline)) void work(unsigned long x) {
    for (int i = 0; i < 7; ++i) sink += leaf(x + i, 1);
}
__attribute__((noinline)) void outer(int n) {
    for (int i = 0; i < 20; ++i) work((unsigned long)(n * 20 + i));
}
__attribute__((noinline)) int pong(int n);
__attribute__((noinline)) int ping(int n) { return n > 0 ? pong(n - 1) : 0; }
__attribute__((noinline)) int pong(int n) { return n > 0 ? ping(n - 1) : 1; }
__attribute__((noinline)) int run(int argc) {
    int rounds = argc > 1 ? 0 : 3;  /* an argument: a run too short to sample */
    for (int i = 0; i < rounds; ++i) outer(i);
    sink += (unsigned long)ping(9);
    return 0;
}
)";
constexpr const char* kMain = "int main(int argc, char** argv) { (void)argv; return run(argc); }\n";

// Builds `sources` (each with its flags) into dir/prog and runs it there: glibc writes gmon.out.
bool build_and_run(const testing::TempDir& dir, const std::string& compiler,
                   const std::vector<std::pair<std::string, std::string>>& sources,
                   const std::vector<std::string>& run_args = {}) {
    std::vector<std::string> objects;
    for (std::size_t i = 0; i < sources.size(); ++i) {
        const auto src = dir / ("part" + std::to_string(i) + (compiler == "g++" ? ".cc" : ".c"));
        std::ofstream(src) << sources[i].first;
        const auto obj = dir / ("part" + std::to_string(i) + ".o");
        std::vector<std::string> cmd = {compiler, "-O1",        "-g", "-fno-inline",
                                        "-c",     src.string(), "-o", obj.string()};
        if (!sources[i].second.empty()) cmd.push_back(sources[i].second);
        const auto r = testing::run(cmd);
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        objects.push_back(obj.string());
    }
    std::vector<std::string> link = {compiler, "-pg", "-no-pie", "-o", (dir / "prog").string()};
    link.insert(link.end(), objects.begin(), objects.end());
    const auto linked = testing::run(link);
    REQUIRE_MESSAGE(linked.exit_code == 0, linked.err);
    std::vector<std::string> run = {"sh", "-c",
                                    "cd '" + dir.path().string() + "' && ./prog" +
                                        (run_args.empty() ? "" : " " + run_args.front())};
    return testing::run(run).exit_code == 0 && std::filesystem::exists(dir / "gmon.out");
}

void check_as_gprof(const testing::TempDir& dir) {
    const auto theirs =
        testing::run({"gprof", "-b", (dir / "prog").string(), (dir / "gmon.out").string()});
    REQUIRE_MESSAGE(theirs.exit_code == 0, theirs.err);
    const auto ours = rackprof({"convert", (dir / "gmon.out").string(), "--elf",
                                (dir / "prog").string(), "--report", "text"});
    REQUIRE_MESSAGE(ours.exit_code == 0, ours.err);
    CHECK(ours.out == theirs.out);
    // By line (gprof -l): x86-64 DWARF 5 from the host's gcc, C++'s linkage names.
    const auto lines_theirs =
        testing::run({"gprof", "-l", "-b", (dir / "prog").string(), (dir / "gmon.out").string()});
    REQUIRE_MESSAGE(lines_theirs.exit_code == 0, lines_theirs.err);
    const auto lines_ours = rackprof(
        {"convert", (dir / "gmon.out").string(), "--elf", (dir / "prog").string(), "--lines"});
    REQUIRE_MESSAGE(lines_ours.exit_code == 0, lines_ours.err);
    CHECK(lines_ours.out == lines_theirs.out);
}

bool have_host_toolchain() {
    if (testing::run({"sh", "-c", "command -v gprof && command -v cc && command -v g++"})
            .exit_code == 0)
        return true;
    MESSAGE("SKIP: glibc gmon.out tests need gcc, g++ and gprof (binutils; ./setup.sh)");
    return false;
}

}  // namespace

TEST_CASE("glibc's gmon.out: a C program built with -pg, as gprof -b prints it") {
    if (!have_host_toolchain()) return;
    testing::TempDir dir;
    std::string program = kProgram;
    program += kMain;
    REQUIRE(build_and_run(dir, "cc", {{program, "-pg"}}));
    check_as_gprof(dir);
    const auto text = rackprof({"convert", (dir / "gmon.out").string(), "--elf",
                                (dir / "prog").string(), "--report", "text"})
                          .out;
    // The known calls: outer 3, work 60, pong and ping in a cycle.
    CHECK(text.find("<cycle 1 as a whole>") != std::string::npos);
    CHECK(text.find("60/60") != std::string::npos);
}

TEST_CASE("glibc's gmon.out: C++, a partial -pg build and a run too short to sample") {
    if (!have_host_toolchain()) return;
    SUBCASE("C++ (g++ -pg): mangled names demangled as gprof does") {
        testing::TempDir dir;
        std::string cpp = "namespace bench {\n";
        cpp += kProgram;
        cpp += "}\nint main(int argc, char**) { return bench::run(argc); }\n";
        REQUIRE(build_and_run(dir, "g++", {{cpp, "-pg"}}));
        check_as_gprof(dir);
    }
    SUBCASE("one file with -pg, one without: calls from the plain one are spontaneous") {
        testing::TempDir dir;
        const std::string plain =
            "extern volatile unsigned long sink;\n"
            "void helper(void) { for (int i = 0; i < 100000; ++i) sink += i; }\n";
        std::string main_part = "void helper(void);\n";
        main_part += kProgram;
        main_part +=
            "int main(int argc, char** argv) { (void)argv; helper(); return run(argc); }\n";
        REQUIRE(build_and_run(dir, "cc", {{main_part, "-pg"}, {plain, ""}}));
        check_as_gprof(dir);
    }
    SUBCASE("a run too short to sample: an empty histogram") {
        testing::TempDir dir;
        std::string program = kProgram;
        program += kMain;
        REQUIRE(build_and_run(dir, "cc", {{program, "-pg"}}, {"short"}));
        check_as_gprof(dir);
    }
}

}  // namespace rackprof
