// Benchmark of the core (not a pass/fail test): decode + aggregate throughput on simulator
// captures (legacy binary and hex, framed with and without the arc cache) and on a bench-like
// mix (300 functions, ~800 arcs, ~9000 sampled PCs), against md5sum on
// the same file as a same-machine baseline; wire bytes per call of legacy vs framed; and
// gmon.out, profile and report (text, JSON) times for 10^5 distinct arcs. Prints figures only,
// and TABLE| rows for run.sh's summary (tests/bench/table.h): every ratio against a baseline
// of this run. Decode ratios are given in wall time and in CPU time: on a machine shared with
// other work, wall time says little about what one core can do.
//
//   tests/bench/run.sh            (builds Release, runs this with a 200 MB capture)
//   core_bench [--mb N] [--dir DIR] [--thesis blink1hex.txt] [--arcs N[,N...]]
//              [--only profile|mixed|WIRE]   (the profile and report lines, the bench-like mix,
//                                             or one wire's capture, e.g. "legacy hex", alone)
//   CORE_BENCH_SAVE=PREFIX writes the last reports to PREFIX.txt and PREFIX.json (to compare
//   two builds' output byte for byte)
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "daemon/ingest/capture_import.h"
#include "daemon/sim/board_simulator.h"
#include "daemon/sim/target_cache.h"
#include "gmon/gmon_writer.h"
#include "gmon/profile.h"
#include "gmon/report.h"
#include "gmon/synthetic_elf.h"
#include "protocol/framed_format.h"
#include "protocol/legacy_format.h"
#include "protocol/record_sink.h"
#include "tests/bench/synthetic_profile.h"
#include "tests/bench/table.h"
#include "tests/bench/timing.h"

using namespace rackprof;
using namespace rackprof::bench;

namespace {

constexpr const char* kThesis =
    "M. J. D'Argenio, A Low Footprint gprof-based Profiler for Microcontrollers, M.S. thesis, "
    "NC State University, 2020";
constexpr const char* kThesisWire =
    "boards send over a UART at 1.5 Mbaud (sections 4.3.5, 5.1), about 150 kB/s per board; no "
    "host-side throughput is published";

// One wire to benchmark: how the simulator writes it and how the decoder reads it.
struct Wire {
    const char* name;
    daemon::sim::WireProtocol protocol;
    protocol::LegacyEncoding encoding;
    std::size_t arc_cache;
    std::size_t pc_cache = 0;
};

daemon::sim::SimulatorOptions simulator_options(const Wire& wire) {
    daemon::sim::SimulatorOptions o;
    o.model = "blinky";
    o.protocol = wire.protocol;
    o.encoding = wire.encoding;
    o.arc_cache = wire.arc_cache;
    o.pc_cache = wire.pc_cache;
    return o;
}

protocol::WireSpec wire_spec(const Wire& wire) {
    protocol::WireSpec spec;
    spec.protocol = daemon::sim::wire_format_name(wire.protocol);
    spec.format = wire.encoding == protocol::LegacyEncoding::kHex ? "hex" : "bin";
    return spec;
}

std::filesystem::path make_capture(const std::filesystem::path& dir, const Wire& wire,
                                   std::uint64_t bytes) {
    const bool hex = wire.encoding == protocol::LegacyEncoding::kHex;
    const auto path = dir / "bench-capture";
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) {
        std::perror(path.c_str());
        std::exit(1);
    }
    daemon::sim::SimulatorOptions o = simulator_options(wire);
    o.max_iterations = 0;
    o.max_bytes = hex ? bytes / 2 : bytes;  // hex text is twice the wire bytes
    daemon::sim::simulate_board(
        o, [&](const std::uint8_t* data, std::size_t size) { std::fwrite(data, 1, size, f); });
    std::fclose(f);
    return path;
}

