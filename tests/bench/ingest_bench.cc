// Benchmark of the capture daemon (not a pass/fail test), on this machine:
//  1. a rack: N simulated boards on ptys at 150 kB/s each (1.5 Mbaud), for D seconds; the
//     daemon's CPU per board, losses (discards, records lost to backpressure), RSS growth;
//  2. one file source replayed flat out (file://...?pace=fast) into SQLite with aggregates.
//
//   ingest_bench RACKPROF_BINARY [--boards N] [--seconds D] [--file-mb M] [--dir DIR]
#include <signal.h>
#include <unistd.h>

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

    storage::SessionStore store(dir / "rack.db", storage::Database::Mode::kReadOnly);
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

void file_source(const std::string& binary, const std::filesystem::path& dir, int mb) {
    const auto capture = dir / "fast.bin";
    testing::run({binary, "simulate", "--model", "blinky", "--bytes", std::to_string(mb) + "M",
                  "-o", capture.string()});
    {
        std::ofstream config(dir / "file.toml");
        config << "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\npath = \""
               << (dir / "file.db").string() << "\"\n[logging]\nlevel = \"info\"\n"
               << "[[boards]]\nname = \"replay\"\nlink = \"file://" << capture.string()
               << "?pace=fast\"\n";
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
