#include "daemon/app/command_line.h"

#include <doctest/doctest.h>

namespace rackprof::daemon {
namespace {

TEST_CASE("options, values and positionals") {
    const CommandLine cl({"in.txt", "--elf", "a.elf", "--rate=500", "-o", "out", "--help"},
                         {"--elf", "--rate", "-o"}, {"--help"});
    CHECK(cl.positionals() == std::vector<std::string>{"in.txt"});
    CHECK(cl.get("--elf", "") == "a.elf");
    CHECK(cl.get_uint("--rate", 0) == 500);
    CHECK(cl.get("-o", "") == "out");
    CHECK(cl.has("--help"));
    CHECK_FALSE(cl.has("--other"));
}

TEST_CASE("mistakes are usage errors") {
    CHECK_THROWS_AS(CommandLine({"--nope"}, {}, {}), UsageError);
    CHECK_THROWS_AS(CommandLine({"--elf"}, {"--elf"}, {}), UsageError);
    const CommandLine cl({"--rate", "fast", "--drop", "2"}, {"--rate", "--drop"}, {});
    CHECK_THROWS_AS(cl.get_uint("--rate", 0), UsageError);
    CHECK_THROWS_AS(cl.get_rate("--drop"), UsageError);
    CHECK_THROWS_AS(cl.choice("--rate", "x", {"slow"}), UsageError);
}

TEST_CASE("sizes") {
    CHECK(parse_size("200M") == 200ull << 20);
    CHECK(parse_size("64k") == 64ull << 10);
    CHECK(parse_size("7") == 7);
    CHECK_THROWS_AS(parse_size("12X"), UsageError);
    CHECK_THROWS_AS(parse_size(""), UsageError);
}

}  // namespace
}  // namespace rackprof::daemon