// A bench-like mix, as a real firmware's capture has it (legacy binary, 4-byte addresses):
// 300 functions over 48 KiB of code, ~800 distinct arcs and ~9000 distinct sampled PCs, each
// drawn with a Zipf-like weight (a few hot, a long tail), 7 arcs to 3 samples.
std::filesystem::path make_mixed_capture(const std::filesystem::path& dir, std::uint64_t bytes) {
    constexpr int kFunctions = 300, kArcs = 800, kPcs = 9000;
    std::mt19937_64 rng(42);
    std::vector<std::uint32_t> starts(kFunctions + 1);
    for (int f = 0; f <= kFunctions; ++f)
        starts[f] = 0x08000000u + static_cast<std::uint32_t>(f) * 164;
    std::vector<protocol::Record> arcs, pcs;
    std::vector<double> arc_weight, pc_weight;
    for (int i = 0; i < kArcs; ++i) {
        const auto caller = static_cast<int>(rng() % kFunctions);
        const auto callee = static_cast<int>(rng() % kFunctions);
        arcs.push_back(protocol::Record::arc(
            starts[caller] + 4 + 2 * static_cast<std::uint32_t>(rng() % 78), starts[callee]));
        arc_weight.push_back(1.0 / (i + 1));
    }
    for (int i = 0; i < kPcs; ++i) {
        pcs.push_back(protocol::Record::pc_sample(
            0x08000000u + 2 * static_cast<std::uint32_t>(rng() % (kFunctions * 82))));
        pc_weight.push_back(1.0 / (i + 1));
    }
    std::discrete_distribution<std::size_t> pick_arc(arc_weight.begin(), arc_weight.end());
    std::discrete_distribution<std::size_t> pick_pc(pc_weight.begin(), pc_weight.end());
    const auto path = dir / "bench-mixed";
    std::FILE* f = std::fopen(path.c_str(), "wb");
    std::vector<std::uint8_t> out;
    std::uint64_t written = 0;
    while (written < bytes) {
        out.clear();
        for (int i = 0; i < 4096; ++i) {
            const bool arc = rng() % 10 < 7;
            protocol::encode_legacy(arc ? arcs[pick_arc(rng)] : pcs[pick_pc(rng)], 4, out);
        }
        std::fwrite(out.data(), 1, out.size(), f);
        written += out.size();
    }
    std::fclose(f);
    return path;
}

// decode + aggregate of the file at `path` against md5sum of it: the best of kRounds each,
// the two taken in turns, so that a slow spell of a shared machine slows both alike.
void time_decode(const std::filesystem::path& path, const char* name,
                 const protocol::WireSpec& wire) {
    constexpr int kRounds = 5;
    const double size_mb = static_cast<double>(std::filesystem::file_size(path)) / 1e6;
    Timing best, md5;
    protocol::DecoderStats stats;
    std::string rounds;  // each round's ratio, CPU time
    for (int i = 0; i < kRounds; ++i) {
        gmon::Aggregate aggregate;
        const auto start = Clock::now();
        const double cpu_start = cpu_seconds(RUSAGE_SELF);
        daemon::ingest::AggregateImportSink sink(aggregate);
        daemon::ingest::ImportSpec spec;
        spec.kind = daemon::ingest::InputKind::kCapture;
        spec.wire = wire;
        stats = daemon::ingest::import_file(path, spec, sink).stats;
        const Timing once{seconds_since(start), cpu_seconds(RUSAGE_SELF) - cpu_start};
        const Timing md5_once = md5sum_time(path, 1);
        best.keep_best(once);
        md5.keep_best(md5_once);
        rounds += bench::cell(" %.2f", md5_once.cpu / once.cpu);
    }
    std::printf(
        "decode+aggregate %-13s: %7.1f MB in %.3f s = %7.1f MB/s (%7.1f MB/s per CPU s), %6.1f M "
        "records/s; md5sum %.3f s = %7.1f MB/s (%7.1f MB/s per CPU s); ratio to md5sum %.2f wall, "
        "%.2f CPU (each round:%s)\n",
        name, size_mb, best.wall, size_mb / best.wall, size_mb / best.cpu,
        static_cast<double>(stats.records()) / best.wall / 1e6, md5.wall, size_mb / md5.wall,
        size_mb / md5.cpu, md5.wall / best.wall, md5.cpu / best.cpu, rounds.c_str());
    // CPU time, not wall: on a shared machine it is what one core does.
    bench::table_row("decode+aggregate", bench::cell("%s capture, %.0f MB", name, size_mb),
                     bench::cell("%.1f MB/s per CPU s", size_mb / best.cpu),
                     bench::cell("md5sum %.1f MB/s per CPU s", size_mb / md5.cpu),
                     md5.cpu / best.cpu);
}

void bench_decode(const std::filesystem::path& dir, const Wire& wire, std::uint64_t bytes) {
    const auto path = make_capture(dir, wire, bytes);
    time_decode(path, wire.name, wire_spec(wire));
    std::filesystem::remove(path);
}

