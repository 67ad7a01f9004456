#include "tests/integration/test_support.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace rackprof::testing {

TempDir::TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("rackprof-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
    std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
}

std::string read_text(const std::filesystem::path& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

CommandResult run(const std::vector<std::string>& argv) {
    TempDir scratch;
    const auto out_path = scratch / "stdout";
    const auto err_path = scratch / "stderr";
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_t pid = 0;
    CommandResult result;
    const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
        result.err = "cannot start " + argv[0];
        return result;
    }
    int status = 0;
    waitpid(pid, &status, 0);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    result.out = read_text(out_path);
    result.err = read_text(err_path);
    return result;
}

CommandResult rackprof(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {RACKPROF_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv);
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
