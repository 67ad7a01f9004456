// Benchmark of the capture daemon (not a pass/fail test), on this machine:
//  1. a rack: N simulated boards on ptys at 150 kB/s each (1.5 Mbaud), for D seconds; the
//     daemon's CPU per board, losses (discards, records lost to backpressure), RSS growth;
//  2. one file source replayed flat out (file://...?pace=fast) into SQLite with aggregates.
//
//   ingest_bench RACKPROF_BINARY [--boards N] [--seconds D] [--file-mb M] [--dir DIR]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "storage/session_store.h"
#include "tests/support/process.h"

using namespace rackprof;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

struct ProcStat {
    double cpu_seconds = 0;
    long rss_kb = 0;
};

ProcStat proc_stat(pid_t pid) {
    ProcStat s;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    std::istringstream rest(line.substr(line.rfind(')') + 2));
    std::string field;
    unsigned long long utime = 0, stime = 0;
    for (int i = 3; i <= 15 && rest >> field; ++i) {
        if (i == 14) utime = std::stoull(field);
        if (i == 15) stime = std::stoull(field);
    }
    s.cpu_seconds = static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    while (std::getline(status, line)) {
        if (line.rfind("VmRSS:", 0) == 0) s.rss_kb = std::stol(line.substr(6));
    }
    return s;
}

void rack(const std::string& binary, const std::filesystem::path& dir, int boards, int seconds) {
    const std::uint64_t rate = 150000;
    {
        std::ofstream config(dir / "rack.toml");
        config << "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\npath = \""
               << (dir / "rack.db").string() << "\"\n[logging]\nlevel = \"warn\"\n";
        for (int i = 0; i < boards; ++i) {
            config << "[[boards]]\nname = \"b" << i << "\"\nlink = \"serial://"
                   << (dir / ("b" + std::to_string(i))).string() << "?baud=1500000\"\n";
        }
    }
    std::vector<std::unique_ptr<testing::Process>> sims;
    for (int i = 0; i < boards; ++i) {
        const std::string name = "b" + std::to_string(i);
        sims.push_back(std::make_unique<testing::Process>(
            std::vector<std::string>{
                binary, "simulate", "--model", i % 2 ? "blinky" : "deterministic", "--seed",
                std::to_string(i + 1), "--bytes", std::to_string(rate * seconds), "--rate",
                std::to_string(rate), "--pty", (dir / name).string()},
            dir / (name + ".log")));
    }
    for (int i = 0; i < boards; ++i)
        testing::eventually(
            [&] { return std::filesystem::exists(dir / ("b" + std::to_string(i))); }, 20s);
    testing::Process daemon({binary, "serve", "--config", (dir / "rack.toml").string()},
                            dir / "serve.log");
    std::this_thread::sleep_for(2s);  // warm up: every board connected
    const ProcStat start = proc_stat(daemon.pid());
    const auto t0 = Clock::now();
    ProcStat peak = start;
    for (auto& sim : sims) {
        while (sim->running()) {
            std::this_thread::sleep_for(200ms);
            const auto now = proc_stat(daemon.pid());
            peak.rss_kb = std::max(peak.rss_kb, now.rss_kb);
        }
    }
    const ProcStat end = proc_stat(daemon.pid());
    const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    daemon.signal(SIGTERM);
    daemon.wait(10s);

    // Read-write: a database an older rackprof wrote is migrated first (the benchmark compares).
    storage::SessionStore store(dir / "rack.db", storage::Database::Mode::kReadWrite);
    std::uint64_t bytes = 0, discarded = 0, lost = 0;
    for (const auto& s : store.sessions()) {
        bytes += s.counters.bytes_in;
        discarded += s.counters.bytes_discarded;
        lost += s.counters.records_lost;
    }
    const double cpu = end.cpu_seconds - start.cpu_seconds;
    std::printf(
        "rack: %d boards x %llu B/s for %.1f s: daemon CPU %.2f s = %.1f%% of one core (%.2f%% per "
        "board); "
        "stored %.1f MB, %llu bytes discarded, %llu records lost; RSS %ld -> %ld kB (peak %ld kB, "
        "%+.1f%%)\n",
        boards, static_cast<unsigned long long>(rate), wall, cpu, 100 * cpu / wall,
        100 * cpu / wall / boards, static_cast<double>(bytes) / 1e6,
        static_cast<unsigned long long>(discarded), static_cast<unsigned long long>(lost),
        start.rss_kb, end.rss_kb, peak.rss_kb,
        100.0 * static_cast<double>(end.rss_kb - start.rss_kb) / static_cast<double>(start.rss_kb));
}