void bench_mixed(const std::filesystem::path& dir, std::uint64_t bytes) {
    const auto path = make_mixed_capture(dir, bytes);
    protocol::WireSpec wire;
    wire.protocol = "legacy";
    wire.format = "bin";
    wire.addr_bytes = 4;
    time_decode(path, "bench-like mix", wire);
    std::filesystem::remove(path);
}

// Wire bytes per call of the blinky model: at the same call rate, bytes per second scale by
// the same factor. Caches are flushed every 100 passes of the main loop. The model sends 1.7
// PC samples per call (the thesis' real blink1hex.txt: 0.65), so PC samples dominate.
void bench_wire_size() {
    const std::uint64_t iterations = 10000;
    struct Row {
        const char* name;
        Wire wire;
        int addr_bytes;
    };
    const Row rows[] = {
        {"legacy, 3-byte addresses", {"", daemon::sim::WireProtocol::kLegacy, {}, 0}, 3},
        {"framed, no cache, 3-byte", {"", daemon::sim::WireProtocol::kFramed, {}, 0}, 3},
        {"framed, 32-entry arc cache, 3-byte", {"", daemon::sim::WireProtocol::kFramed, {}, 32}, 3},
        {"framed, 32-entry arc cache, 4-byte", {"", daemon::sim::WireProtocol::kFramed, {}, 32}, 4},
        {"framed, arc + 32-entry PC cache, 3-byte",
         {"", daemon::sim::WireProtocol::kFramed, {}, 32, 32},
         3},
    };
    double legacy_per_call = 0;
    for (const Row& row : rows) {
        daemon::sim::SimulatorOptions o = simulator_options(row.wire);
        o.addr_bytes = row.addr_bytes;
        o.max_iterations = iterations;
        const auto truth = daemon::sim::simulate_board(o, [](const std::uint8_t*, std::size_t) {});
        const double per_call =
            static_cast<double>(truth.wire_bytes) / static_cast<double>(truth.calls);
        if (legacy_per_call == 0) legacy_per_call = per_call;
        std::printf(
            "blinky, %llu passes, %-40s: %9llu bytes for %llu calls: %7llu arc and %7llu PC "
            "records = %6.3f bytes/call; legacy/this = %.2fx\n",
            static_cast<unsigned long long>(iterations), row.name,
            static_cast<unsigned long long>(truth.wire_bytes),
            static_cast<unsigned long long>(truth.calls),
            static_cast<unsigned long long>(truth.arcs_sent),
            static_cast<unsigned long long>(truth.pc_samples_sent), per_call,
            legacy_per_call / per_call);
        if (per_call != legacy_per_call) {
            bench::table_row("wire bytes per call",
                             bench::cell("blinky, %llu passes, %s",
                                         static_cast<unsigned long long>(iterations), row.name),
                             bench::cell("%.3f B/call", per_call),
                             bench::cell("legacy 3-byte %.3f B/call", legacy_per_call),
                             per_call / legacy_per_call);
        }
    }
}

