// Benchmark of the capture daemon (not a pass/fail test), on this machine:
//  1. a rack: N simulated boards on ptys at 150 kB/s each (1.5 Mbaud), all fed by one
//     `rackprof simulate --boards N` process, for D seconds; the daemon's CPU per board, the
//     feeder's CPU, bytes taken in vs sent, losses (discards, records lost to backpressure),
//     RSS. With --baseline OLD_RACKPROF the same rack is read first by OLD_RACKPROF's daemon;
//     Then the same boards idle (ptys this program holds open and never writes) for
//     --idle-seconds (10): the daemon's CPU when nothing comes, for each binary;
//  2. one file source replayed flat out (file://...?pace=fast) into SQLite with aggregates,
//     against an offline `rackprof convert` of the same file; three rounds in turns, medians.
// TABLE| rows feed run.sh's summary (tests/bench/table.h).
//
//   ingest_bench RACKPROF_BINARY [--boards N] [--seconds D] [--idle-seconds I] [--file-mb M]
//                [--dir DIR] [--baseline OLD_RACKPROF]
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>

#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "storage/session_store.h"
#include "tests/bench/loopback_http.h"
#include "tests/bench/table.h"
#include "tests/support/process.h"

using namespace rackprof;
using namespace rackprof::bench;
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

// Not "b" + std::to_string(i): GCC 12 at -O3 warns about it (a false -Wrestrict).
std::string board_name(int i) {
    std::string name = "b";
    name += std::to_string(i);
    return name;
}

// The rack's boards, as the daemon's configuration names them.
std::filesystem::path write_rack_config(const std::filesystem::path& dir, const std::string& tag,
                                        int boards) {
    const auto path = dir / (tag + ".toml");
    // A new database each run: read_counters adds up every session in it, and a --dir used
    // before would count its sessions again.
    const auto db = dir / (tag + ".db");
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(db.string() + suffix);
    std::ofstream config(path);
    config << "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\npath = \"" << db.string()
           << "\"\n[logging]\nlevel = \"warn\"\n";
    for (int i = 0; i < boards; ++i) {
        config << "[[boards]]\nname = \"b" << i << "\"\nlink = \"serial://"
               << (dir / (tag + "-ptys") / board_name(i)).string() << "?baud=1500000\"\n";
    }
    return path;
}

// The feeder's last line: "rack summary boards=N ... bytes_sent=B seconds=S cpu_seconds=C
// max_backlog=M".
struct FeederSummary {
    double bytes_sent = 0;
    double seconds = 0;
    double cpu_seconds = 0;
    double max_backlog = 0;
};

double summary_field(const std::string& log, const std::string& key) {
    const auto line = log.rfind("rack summary");
    const auto at = line == std::string::npos ? line : log.find(" " + key + "=", line);
    return at == std::string::npos ? -1 : std::atof(log.c_str() + at + key.size() + 2);
}

FeederSummary feeder_summary(const std::filesystem::path& log_path) {
    const std::string log = testing::read_text(log_path);
    return {summary_field(log, "bytes_sent"), summary_field(log, "seconds"),
            summary_field(log, "cpu_seconds"), summary_field(log, "max_backlog")};
}

struct RackRun {
    FeederSummary feeder;
    double wall = 0;        // the measured window: warm-up done to the feeder's end
    double daemon_cpu = 0;  // CPU seconds of the daemon in that window
    ProcStat start, end, peak;
    std::uint64_t sessions = 0, bytes_in = 0, discarded = 0, records_lost = 0, bytes_lost = 0;
};

// The stored sessions' counters. Read-write: a database an older rackprof (--baseline) wrote
// is migrated first.
void read_counters(const std::filesystem::path& db, RackRun& run) {
    storage::SessionStore store(db, storage::Database::Mode::kReadWrite);
    for (const auto& s : store.sessions()) {
        ++run.sessions;
        run.bytes_in += s.counters.bytes_in;
        run.discarded += s.counters.bytes_discarded;
        run.records_lost += s.counters.records_lost;
        run.bytes_lost += s.counters.bytes_lost;
    }
}

