#include "tests/integration/test_support.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <regex>

namespace rackprof::testing {

const char* const kRackprofBinary = RACKPROF_BINARY_PATH;
const char* const kSourceDir = RACKPROF_SOURCE_DIR_PATH;
const char* const kBuildDir = RACKPROF_BUILD_DIR_PATH;
const char* const kSharedData = RACKPROF_SHARED_DATA_PATH;

std::vector<std::string> rackprof_argv(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {RACKPROF_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
}

CommandResult rackprof(const std::vector<std::string>& args) {
    return run(rackprof_argv(args));
}

std::string gprof_for(const std::filesystem::path& elf) {
    std::ifstream in(elf, std::ios::binary);
    char header[20] = {};
    in.read(header, sizeof header);
    const int machine =
        static_cast<unsigned char>(header[18]) | (static_cast<unsigned char>(header[19]) << 8);
    if (machine == 243) return "riscv64-unknown-elf-gprof";  // EM_RISCV
    if (machine == 62) return "gprof";                       // EM_X86_64
    return "arm-none-eabi-gprof";
}

std::string gprof_brief(const std::filesystem::path& elf, const std::filesystem::path& gmon,
                        bool lines) {
    const std::string gprof = gprof_for(elf);
    std::vector<std::string> argv = {gprof, "-b", elf.string(), gmon.string()};
    if (lines) argv.insert(argv.begin() + 1, "-l");
    const auto r = run(argv);
    INFO("gprof stderr: " << r.err);
    REQUIRE_MESSAGE(r.exit_code == 0,
                    gprof << " failed (are its binutils installed? run ./setup.sh)");
    return r.out;
}

std::filesystem::path shared_data(const char* test_name) {
    const std::filesystem::path dir = RACKPROF_SHARED_DATA;
    if (std::filesystem::exists(dir / "blinky.elf")) return dir;
    std::cout << "SKIP: " << test_name << ": the thesis captures are not at " << dir.string()
              << "\n";
    return {};
}

std::string api_port_in(const std::string& log) {
    static const std::regex announced("HTTP API listening on [0-9.]+:([0-9]+)");
    std::smatch m;
    return std::regex_search(log, m, announced) ? m[1].str() : std::string();
}

std::string wait_for_api_port(const std::filesystem::path& log_path) {
    std::string port;
    REQUIRE(eventually(
        [&] {
            port = api_port_in(read_text(log_path));
            return !port.empty();
        },
        std::chrono::seconds(10)));
    return port;
}

nlohmann::json wait_for_completed_sessions(const std::string& port, std::size_t count) {
    nlohmann::json sessions;
    REQUIRE(eventually(
        [&] {
            const auto reply = http_get(port, "/api/v1/sessions");
            if (reply.status != 200) return false;
            sessions = nlohmann::json::parse(reply.body);
            return sessions.size() == count &&
                   std::all_of(sessions.begin(), sessions.end(),
                               [](const nlohmann::json& s) { return s["state"] == "completed"; });
        },
        std::chrono::seconds(20)));
    return sessions;
}

HttpReply http_get(const std::string& port, const std::string& path,
                   const std::filesystem::path& to_file) {
    std::vector<std::string> argv = {"curl", "-sS", "-w", "\n%{http_code}"};
    if (!to_file.empty()) argv.insert(argv.end(), {"-o", to_file.string()});
    argv.push_back("http://127.0.0.1:" + port + path);
    const auto r = run(argv);
    const auto cut = r.out.rfind('\n');
    if (r.exit_code != 0 || cut == std::string::npos) return {0, r.err};
    return {std::stoi(r.out.substr(cut + 1)), r.out.substr(0, cut)};
}

LoopbackListener listen_loopback(int port) {
    LoopbackListener listener;
    listener.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    ::setsockopt(listener.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    REQUIRE(::bind(listener.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(listener.fd, 1) == 0);
    socklen_t len = sizeof addr;
    ::getsockname(listener.fd, reinterpret_cast<sockaddr*>(&addr), &len);
    listener.port = ntohs(addr.sin_port);
    return listener;
}

}  // namespace rackprof::testing
