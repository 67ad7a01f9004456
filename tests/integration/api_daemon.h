// A real `rackprof serve` on a simulated board, driven with curl as CI jobs drive it: the API
// suites' daemon.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <memory>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "tests/integration/test_support.h"

namespace rackprof::testing {

class ApiDaemon {
  public:
    // `server_extra`: more lines of the [server] table (e.g. "token_for_reads = true\n").
    explicit ApiDaemon(const std::string& listen = "127.0.0.1:0",
                       const std::vector<std::string>& env = {},
                       const std::string& server_extra = "") {
        REQUIRE(rackprof({"simulate", "--model", "deterministic", "--iterations", "1",
                          "--write-elf", (dir_ / "model.elf").string()})
                    .exit_code == 0);
        std::ofstream(dir_ / "rack.toml")
            << "[server]\nlisten = \"" << listen << "\"\n"
            << server_extra << "[storage]\npath = \"" << (dir_ / "rack.db").string()
            << "\"\n[[boards]]\nname = \"det\"\n"
            << "link = \"sim://deterministic?rate=40000\"\nelf = \""
            << (dir_ / "model.elf").string() << "\"\n";
        env_ = env;
        launch();
    }
    // Stops the daemon (SIGTERM) and starts it again on the same configuration and database.
    void restart() {
        stop();
        launch();
    }
    void stop() {
        daemon_->signal(SIGTERM);
        REQUIRE(daemon_->wait(std::chrono::seconds(5)) == 0);
        daemon_.reset();
    }
    void launch() {
        daemon_ = std::make_unique<Process>(
            rackprof_argv({"serve", "--config", (dir_ / "rack.toml").string()}), dir_ / "serve.log",
            std::filesystem::path(), env_);
        std::smatch m;
        REQUIRE(eventually(
            [&] {
                log_ = read_text(dir_ / "serve.log");
                return std::regex_search(log_, m,
                                         std::regex("HTTP API listening on [0-9.]+:([0-9]+)"));
            },
            std::chrono::seconds(10)));
        port_ = m[1].str();
        REQUIRE(eventually(
            [&] {
                return read_text(dir_ / "serve.log").find("[det] session") != std::string::npos;
            },
            std::chrono::seconds(10)));
    }
    ~ApiDaemon() {
        if (!daemon_) return;
        daemon_->signal(SIGTERM);
        daemon_->wait(std::chrono::seconds(5));
    }
    std::string url(const std::string& path) const { return "http://127.0.0.1:" + port_ + path; }
    int port() const { return std::stoi(port_); }
    pid_t pid() const { return daemon_->pid(); }
    long rss_kib() const { return daemon_->rss_kib(); }
    const TempDir& dir() const { return dir_; }

    // curl: returns {status, body}.
    std::pair<int, std::string> call(const std::string& method, const std::string& path,
                                     const std::vector<std::string>& extra = {}) const {
        std::vector<std::string> argv = {
            "curl", "-sS", "-X", method, "-o", (dir_ / "body").string(), "-w", "%{http_code}"};
        argv.insert(argv.end(), extra.begin(), extra.end());
        argv.push_back(url(path));
        const auto r = run(argv);
        return {std::stoi(r.out.empty() ? "0" : r.out), read_text(dir_ / "body")};
    }

    // `path` with `file` as its body, sent chunked (as curl sends a stream of unknown length).
    std::pair<int, std::string> upload_chunked(const std::string& method, const std::string& path,
                                               const std::filesystem::path& file) const {
        return call(method, path,
                    {"-H", "Transfer-Encoding: chunked", "--data-binary", "@" + file.string()});
    }

  private:
    TempDir dir_;
    std::unique_ptr<Process> daemon_;
    std::string log_;
    std::string port_;
    std::vector<std::string> env_;
};

// The daemon's peak resident memory (VmHWM), in bytes.
inline std::uint64_t peak_memory(pid_t pid) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(status, line);) {
        if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
    }
    return 0;
}

// The growth of the daemon's peak memory (VmHWM) while `work` runs, in bytes.
inline std::uint64_t peak_growth(pid_t pid, const std::function<void()>& work) {
    const std::uint64_t before = peak_memory(pid);
    REQUIRE(before > 0);
    work();
    const std::uint64_t after = peak_memory(pid);
    MESSAGE("peak memory " << before / 1024 << " kB before, " << after / 1024 << " kB after");
    return after - before;
}

}  // namespace rackprof::testing