// One rack: `feeder_binary simulate --boards` feeds every pty from one process (so the
// boards cost little CPU of their own), `daemon_binary serve` reads them all.
RackRun run_rack(const std::string& daemon_binary, const std::string& feeder_binary,
                 const std::filesystem::path& dir, const std::string& tag, int boards,
                 std::uint64_t rate, int seconds) {
    const auto config = write_rack_config(dir, tag, boards);
    const auto ptys = dir / (tag + "-ptys");
    // Board i: deterministic or blinky in turn, seed i + 1 (as one process per board had it).
    testing::Process feeder(
        {feeder_binary, "simulate", "--boards", std::to_string(boards), "--pty-dir", ptys.string(),
         "--model", "deterministic,blinky", "--seed", "1", "--bytes",
         std::to_string(rate * seconds), "--rate", std::to_string(rate)},
        dir / (tag + "-feeder.log"));
    testing::eventually([&] { return std::filesystem::exists(ptys / board_name(boards - 1)); },
                        60s);
    testing::Process daemon({daemon_binary, "serve", "--config", config.string()},
                            dir / (tag + "-serve.log"));
    std::this_thread::sleep_for(2s);  // warm up: every board connected
    RackRun run;
    run.start = run.peak = proc_stat(daemon.pid());
    const auto t0 = Clock::now();
    while (feeder.running()) {
        std::this_thread::sleep_for(200ms);
        run.peak.rss_kb = std::max(run.peak.rss_kb, proc_stat(daemon.pid()).rss_kb);
    }
    run.end = proc_stat(daemon.pid());
    run.wall = std::chrono::duration<double>(Clock::now() - t0).count();
    run.daemon_cpu = run.end.cpu_seconds - run.start.cpu_seconds;
    daemon.signal(SIGTERM);
    daemon.wait(30s);
    run.feeder = feeder_summary(dir / (tag + "-feeder.log"));
    read_counters(dir / (tag + ".db"), run);
    return run;
}

double percent_of_core(double cpu, double wall) {
    return wall > 0 ? 100 * cpu / wall : 0;
}

void print_rack(const RackRun& r, const std::string& who, int boards, std::uint64_t rate) {
    const double target = static_cast<double>(boards) * static_cast<double>(rate);
    std::printf(
        "rack (%s): %d boards x %llu B/s, one feeder process: sent %.1f MB in %.1f s (%.1f%% of "
        "the boards' rate; largest backlog %.0f bytes); daemon CPU %.2f s in %.1f s = %.1f%% of "
        "one core (%.3f%% per board; %.1f ms per MB over its run); feeder CPU %.2f s = %.1f%% of "
        "one core; %llu sessions "
        "took %.1f MB (%.4f of sent), %llu bytes discarded, %llu records lost (%llu bytes); "
        "daemon RSS %ld -> %ld kB (peak %ld kB)\n",
        who.c_str(), boards, static_cast<unsigned long long>(rate), r.feeder.bytes_sent / 1e6,
        r.feeder.seconds, 100 * r.feeder.bytes_sent / r.feeder.seconds / target,
        r.feeder.max_backlog, r.daemon_cpu, r.wall, percent_of_core(r.daemon_cpu, r.wall),
        percent_of_core(r.daemon_cpu, r.wall) / boards,
        1e3 * r.end.cpu_seconds / (static_cast<double>(r.bytes_in) / 1e6), r.feeder.cpu_seconds,
        percent_of_core(r.feeder.cpu_seconds, r.feeder.seconds),
        static_cast<unsigned long long>(r.sessions), static_cast<double>(r.bytes_in) / 1e6,
        static_cast<double>(r.bytes_in) / r.feeder.bytes_sent,
        static_cast<unsigned long long>(r.discarded),
        static_cast<unsigned long long>(r.records_lost),
        static_cast<unsigned long long>(r.bytes_lost), r.start.rss_kb, r.end.rss_kb, r.peak.rss_kb);
}

