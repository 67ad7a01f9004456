// Benchmark of the SWO decoders (not a pass/fail test): SwoDecoder throughput on one core over
// a realistic SWO capture (DWT PC samples with local timestamps, orbstat call events, console
// text, exception trace, the odd overflow), raw ITM and inside TPIU frames, read from a file in
// 1 MiB chunks; against md5sum on the same file as a same-machine baseline. With --rackprof,
// also `rackprof convert` of the raw ITM file with and without a console port (its lines go to
// stderr, here /dev/null). Figures only, and TABLE| rows for run.sh's summary
// (tests/bench/table.h).
//
//   tests/bench/run.sh swo       (builds Release, runs this with a 200 MB capture)
//   swo_bench [--mb N] [--dir DIR] [--rackprof PATH]
#include <sys/resource.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "protocol/swo_decoder.h"
#include "protocol/swo_encoder.h"
#include "tests/bench/table.h"
#include "tests/bench/timing.h"

using namespace rackprof::protocol;
using namespace rackprof::bench;

namespace {

// What a Cortex-M with PC sampling, -finstrument-functions over orbstat and printf on port 0
// sends, in a mix of roughly: 70% PC-sample packets, 10% call events, 5% exceptions.
void generate_itm(std::mt19937_64& rng, std::vector<std::uint8_t>& out, std::size_t bytes) {
    ItmEncoder enc(out);
    enc.sync();
    const auto pc = [&] { return static_cast<std::uint32_t>(0x08000400 + 2 * (rng() % 0x8000)); };
    while (out.size() < bytes) {
        const auto r = rng() % 100;
        if (r < 70) {
            enc.pc_sample(pc());
            enc.local_timestamp(static_cast<std::uint32_t>(1 + rng() % 4000));
        } else if (r < 72) {
            enc.pc_sleep();
        } else if (r < 82) {
            const bool enter = rng() % 2 != 0;
            enc.software(30, (enter ? 0x40000000U : 0x50000000U) | (rng() & 0xFFFFFF), 4);
            enc.software(30, pc() | 1, 4);
            enc.software(30, pc(), 4);
        } else if (r < 87) {
            enc.exception(15, kExceptionEnter);
            enc.local_timestamp(static_cast<std::uint32_t>(1 + rng() % 200));
            enc.exception(15, kExceptionExit);
            enc.exception(0, kExceptionReturn);
        } else if (r < 99) {
            for (const char c : std::string("tick 42\n"))
                enc.software(0, static_cast<std::uint8_t>(c), 1);
        } else {
            enc.overflow();
            if (rng() % 10 == 0) enc.sync();
        }
    }
}

std::filesystem::path make_capture(const std::filesystem::path& dir, bool tpiu,
                                   std::uint64_t bytes) {
    const auto path = dir / (tpiu ? "swo-bench.tpiu" : "swo-bench.itm");
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) {
        std::perror(path.c_str());
        std::exit(1);
    }
    std::mt19937_64 rng(1);
    std::vector<std::uint8_t> itm;
    std::vector<std::uint8_t> framed;
    TpiuFramer framer(framed);
    if (tpiu) framer.full_sync();
    std::uint64_t written = 0;
    while (written < bytes) {
        itm.clear();
        generate_itm(rng, itm, 1 << 20);
        const std::vector<std::uint8_t>* chunk = &itm;
        if (tpiu) {
            framer.write(1, itm);
            framer.full_sync();
            chunk = &framed;
        }
        std::fwrite(chunk->data(), 1, chunk->size(), f);
        written += chunk->size();
        framed.clear();
    }
    std::fclose(f);
    return path;
}

struct CountingSink : RecordSink {
    std::uint64_t records = 0;
    std::uint64_t events = 0;
    void on_records(std::span<const Record> batch) override { records += batch.size(); }
    void on_event(const StreamEvent&) override { ++events; }
};

DecoderStats decode_file(const std::filesystem::path& path, const SwoOptions& options) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) {
        std::perror(path.c_str());
        std::exit(1);
    }
    SwoDecoder decoder(options);
    CountingSink sink;
    std::vector<std::uint8_t> buf(1 << 20);
    std::size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) decoder.feed({buf.data(), n}, sink);
    decoder.finish(sink);
    std::fclose(f);
    return decoder.stats();
}

