// What the integration tests add to the generic support: the rackprof binary under test,
// the gprof oracle, and the thesis captures.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/process.h"

namespace rackprof::testing {

std::vector<std::string> rackprof_argv(const std::vector<std::string>& args);
// Runs the rackprof binary under test.
CommandResult rackprof(const std::vector<std::string>& args);

// Runs arm-none-eabi-gprof -b ELF GMON and returns its output; fails the test if it fails.
std::string gprof_brief(const std::filesystem::path& elf, const std::filesystem::path& gmon);

// The thesis captures in ../shared, or an empty path (with a visible SKIP line) if absent.
std::filesystem::path shared_data(const char* test_name);

}  // namespace rackprof::testing