// The thesis' real blinky capture (legacy, 3-byte addresses) sent again as the framed
// protocol would send it: the same records through on-target cache models and the reference
// encoder. Caches are flushed every 100 PC samples (100 ms at the thesis' 1 kHz).
void bench_thesis_wire(const std::filesystem::path& capture) {
    if (!std::filesystem::exists(capture)) {
        std::printf("SKIP thesis capture wire size: %s not found\n", capture.c_str());
        return;
    }
    protocol::RecordCollector sink;
    const auto decoder = protocol::make_decoder({"legacy", "hex", 3, std::nullopt});
    std::ifstream in(capture, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    decoder->feed({reinterpret_cast<const std::uint8_t*>(text.data()), text.size()}, sink);
    decoder->finish(sink);
    std::vector<std::uint8_t> legacy;
    for (const auto& r : sink.records) protocol::encode_legacy(r, 3, legacy);

    for (std::size_t pc_cache : {0u, 32u}) {
        protocol::FramedEncoder encoder(3);
        encoder.hello({protocol::kFramedVersion, 3, protocol::kHelloArcCache, 0x410, 0x20000, 1000,
                       48'000'000, std::vector<std::uint8_t>(20, 0xAB)});
        std::optional<daemon::sim::RecordCache> arcs(32), pcs;
        if (pc_cache) pcs.emplace(pc_cache);
        auto send = [&](const protocol::Record& r) { encoder.record(r); };
        std::uint64_t samples = 0;
        for (const auto& r : sink.records) {
            auto& cache = r.kind == protocol::RecordKind::kArc ? arcs : pcs;
            cache ? cache->add(r, send) : send(r);
            if (r.kind == protocol::RecordKind::kPcSample && ++samples % 100 == 0) {
                arcs->flush(send);
                if (pcs) pcs->flush(send);
            }
        }
        arcs->flush(send);
        if (pcs) pcs->flush(send);
        encoder.flush();
        std::printf(
            "thesis blink1hex.txt (%zu records): legacy %zu bytes; framed, 32-entry arc cache%s: "
            "%zu bytes in %llu frames; legacy/framed = %.2fx\n",
            sink.records.size(), legacy.size(), pc_cache ? " + 32-entry PC cache" : "",
            encoder.wire().size(), static_cast<unsigned long long>(encoder.frames()),
            static_cast<double>(legacy.size()) / static_cast<double>(encoder.wire().size()));
        bench::table_row(
            "thesis capture re-encoded",
            bench::cell("blink1hex.txt, %zu records, framed + 32-entry arc cache%s",
                        sink.records.size(), pc_cache ? " + PC cache" : ""),
            bench::cell("%zu bytes", encoder.wire().size()),
            bench::cell("legacy %zu bytes", legacy.size()),
            static_cast<double>(encoder.wire().size()) / static_cast<double>(legacy.size()));
    }
}

// The best of `repeats` runs of `work`, in seconds.
template <class Work>
double best_seconds(int repeats, Work work) {
    double best = 1e9;
    for (int i = 0; i < repeats; ++i) {
        const auto start = Clock::now();
        work();
        best = std::min(best, seconds_since(start));
    }
    return best;
}

// gmon.out, the profile, and its two reports (gprof's text and the JSON report's profile as
// --report json prints it) of a synthetic profile with `arcs` distinct arcs, each timed on its
// own. Report time is compared with the profile computation it formats, measured in the same run.
void bench_profile(const std::filesystem::path& dir, std::size_t arcs) {
    const SyntheticProfile synthetic = synthetic_profile(arcs);
    const auto elf_path = dir / "bench.elf";
    synthetic.write_elf(elf_path);
    const auto elf = gmon::Symbolizer::load(elf_path);
    const gmon::Aggregate& aggregate = synthetic.aggregate;
    const std::uint32_t addr = synthetic.high;

    const auto start = Clock::now();
    const auto binned = gmon::to_gmon_data(aggregate, {0x1000, addr, 2, 1000}, elf->layout());
    gmon::write_file_atomically(dir / "bench.gmon", gmon::serialize_gmon(binned.data));
    const double write_s = seconds_since(start);
    const int repeats = arcs > 200000 ? 1 : 3;
    gmon::Profile profile;
    const double profile_s =
        best_seconds(repeats, [&] { profile = gmon::compute_profile(binned.data, *elf); });
    std::string text;
    const double text_s = best_seconds(repeats, [&] { text = gmon::render_gprof_text(profile); });
    std::string json;
    const double json_s = best_seconds(repeats, [&] {
        json.clear();
        gmon::JsonStream out(json, 2);
        gmon::write_profile_json(out, profile);
    });
    // As the API serves it: compact, whole into one string, and in 1 MiB pieces as a client
    // pulls them (gmon::ProfileJsonPieces), each piece dropped once made.
    std::size_t compact_bytes = 0;
    const double compact_s = best_seconds(repeats, [&] {
        std::string whole;
        gmon::JsonStream out(whole, -1, 0, gmon::JsonStream::ErrorHandler::replace);
        gmon::write_profile_json(out, profile);
        compact_bytes = whole.size();
    });
    const auto shared = std::make_shared<const gmon::Profile>(profile);
    const double pieces_s = best_seconds(repeats, [&] {
        gmon::ProfileJsonPieces pieces(shared, {});
        std::size_t bytes = 0;
        while (auto piece = pieces.next()) bytes += piece->size();
        if (bytes != compact_bytes)
            std::printf("pieces: %zu bytes, not %zu\n", bytes, compact_bytes);
    });
    if (const char* save = std::getenv("CORE_BENCH_SAVE")) {
        std::ofstream(std::string(save) + ".txt") << text;
        std::ofstream(std::string(save) + ".json") << json;
    }
    std::printf(
        "%zu distinct arcs (%zu profile arcs, %zu functions, %zu cycles): gmon.out %.3f s; "
        "profile %.3f s; text report %.3f s (%zu bytes) = %.2fx profile; JSON report %.3f s "
        "(%zu bytes) = %.2fx profile\n",
        aggregate.distinct_arcs(), profile.arcs.size(), profile.symbols.size(),
        profile.cycles.size(), write_s, profile_s, text_s, text.size(), text_s / profile_s, json_s,
        json.size(), json_s / profile_s);
    const std::string input = bench::cell("%zu distinct arcs, %zu functions",
                                          aggregate.distinct_arcs(), profile.symbols.size());
    bench::table_row("gmon.out written", input, bench::cell("%.3f s", write_s));
    bench::table_row("profile computed", input, bench::cell("%.3f s", profile_s));
    bench::table_row("gprof text report", input, bench::cell("%.3f s", text_s),
                     bench::cell("profile %.3f s", profile_s), text_s / profile_s);
    bench::table_row("JSON report", input, bench::cell("%.3f s", json_s),
                     bench::cell("profile %.3f s", profile_s), json_s / profile_s);
    std::printf("compact JSON %.3f s whole (%zu bytes), %.3f s in 1 MiB pieces = %.2fx whole\n",
                compact_s, compact_bytes, pieces_s, pieces_s / compact_s);
    bench::table_row("profile JSON as served, in 1 MiB pieces", input,
                     bench::cell("%.3f s", pieces_s), bench::cell("whole %.3f s", compact_s),
                     pieces_s / compact_s);
    std::filesystem::remove(elf_path);
    std::filesystem::remove(dir / "bench.gmon");
}

}  // namespace

