// Helpers for integration tests: temporary folders, running commands, reading files.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace rackprof::testing {

// A fresh folder under the system temp dir, removed with everything in it at scope exit.
class TempDir {
  public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::filesystem::path& path() const { return path_; }
    std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

  private:
    std::filesystem::path path_;
};

struct CommandResult {
    int exit_code = -1;
    std::string out;
    std::string err;
};

// Runs argv (no shell), capturing standard output and error.
CommandResult run(const std::vector<std::string>& argv);

// Runs the rackprof binary under test.
CommandResult rackprof(const std::vector<std::string>& args);

// Runs arm-none-eabi-gprof -b ELF GMON and returns its output; fails the test if it fails.
std::string gprof_brief(const std::filesystem::path& elf, const std::filesystem::path& gmon);

std::string read_text(const std::filesystem::path& path);

// The thesis captures in ../shared, or an empty path (with a visible SKIP line) if absent.
std::filesystem::path shared_data(const char* test_name);

}  // namespace rackprof::testing
