// What the integration tests add to the generic support: the rackprof binary under test,
// the gprof oracle, and the thesis captures.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/process.h"

namespace rackprof::testing {

// The paths the suites were built for, compiled into test_support.cc alone (the suites' own
// files carry no absolute path, so a clone of the tree elsewhere hits ccache for them).
extern const char* const kRackprofBinary;  // the rackprof binary under test
extern const char* const kSourceDir;       // the source tree
extern const char* const kBuildDir;        // its build folder
extern const char* const kSharedData;      // ../shared/data/thesis beside the tree
#define RACKPROF_BINARY ::rackprof::testing::kRackprofBinary
#define RACKPROF_SOURCE_DIR ::rackprof::testing::kSourceDir
#define RACKPROF_BUILD_DIR ::rackprof::testing::kBuildDir
#define RACKPROF_SHARED_DATA ::rackprof::testing::kSharedData

std::vector<std::string> rackprof_argv(const std::vector<std::string>& args);
// Runs the rackprof binary under test.
CommandResult rackprof(const std::vector<std::string>& args);

// The gprof of an ELF's machine: arm-none-eabi-gprof, riscv64-unknown-elf-gprof, gprof.
std::string gprof_for(const std::filesystem::path& elf);

// Runs the ELF's gprof -b ELF GMON (with -l: line by line) and returns its output; fails
// the test if it fails.
std::string gprof_brief(const std::filesystem::path& elf, const std::filesystem::path& gmon,
                        bool lines = false);

// The thesis captures in ../shared, or an empty path (with a visible SKIP line) if absent.
std::filesystem::path shared_data(const char* test_name);

// The daemon's HTTP port as its log `log` announces it ("HTTP API listening on IP:PORT"), or
// "" before it does.
std::string api_port_in(const std::string& log);
// Waits up to 10 s for the log file at `log_path` to announce the port; fails the test if not.
std::string wait_for_api_port(const std::filesystem::path& log_path);

// Waits up to 20 s until the daemon on `port` lists `count` sessions, every one completed (file
// links replayed to their end); returns them. Fails the test if not.
nlohmann::json wait_for_completed_sessions(const std::string& port, std::size_t count);

// GET http://127.0.0.1:PORT/PATH with curl: {HTTP status (0 when curl failed), body}. With
// `to_file` the body goes there instead (a download) and the returned body is empty.
struct HttpReply {
    int status = 0;
    std::string body;
};
HttpReply http_get(const std::string& port, const std::string& path,
                   const std::filesystem::path& to_file = {});

// A TCP socket listening on 127.0.0.1 (backlog 1), as a board's TCP server or a probe's SWO
// server is played. Port 0 takes a free port; SO_REUSEADDR lets a test listen again on a port
// it has just closed (a server restarting).
struct LoopbackListener {
    int fd = -1;
    int port = 0;
};
LoopbackListener listen_loopback(int port = 0);

}  // namespace rackprof::testing
