// Test and benchmark support: temporary folders, child processes, files. No test framework.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
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

// Runs argv (no shell), capturing standard output and error; `env` as for Process.
CommandResult run(const std::vector<std::string>& argv, const std::vector<std::string>& env = {});

// A child process left running: its stderr goes to a file; killed at scope exit if still alive.
class Process {
  public:
    // `env`: KEY=VALUE entries added to this process's environment for the child.
    Process(const std::vector<std::string>& argv, const std::filesystem::path& stderr_path,
            const std::filesystem::path& cwd = {}, const std::vector<std::string>& env = {});
    ~Process();
    Process(const Process&) = delete;
    Process& operator=(const Process&) = delete;

    pid_t pid() const { return pid_; }
    void signal(int sig);
    // Waits up to `timeout` for the exit; returns the exit code, or -1 on timeout.
    // Polls every `poll` (a benchmark timing the process asks for finer than the default).
    int wait(std::chrono::milliseconds timeout,
             std::chrono::milliseconds poll = std::chrono::milliseconds(20));
    bool running();
    int open_fds() const;        // descriptors in /proc/PID/fd
    long rss_kib() const;        // resident memory, /proc/PID/status VmRSS
    double cpu_seconds() const;  // user + system CPU so far, /proc/PID/stat
    // The same for its thread of this name (/proc/PID/task/*/comm); -1 when it has none.
    double thread_cpu_seconds(const std::string& name) const;

  private:
    pid_t pid_ = -1;
    int status_ = -1;
};

// Polls `condition` every `poll` until true or the timeout passes.
bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout,
                std::chrono::milliseconds poll = std::chrono::milliseconds(20));

std::string read_text(const std::filesystem::path& path);

}  // namespace rackprof::testing
