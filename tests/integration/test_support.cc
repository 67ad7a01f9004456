#include "tests/integration/test_support.h"

#include <doctest/doctest.h>

#include <iostream>

namespace rackprof::testing {

std::vector<std::string> rackprof_argv(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {RACKPROF_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
}

CommandResult rackprof(const std::vector<std::string>& args) {
    return run(rackprof_argv(args));
}

std::string gprof_brief(const std::filesystem::path& elf, const std::filesystem::path& gmon) {
    const auto r = run({"arm-none-eabi-gprof", "-b", elf.string(), gmon.string()});
    INFO("gprof stderr: " << r.err);
    REQUIRE_MESSAGE(
        r.exit_code == 0,
        "arm-none-eabi-gprof failed (is binutils-arm-none-eabi installed? run ./setup.sh)");
    return r.out;
}

std::filesystem::path shared_data(const char* test_name) {
    const std::filesystem::path dir = RACKPROF_SHARED_DATA;
    if (std::filesystem::exists(dir / "blinky.elf")) return dir;
    std::cout << "SKIP: " << test_name << ": the thesis captures are not at " << dir.string()
              << "\n";
    return {};
}

}  // namespace rackprof::testing