// One GET over a fresh loopback connection, read to the end (Connection: close); seconds taken,
// or a negative number when the answer is not 200.
double http_get_seconds(int port, const std::string& path) {
    const auto t0 = Clock::now();
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
        ::close(fd);
        return -1;
    }
    const std::string request =
        "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (::write(fd, request.data(), request.size()) < 0) {
        ::close(fd);
        return -1;
    }
    std::string head;
    char buffer[65536];
    ssize_t n = 0;
    while ((n = ::read(fd, buffer, sizeof buffer)) > 0) {
        if (head.size() < 16)
            head.append(buffer, static_cast<std::size_t>(std::min<ssize_t>(n, 16)));
    }
    ::close(fd);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    return head.rfind("HTTP/1.1 200", 0) == 0 ? s : -1;
}

// The median of `n` requests' latency, in milliseconds (negative: a request failed).
double median_ms(int port, const std::string& path, int n) {
    std::vector<double> times;
    for (int i = 0; i < n; ++i) {
        const double s = http_get_seconds(port, path);
        if (s < 0) return -1;
        times.push_back(s * 1e3);
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

int listening_port(const std::filesystem::path& log) {
    const std::string text = testing::read_text(log);
    const std::string marker = "HTTP API listening on 127.0.0.1:";
    const auto at = text.find(marker);
    return at == std::string::npos ? 0 : std::atoi(text.c_str() + at + marker.size());
}

void file_source(const std::string& binary, const std::filesystem::path& dir, int mb) {
    const auto capture = dir / "fast.bin";
    testing::run({binary, "simulate", "--model", "blinky", "--bytes", std::to_string(mb) + "M",
                  "-o", capture.string(), "--write-elf", (dir / "fast.elf").string()});
    {
        std::ofstream config(dir / "file.toml");
        config << "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\npath = \""
               << (dir / "file.db").string() << "\"\n[logging]\nlevel = \"info\"\n"
               << "[[boards]]\nname = \"replay\"\nlink = \"file://" << capture.string()
               << "?pace=fast\"\nelf = \"" << (dir / "fast.elf").string() << "\"\n";
    }
    const auto t0 = Clock::now();
    testing::Process daemon({binary, "serve", "--config", (dir / "file.toml").string()},
                            dir / "file.log");
    testing::eventually(
        [&] {
            return testing::read_text(dir / "file.log").find("link finished") != std::string::npos;
        },
        600s);
    const double read_s = std::chrono::duration<double>(Clock::now() - t0).count();
    const ProcStat stat = proc_stat(daemon.pid());
    daemon.signal(SIGTERM);
    daemon.wait(600s);
    const double total_s = std::chrono::duration<double>(Clock::now() - t0).count();
    const double size_mb = static_cast<double>(std::filesystem::file_size(capture)) / 1e6;
    const double db_mb = static_cast<double>(std::filesystem::file_size(dir / "file.db")) / 1e6;
    std::printf(
        "file source flat out: %.1f MB decoded in %.2f s; committed to SQLite (raw chunks, record "
        "batches, "
        "aggregates; %.0f MB database) after %.2f s = %.1f MB/s end to end; daemon CPU %.2f s\n",
        size_mb, read_s, db_mb, total_s, size_mb / total_s, stat.cpu_seconds);

    // Profile latency of the stored session over HTTP: the daemon again on the same database,
    // with no boards (nothing else running).
    {
        std::ofstream config(dir / "idle.toml");
        config << "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\npath = \""
               << (dir / "file.db").string() << "\"\n[logging]\nlevel = \"info\"\n";
    }
    testing::Process idle({binary, "serve", "--config", (dir / "idle.toml").string()},
                          dir / "idle.log");
    testing::eventually([&] { return listening_port(dir / "idle.log") != 0; }, 30s);
    if (const int port = listening_port(dir / "idle.log")) {
        std::printf(
            "profile latency (median of 20, loopback, %.0f MB session): GET profile %.1f ms, "
            "GET profile?top=10 %.1f ms, GET gmon.out %.1f ms\n",
            size_mb, median_ms(port, "/api/v1/sessions/1/profile", 20),
            median_ms(port, "/api/v1/sessions/1/profile?top=10", 20),
            median_ms(port, "/api/v1/sessions/1/gmon.out", 20));
    }
    idle.signal(SIGTERM);
    idle.wait(30s);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr,
                     "usage: ingest_bench RACKPROF_BINARY [--boards N] [--seconds D] [--file-mb M] "
                     "[--dir DIR]\n");
        return 2;
    }
    const std::string binary = argv[1];
    int boards = 64, seconds = 30, file_mb = 200;
    std::filesystem::path dir;
    for (int i = 2; i + 1 < argc; i += 2) {
        const std::string arg = argv[i];
        if (arg == "--boards") boards = std::atoi(argv[i + 1]);
        if (arg == "--seconds") seconds = std::atoi(argv[i + 1]);
        if (arg == "--file-mb") file_mb = std::atoi(argv[i + 1]);
        if (arg == "--dir") dir = argv[i + 1];
    }
    testing::TempDir temp;
    if (dir.empty()) dir = temp.path();
    std::filesystem::create_directories(dir);
    if (boards > 0) rack(binary, dir, boards, seconds);
    if (file_mb > 0) file_source(binary, dir, file_mb);
    return 0;
}