// The rack's rows of the summary table; `baseline`: the same rack read by --baseline's daemon.
void rack_table(const RackRun& r, const RackRun* baseline, int boards, std::uint64_t rate,
                int seconds) {
    using bench::cell;
    const std::string input = cell("%d boards x %llu B/s (1.5 Mbaud), %d s", boards,
                                   static_cast<unsigned long long>(rate), seconds);
    const double cpu = percent_of_core(r.daemon_cpu, r.wall);
    // The pace a loaded machine allowed: the share of a core means little without it.
    const double pace = 100 * r.feeder.bytes_sent / r.feeder.seconds /
                        (static_cast<double>(boards) * static_cast<double>(rate));
    if (baseline) {
        const double base = percent_of_core(baseline->daemon_cpu, baseline->wall);
        bench::table_row("rack: daemon CPU", input, cell("%.1f%% of one core", cpu),
                         cell("--baseline daemon %.1f%%", base), base > 0 ? cpu / base : 0);
    } else {
        bench::table_row("rack: daemon CPU", input,
                         cell("%.1f%% of one core (%.3f%%/board) at %.0f%% of the boards' rate",
                              cpu, cpu / boards, pace));
    }
    // Whatever pace the machine allowed: the daemon's CPU for each MB, over its whole run,
    // and what that comes to at the boards' full rate.
    const double ms_per_mb = 1e3 * r.end.cpu_seconds / (static_cast<double>(r.bytes_in) / 1e6);
    bench::table_row("rack: daemon CPU per MB taken in", input,
                     cell("%.1f ms/MB = %.0f%% of one core at the boards' full rate", ms_per_mb,
                          ms_per_mb / 10 * boards * static_cast<double>(rate) / 1e6));
    bench::table_row("rack: bytes taken in / sent", input,
                     cell("%.1f MB", static_cast<double>(r.bytes_in) / 1e6),
                     cell("feeder sent %.1f MB", r.feeder.bytes_sent / 1e6),
                     static_cast<double>(r.bytes_in) / r.feeder.bytes_sent);
    bench::table_row(
        "rack: losses", input,
        cell("%llu B discarded, %llu records lost", static_cast<unsigned long long>(r.discarded),
             static_cast<unsigned long long>(r.records_lost)));
    bench::table_row(
        "rack: feeder (simulate --boards)", input,
        cell("%.1f%% of one core, %.1f%% of the boards' rate, backlog <= %.0f B",
             percent_of_core(r.feeder.cpu_seconds, r.feeder.seconds), pace, r.feeder.max_backlog));
    bench::table_row("rack: daemon RSS", input, cell("peak %ld kB", r.peak.rss_kb),
                     cell("after warm-up %ld kB", r.start.rss_kb),
                     r.start.rss_kb > 0
                         ? static_cast<double>(r.peak.rss_kb) / static_cast<double>(r.start.rss_kb)
                         : 0);
}

void rack(const std::string& binary, const std::string& baseline_binary,
          const std::filesystem::path& dir, int boards, int seconds) {
    const std::uint64_t rate = 150000;  // 1.5 Mbaud, the thesis' UART
    std::optional<RackRun> baseline;
    if (!baseline_binary.empty()) {
        baseline = run_rack(baseline_binary, binary, dir, "rack-baseline", boards, rate, seconds);
        print_rack(*baseline, "baseline " + baseline_binary, boards, rate);
    }
    const RackRun run = run_rack(binary, binary, dir, "rack", boards, rate, seconds);
    print_rack(run, binary, boards, rate);
    rack_table(run, baseline ? &*baseline : nullptr, boards, rate, seconds);
}

// The daemon's CPU with `boards` serial boards connected and silent: ptys opened here, raw,
// their slaves linked where the rack's configuration names them, never written.
double idle_rack_percent(const std::string& daemon_binary, const std::filesystem::path& dir,
                         const std::string& tag, int boards, int seconds) {
    const auto config = write_rack_config(dir, tag, boards);
    const auto ptys = dir / (tag + "-ptys");
    std::filesystem::create_directories(ptys);
    std::vector<int> masters;
    for (int i = 0; i < boards; ++i) {
        const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
        if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0)
            throw std::runtime_error("cannot open a pty");
        masters.push_back(master);
        // Raw on the slave's side, as a serial adapter: the daemon's termios2 sets the rest.
        termios t{};
        if (::tcgetattr(master, &t) == 0) {
            ::cfmakeraw(&t);
            ::tcsetattr(master, TCSANOW, &t);
        }
        std::filesystem::remove(ptys / board_name(i));
        std::filesystem::create_symlink(::ptsname(master), ptys / board_name(i));
    }
    double percent = 0;
    {
        testing::Process daemon({daemon_binary, "serve", "--config", config.string()},
                                dir / (tag + "-serve.log"));
        std::this_thread::sleep_for(3s);  // every board connected, every line found idle
        const ProcStat start = proc_stat(daemon.pid());
        const auto t0 = Clock::now();
        std::this_thread::sleep_for(std::chrono::seconds(seconds));
        const ProcStat end = proc_stat(daemon.pid());
        percent = percent_of_core(end.cpu_seconds - start.cpu_seconds,
                                  std::chrono::duration<double>(Clock::now() - t0).count());
        daemon.signal(SIGTERM);
        daemon.wait(30s);
    }
    for (const int m : masters) ::close(m);
    return percent;
}