int main(int argc, char** argv) {
    std::uint64_t mb = 200;
    // A folder of this run's own: benchmarks run side by side on a shared machine must not
    // replace each other's captures (fixed names in /tmp did).
    std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("core_bench." + std::to_string(::getpid()));
    const std::filesystem::path own_dir = dir;
    std::filesystem::path thesis_capture = RACKPROF_SHARED_DATA "/blink1hex.txt";
    std::vector<std::size_t> arc_counts = {100000};
    std::string only;  // "profile": the profile and report line(s) alone
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string arg = argv[i];
        if (arg == "--mb") mb = std::strtoull(argv[i + 1], nullptr, 10);
        if (arg == "--dir") dir = argv[i + 1];
        if (arg == "--thesis") thesis_capture = argv[i + 1];
        if (arg == "--arcs") arc_counts = size_list(argv[i + 1]);
        if (arg == "--only") only = argv[i + 1];
    }
    std::filesystem::create_directories(dir);
    if (only == "mixed") {
        bench_mixed(dir, mb << 20);
        std::error_code ec;
        std::filesystem::remove_all(own_dir, ec);
        return 0;
    }
    if (only == "profile") {
        for (std::size_t arcs : arc_counts) bench_profile(dir, arcs);
        std::error_code ec;
        std::filesystem::remove_all(own_dir, ec);
        return 0;
    }
    std::printf(
        "rackprof core benchmark: captures of %llu MB from the simulator (blinky model); decode "
        "and md5sum in turns, best of 5 each, one core\n",
        static_cast<unsigned long long>(mb));
    // Quoted, never divided into: the thesis publishes no host-side decode speed (its host
    // program converts a serial monitor's capture file after the run, section 4.4).
    std::printf("published: %s, %s\n", kThesis, kThesisWire);
    bench::table_row("published, quoted", kThesis, kThesisWire);
    const Wire wires[] = {
        {"legacy binary", daemon::sim::WireProtocol::kLegacy, protocol::LegacyEncoding::kBinary, 0},
        {"legacy hex", daemon::sim::WireProtocol::kLegacy, protocol::LegacyEncoding::kHex, 0},
        {"framed", daemon::sim::WireProtocol::kFramed, protocol::LegacyEncoding::kBinary, 0},
        {"framed+cache", daemon::sim::WireProtocol::kFramed, protocol::LegacyEncoding::kBinary, 32},
    };
    for (const Wire& wire : wires) {
        if (only.empty() || only == wire.name) bench_decode(dir, wire, mb << 20);
    }
    if (!only.empty()) {
        std::error_code ec;
        std::filesystem::remove_all(own_dir, ec);
        return 0;
    }
    bench_mixed(dir, mb << 20);
    bench_wire_size();
    bench_thesis_wire(thesis_capture);
    for (std::size_t arcs : arc_counts) bench_profile(dir, arcs);
    std::error_code ec;
    std::filesystem::remove_all(own_dir, ec);
    return 0;
}