// `rackprof convert` of the same file with and without the console port: what printing the
// console lines costs on top of decoding, profiling and writing gmon.out.
void bench_convert(const std::filesystem::path& rackprof, const std::filesystem::path& capture,
                   double mb) {
    const auto gmon_out = capture.parent_path() / "swo-bench.gmon";
    const std::string base = rackprof.string() + " convert " + capture.string() +
                             " --protocol itm --orbstat-port 30 --report none -o " +
                             gmon_out.string();
    const auto plain = command_time(base + " 2> /dev/null");
    const auto console = command_time(base + " --console-port 0 2> /dev/null");
    std::filesystem::remove(gmon_out);
    if (!plain || !console) {
        std::printf("convert ITM: rackprof convert failed\n");
        return;
    }
    std::printf(
        "convert ITM: %.1f MB without a console port %.3f s = %.1f MB/s (%.1f MB/s per CPU s); "
        "with --console-port 0 %.3f s = %.1f MB/s (%.1f MB/s per CPU s); console costs %.2fx "
        "wall, %.2fx CPU\n",
        mb, plain->wall, mb / plain->wall, mb / plain->cpu, console->wall, mb / console->wall,
        mb / console->cpu, console->wall / plain->wall, console->cpu / plain->cpu);
}

void bench(const std::filesystem::path& dir, bool tpiu, std::uint64_t bytes,
           const std::optional<std::filesystem::path>& rackprof) {
    const auto path = make_capture(dir, tpiu, bytes);
    const double mb = static_cast<double>(std::filesystem::file_size(path)) / 1e6;
    SwoOptions options;
    options.tpiu = tpiu;
    options.console_port = 0;
    options.orbstat_port = 30;
    Timing best;
    DecoderStats stats;
    for (int i = 0; i < 3; ++i) {
        const auto start = Clock::now();
        const double cpu_start = cpu_seconds(RUSAGE_SELF);
        stats = decode_file(path, options);
        best.keep_best({seconds_since(start), cpu_seconds(RUSAGE_SELF) - cpu_start});
    }
    const Timing md5 = md5sum_time(path);
    std::printf(
        "decode %s: %.1f MB, %.1f M records, %llu bytes discarded: %.3f s = %.1f MB/s (%.1f "
        "MB/s per CPU s); md5sum %.3f s = %.1f MB/s (%.1f MB/s per CPU s); ratio to md5sum "
        "%.2f wall, %.2f CPU\n",
        tpiu ? "ITM+TPIU" : "ITM     ", mb, static_cast<double>(stats.records()) / 1e6,
        static_cast<unsigned long long>(stats.bytes_discarded), best.wall, mb / best.wall,
        mb / best.cpu, md5.wall, mb / md5.wall, mb / md5.cpu, md5.wall / best.wall,
        md5.cpu / best.cpu);
    // CPU time, not wall: on a shared machine it is what one core does.
    rackprof::bench::table_row(
        "SWO decode", rackprof::bench::cell("%s capture, %.0f MB", tpiu ? "ITM+TPIU" : "ITM", mb),
        rackprof::bench::cell("%.1f MB/s per CPU s", mb / best.cpu),
        rackprof::bench::cell("md5sum %.1f MB/s per CPU s", mb / md5.cpu), md5.cpu / best.cpu);
    if (rackprof && !tpiu) bench_convert(*rackprof, path, mb);
    std::filesystem::remove(path);
}

}  // namespace

int main(int argc, char** argv) {
    std::uint64_t mb = 200;
    // A folder of this run's own: benchmarks run side by side on a shared machine must not
    // replace each other's captures (fixed names in /tmp did).
    std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("swo_bench." + std::to_string(::getpid()));
    const std::filesystem::path own_dir = dir;
    std::optional<std::filesystem::path> rackprof;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string arg = argv[i];
        if (arg == "--mb") mb = std::strtoull(argv[i + 1], nullptr, 10);
        if (arg == "--dir") dir = argv[i + 1];
        if (arg == "--rackprof") rackprof = argv[i + 1];
    }
    std::filesystem::create_directories(dir);
    std::printf(
        "rackprof SWO benchmark: %llu MB captures (PC samples + timestamps, orbstat, console, "
        "exceptions), best of 3, one core\n",
        static_cast<unsigned long long>(mb));
    bench(dir, false, mb << 20, rackprof);
    bench(dir, true, mb << 20, rackprof);
    std::error_code ec;
    std::filesystem::remove_all(own_dir, ec);
    return 0;
}