void idle_rack(const std::string& binary, const std::string& baseline_binary,
               const std::filesystem::path& dir, int boards, int seconds) {
    const std::string input =
        bench::cell("%d serial boards connected and silent, %d s", boards, seconds);
    double base = 0;
    if (!baseline_binary.empty()) {
        base = idle_rack_percent(baseline_binary, dir, "idle-baseline", boards, seconds);
        std::printf("idle rack (baseline %s): %d boards, daemon %.2f%% of one core\n",
                    baseline_binary.c_str(), boards, base);
    }
    const double cpu = idle_rack_percent(binary, dir, "idle", boards, seconds);
    std::printf("idle rack (%s): %d boards, daemon %.2f%% of one core\n", binary.c_str(), boards,
                cpu);
    if (baseline_binary.empty()) {
        bench::table_row("rack idle: daemon CPU", input, bench::cell("%.2f%% of one core", cpu));
    } else {
        bench::table_row("rack idle: daemon CPU", input, bench::cell("%.2f%% of one core", cpu),
                         bench::cell("--baseline daemon %.2f%%", base), base > 0 ? cpu / base : 0);
    }
}

// The database's bytes on disk: the file and its WAL and shared-memory files.
double database_mb(const std::filesystem::path& db) {
    double bytes = 0;
    for (const char* suffix : {"", "-wal", "-shm"}) {
        std::error_code ec;
        const auto n = std::filesystem::file_size(db.string() + suffix, ec);
        if (!ec) bytes += static_cast<double>(n);
    }
    return bytes / 1e6;
}

struct FileRun {
    double seconds = 0;        // start to every byte committed (the daemon's clean exit)
    bool raw_as_file = false;  // the stored raw bytes are the capture file's, byte for byte
    std::string gmon;          // the stored session's gmon.out as the API serves it
    double database_mb = 0;    // what the session left on disk
    double cpu_seconds = 0;
    double profile_p50 = -1, profile_p99 = -1, gmon_p50 = -1, gmon_p99 = -1;
};

// One daemon replays the capture flat out into a new database; with `check`, the stored raw
// bytes are compared with the file and a daemon with no boards serves the stored session: 100
// profile and gmon.out requests each.
FileRun run_file_source(const std::string& binary, const std::filesystem::path& dir,
                        const std::string& name, const std::filesystem::path& capture, bool check) {
    const auto db = dir / (name + ".db");
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(db.string() + suffix);
    {
        std::ofstream config(dir / (name + ".toml"));
        config << "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\npath = \"" << db.string()
               << "\"\n[logging]\nlevel = \"info\"\n"
               << "[[boards]]\nname = \"replay\"\nlink = \"file://" << capture.string()
               << "?pace=fast\"\nelf = \"" << (dir / "fast.elf").string() << "\"\n";
    }
    FileRun run;
    const auto t0 = Clock::now();
    testing::Process daemon({binary, "serve", "--config", (dir / (name + ".toml")).string()},
                            dir / (name + ".log"));
    // Polled every millisecond, not every 20: a run takes ~0.6 s, and `convert` beside it is
    // timed to its exit exactly.
    testing::eventually(
        [&] {
            return testing::read_text(dir / (name + ".log")).find("link finished") !=
                   std::string::npos;
        },
        600s, 1ms);
    run.cpu_seconds = proc_stat(daemon.pid()).cpu_seconds;
    daemon.signal(SIGTERM);
    daemon.wait(600s, 1ms);
    run.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    run.database_mb = database_mb(db);
    if (!check) return run;
    {
        // The stored raw bytes, chunk after chunk, against the capture file.
        std::ifstream file(capture, std::ios::binary);
        std::vector<char> expected(65536);
        bool same = true;
        std::uint64_t stored = 0;
        storage::SessionStore store(db, storage::Database::Mode::kReadOnly);
        store.for_each_chunk(1, [&](std::int64_t, std::span<const std::uint8_t> bytes) {
            for (std::size_t at = 0; same && at < bytes.size(); at += expected.size()) {
                const std::size_t n = std::min(expected.size(), bytes.size() - at);
                same = static_cast<bool>(
                           file.read(expected.data(), static_cast<std::streamsize>(n))) &&
                       std::equal(bytes.begin() + static_cast<std::ptrdiff_t>(at),
                                  bytes.begin() + static_cast<std::ptrdiff_t>(at + n),
                                  reinterpret_cast<const std::uint8_t*>(expected.data()));
            }
            stored += bytes.size();
        });
        run.raw_as_file = same && stored == std::filesystem::file_size(capture);
    }

    {
        std::ofstream config(dir / (name + "-idle.toml"));
        config << "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\npath = \"" << db.string()
               << "\"\n[logging]\nlevel = \"info\"\n";
    }
    const auto log = dir / (name + "-idle.log");
    testing::Process idle({binary, "serve", "--config", (dir / (name + "-idle.toml")).string()},
                          log);
    testing::eventually([&] { return listening_port(log) != 0; }, 30s);
    if (const int port = listening_port(log)) {
        const auto profile = latencies_ms(port, "/api/v1/sessions/1/profile", 100);
        const auto gmon = latencies_ms(port, "/api/v1/sessions/1/gmon.out", 100);
        if (!profile.empty()) run.profile_p50 = profile[50], run.profile_p99 = profile[98];
        if (!gmon.empty()) run.gmon_p50 = gmon[50], run.gmon_p99 = gmon[98];
        run.gmon = http_get_body(port, "/api/v1/sessions/1/gmon.out").value_or("");
    }
    idle.signal(SIGTERM);
    idle.wait(30s);
    return run;
}

