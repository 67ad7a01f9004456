// Benchmark of sampling through a GDB server (not a pass/fail test): QEMU's gdbstub running
// target-fw's uninstrumented conflation example (-icount shift=7,align=on: paced like a real
// 8 MHz board), sampled for a few seconds by rackprof's GDB client the way a gdb:// board does
// (halt, read, resume; pc alone, then pc with the stack unwound), and by the baseline users
// reach for today, the "poor man's profiler": `gdb-multiarch -batch` run in a loop, each run
// attaching, printing $pc and detaching. Figures: samples a second, and the time the target was
// held stopped per sample and as a share of the run. Ratios are against the baseline measured
// in the same run on the same firmware. TABLE| rows for run.sh's summary (tests/bench/table.h).
//
//   tests/bench/run.sh probe      (builds Release, runs this)
//   probe_bench --fw TARGET_FW_DIR [--seconds N] [--rate HZ]
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "probe/gdb_client.h"
#include "probe/stack_unwinder.h"
#include "tests/bench/table.h"
#include "tests/support/process.h"

using namespace rackprof;
using namespace rackprof::bench;
using Clock = std::chrono::steady_clock;

namespace {

std::uint16_t free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), len);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    ::close(fd);
    return ntohs(a.sin_port);
}

// The firmware in QEMU, halted at reset with its gdbstub on `port`.
struct Qemu {
    Qemu(const std::filesystem::path& elf, std::uint16_t port, const std::filesystem::path& log)
        : process({"qemu-system-arm", "-M", "mps2-an385", "-display", "none", "-monitor", "none",
                   "-serial", "null", "-icount", "shift=7,align=on", "-S", "-gdb",
                   "tcp:127.0.0.1:" + std::to_string(port), "-kernel", elf.string()},
                  log) {}
    testing::Process process;
};

std::unique_ptr<probe::GdbClient> connect(std::uint16_t port) {
    for (int i = 0; i < 100; ++i) {
        try {
            return probe::GdbClient::connect("127.0.0.1", port);
        } catch (const probe::ProbeError&) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    }
    throw std::runtime_error("QEMU's gdbstub did not come up");
}

struct Run {
    std::uint64_t samples = 0;
    double seconds = 0;
    double halted_seconds = 0;  // from each stop to the next resume (rackprof); attached (gdb)
    double rate() const { return samples / seconds; }
    double halted_ms_per_sample() const { return 1e3 * halted_seconds / samples; }
    double halted_share() const { return halted_seconds / seconds; }
};

// What a gdb:// board does at its highest rate: resume, halt, read, as fast as the server goes.
Run rackprof_run(const std::filesystem::path& elf, double seconds, double rate, bool stacks,
                 const std::filesystem::path& dir) {
    const std::uint16_t port = free_port();
    Qemu qemu(elf, port, dir / "qemu-rackprof.log");
    auto gdb = connect(port);
    std::optional<probe::StackUnwinder> unwinder;
    if (stacks) unwinder.emplace(elf);
    std::vector<unsigned> core;
    for (unsigned r = 0; r < 16; ++r) core.push_back(r);
    const unsigned pc = gdb->pc_register().value_or(15);
    gdb->halt();
    Run run;
    const auto start = Clock::now();
    auto stopped = Clock::now();
    // As the link paces itself: the next halt a period after the last, never sooner than the
    // resume (QEMU drops an interrupt that comes before it has processed the resume).
    const auto period =
        std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(1.0 / rate));
    auto next = start;
    while (Clock::now() - start < std::chrono::duration<double>(seconds)) {
        gdb->resume();
        run.halted_seconds += std::chrono::duration<double>(Clock::now() - stopped).count();
        next = std::max(next + period, Clock::now());
        std::this_thread::sleep_until(next);
        gdb->halt();
        stopped = Clock::now();
        if (unwinder) {
            const auto regs = gdb->read_registers(core);
            probe::TargetStack stack;
            std::copy(regs.begin(), regs.end(), stack.registers.begin());
            stack.stack_address = stack.registers[13];
            try {
                stack.memory = gdb->read_memory(stack.stack_address, 256);
            } catch (const probe::ProbeError&) {
                stack.memory = gdb->read_memory(stack.stack_address, 32);
            }
            (void)unwinder->unwind(stack);
        } else {
            (void)gdb->read_register(pc);
        }
        ++run.samples;
    }
    run.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return run;
}

// The poor man's profiler: one gdb-multiarch run per sample, attaching, printing $pc and
// detaching (QEMU's gdbstub holds the core stopped while a debugger is attached).
Run gdb_loop_run(const std::filesystem::path& elf, double seconds,
                 const std::filesystem::path& dir) {
    const std::uint16_t port = free_port();
    Qemu qemu(elf, port, dir / "qemu-gdb.log");
    connect(port).reset();  // up, and let run (detaching a fresh client resumes it)
    Run run;
    const auto start = Clock::now();
    const std::vector<std::string> argv = {"gdb-multiarch",
                                           "-batch",
                                           "-nx",
                                           "-ex",
                                           "set confirm off",
                                           "-ex",
                                           "target remote 127.0.0.1:" + std::to_string(port),
                                           "-ex",
                                           "p/x $pc",
                                           "-ex",
                                           "detach",
                                           elf.string()};
    while (Clock::now() - start < std::chrono::duration<double>(seconds)) {
        const auto t = Clock::now();
        const auto r = testing::run(argv);
        if (r.exit_code != 0 || r.out.find("$1 = 0x") == std::string::npos) {
            std::fprintf(stderr, "gdb-multiarch failed: %s\n", r.err.c_str());
            break;
        }
        run.halted_seconds += std::chrono::duration<double>(Clock::now() - t).count();
        ++run.samples;
    }
    run.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return run;
}

void report(const char* what, const Run& r) {
    std::printf(
        "%-34s %6llu samples in %.1f s: %8.1f samples/s, held halted %.3f ms a sample "
        "(%.1f %% of the run)\n",
        what, static_cast<unsigned long long>(r.samples), r.seconds, r.rate(),
        r.halted_ms_per_sample(), 100 * r.halted_share());
}

}  // namespace

int main(int argc, char** argv) {
    std::filesystem::path fw;
    double seconds = 5;
    double rate = 1000;  // what the board asks (gdb://...?rate=1000)
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string key = argv[i];
        if (key == "--fw") fw = argv[i + 1];
        if (key == "--seconds") seconds = std::atof(argv[i + 1]);
        if (key == "--rate") rate = std::atof(argv[i + 1]);
    }
    const auto elf = fw / "conflation-mps2-an385-plain.elf";
    if (!std::filesystem::exists(elf)) {
        std::printf("SKIP: %s is not built (--fw TARGET_FW_DIR)\n", elf.c_str());
        return 0;
    }
    testing::TempDir dir;
    if (testing::run({"sh", "-c", "command -v gdb-multiarch"}).exit_code != 0) {
        std::printf("SKIP: gdb-multiarch, the baseline, is not installed (./setup.sh)\n");
        return 0;
    }
    const Run loop = gdb_loop_run(elf, seconds, dir.path());
    report("gdb-multiarch -batch loop, pc", loop);
    const std::string base = cell("gdb-multiarch -batch loop %.1f samples/s", loop.rate());
    const std::string base_halt =
        cell("gdb-multiarch -batch loop %.2f ms", loop.halted_ms_per_sample());
    // The rate asked, as a board's ?rate=: 200 (QEMU keeps up) and the given one.
    for (const double asked : {200.0, rate}) {
        const std::string input =
            cell("QEMU mps2-an385 gdbstub, conflation (no -pg), icount align; rate=%.0f", asked);
        for (const bool stacks : {false, true}) {
            const Run r = rackprof_run(elf, seconds, asked, stacks, dir.path());
            const char* what = stacks ? "stacks" : "pc";
            report(cell("rackprof GDB client, %s, rate=%.0f", what, asked).c_str(), r);
            table_row("probe sampling rate", input, cell("%s: %.1f samples/s", what, r.rate()),
                      base, r.rate() / loop.rate());
            table_row("probe intrusion (target halted per sample)", input,
                      cell("%s: %.3f ms", what, r.halted_ms_per_sample()), base_halt,
                      r.halted_ms_per_sample() / loop.halted_ms_per_sample());
        }
    }
    return 0;
}