void print_file_run(const FileRun& r, const std::string& who, double size_mb) {
    std::printf(
        "file source flat out (%s): %.1f MB committed to SQLite in %.2f s = %.1f MB/s end to end "
        "(daemon CPU %.2f s); database %.1f MB = %.3fx the wire bytes; stored session served: "
        "profile p50 %.1f / p99 %.1f ms, gmon.out p50 %.1f / p99 %.1f ms (100 requests each)\n",
        who.c_str(), size_mb, r.seconds, size_mb / r.seconds, r.cpu_seconds, r.database_mb,
        r.database_mb / size_mb, r.profile_p50, r.profile_p99, r.gmon_p50, r.gmon_p99);
}

void file_source(const std::string& binary, const std::string& baseline_binary,
                 const std::filesystem::path& dir, int mb) {
    using bench::cell;
    const auto capture = dir / "fast.bin";
    testing::run({binary, "simulate", "--model", "blinky", "--bytes", std::to_string(mb) + "M",
                  "-o", capture.string(), "--write-elf", (dir / "fast.elf").string()});
    const double size_mb = static_cast<double>(std::filesystem::file_size(capture)) / 1e6;
    // The capture on disk before anything is timed: its writeback would slow whichever run
    // came first.
    ::sync();
    // Rounds in turns (baseline, this build, convert), each figure the median of its rounds:
    // this machine's speed drifts by a third from minute to minute, so one run each compares
    // moments more than binaries. The first round also checks and serves what was stored.
    constexpr int kRounds = 3;
    std::optional<FileRun> base;
    FileRun run;
    std::vector<double> base_s, run_s, convert_s_all;
    int convert_exit = 0;
    for (int round = 0; round < kRounds; ++round) {
        const bool first = round == 0;
        if (!baseline_binary.empty()) {
            auto b = run_file_source(baseline_binary, dir, "file-baseline", capture, first);
            print_file_run(b, "baseline " + baseline_binary, size_mb);
            base_s.push_back(b.seconds);
            if (first) base = b;
        }
        auto r = run_file_source(binary, dir, "file", capture, first);
        print_file_run(r, "this build", size_mb);
        run_s.push_back(r.seconds);
        if (first) run = r;
        // Offline convert of the same capture: decode and aggregate, no database.
        const auto t0 = Clock::now();
        const auto convert =
            testing::run({binary, "convert", capture.string(), "--elf", (dir / "fast.elf").string(),
                          "-o", (dir / "fast.gmon").string(), "--report", "none"});
        convert_s_all.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
        convert_exit |= convert.exit_code;
    }
    const auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    run.seconds = median(run_s);
    if (base) base->seconds = median(base_s);
    const double convert_s = median(convert_s_all);
    std::printf("medians of %d rounds: this build %.2f s, convert %.2f s", kRounds, run.seconds,
                convert_s);
    if (base) std::printf(", baseline %.2f s", base->seconds);
    std::printf("\n");
    const std::string input = cell("blinky capture (legacy), %.0f MB", size_mb);
    // What was stored is what came: the raw bytes re-read from SQLite are the file, and the
    // stored session's gmon.out is convert's, byte for byte.
    const std::string convert_gmon = testing::read_text(dir / "fast.gmon");
    const auto check = [&](const FileRun& r, const std::string& who) {
        std::printf(
            "check (%s): stored raw bytes %s the capture file; stored gmon.out (%zu bytes) "
            "%s convert's (%zu bytes)\n",
            who.c_str(), r.raw_as_file ? "EQUAL" : "DIFFER FROM", r.gmon.size(),
            !r.gmon.empty() && r.gmon == convert_gmon ? "EQUALS" : "DIFFERS FROM",
            convert_gmon.size());
    };
    if (base) check(*base, "baseline");
    check(run, "this build");
    bench::table_row("daemon ingest, file://?pace=fast to SQLite", input,
                     cell("%.1f MB/s", size_mb / run.seconds),
                     convert_exit == 0 ? cell("rackprof convert %.1f MB/s", size_mb / convert_s)
                                       : "rackprof convert failed",
                     convert_exit == 0 ? convert_s / run.seconds : 0.0);
    bench::table_row("database size / wire bytes", input,
                     cell("%.1f MB (%.3fx)", run.database_mb, run.database_mb / size_mb),
                     cell("wire %.1f MB", size_mb), run.database_mb / size_mb);
    // Derived from the ratio above, not measured on a rack: 64 boards x 150 kB/s for an hour.
    bench::table_row("database growth, 64-board rack (derived)", "64 x 150 kB/s for 1 h",
                     cell("%.1f GB/h", run.database_mb / size_mb * 64 * 150e3 * 3600 / 1e9),
                     cell("wire %.1f GB/h", 64 * 150e3 * 3600 / 1e9), run.database_mb / size_mb);
    const auto latency_row = [&](const char* what, double p99, double base_p99) {
        if (base)
            bench::table_row(what, input, cell("p99 %.1f ms", p99),
                             cell("--baseline p99 %.1f ms", base_p99),
                             base_p99 > 0 ? p99 / base_p99 : 0.0);
        else
            bench::table_row(what, input, cell("p99 %.1f ms", p99));
    };
    latency_row("stored session: GET profile", run.profile_p99, base ? base->profile_p99 : 0);
    latency_row("stored session: GET gmon.out", run.gmon_p99, base ? base->gmon_p99 : 0);
    if (base) {
        bench::table_row(
            "daemon ingest vs --baseline", input, cell("%.1f MB/s", size_mb / run.seconds),
            cell("--baseline %.1f MB/s", size_mb / base->seconds), base->seconds / run.seconds);
        bench::table_row("database size vs --baseline", input, cell("%.1f MB", run.database_mb),
                         cell("--baseline %.1f MB", base->database_mb),
                         run.database_mb / base->database_mb);
    }
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr,
                     "usage: ingest_bench RACKPROF_BINARY [--boards N] [--seconds D] "
                     "[--idle-seconds I] [--file-mb M] [--dir DIR] [--baseline OLD_RACKPROF]\n");
        return 2;
    }
    const std::string binary = argv[1];
    int boards = 256, seconds = 30, idle_seconds = 10, file_mb = 200;
    std::filesystem::path dir;
    std::string baseline;
    for (int i = 2; i + 1 < argc; i += 2) {
        const std::string arg = argv[i];
        if (arg == "--boards") boards = std::atoi(argv[i + 1]);
        if (arg == "--seconds") seconds = std::atoi(argv[i + 1]);
        if (arg == "--idle-seconds") idle_seconds = std::atoi(argv[i + 1]);
        if (arg == "--file-mb") file_mb = std::atoi(argv[i + 1]);
        if (arg == "--dir") dir = argv[i + 1];
        if (arg == "--baseline") baseline = argv[i + 1];
    }
    testing::TempDir temp;
    if (dir.empty()) dir = temp.path();
    std::filesystem::create_directories(dir);
    if (boards > 0) rack(binary, baseline, dir, boards, seconds);
    if (boards > 0 && idle_seconds > 0) idle_rack(binary, baseline, dir, boards, idle_seconds);
    if (file_mb > 0) file_source(binary, baseline, dir, file_mb);
    return 0;
}
