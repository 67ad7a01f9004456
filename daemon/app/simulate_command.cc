// `rackprof simulate`: a virtual board writing the exact bytes a profiled target would send.
#include <sys/resource.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "daemon/app/command_line.h"
#include "daemon/app/commands.h"
#include "daemon/sim/board_simulator.h"
#include "daemon/sim/pty_board.h"
#include "daemon/sim/pty_rack.h"
#include "gmon/gmon_writer.h"
#include "gmon/report.h"

namespace rackprof::daemon {

namespace {

constexpr const char* kUsage = R"(usage: rackprof simulate [options]

Runs a call model as a profiled board would and writes the wire bytes it sends (the thesis'
legacy format, or the rackprof framed protocol), plus the ground truth: every arc and PC
sample sent, before any fault.

options:
  --model NAME       blinky | conflation | deterministic | synced | elf (default: blinky)
  --elf FILE         with --model elf: take functions and addresses from this ELF
  --iterations N     passes of the model's main loop (default: 100, or unlimited with --bytes)
  --bytes SIZE       stop after about SIZE binary wire bytes (e.g. 200M)
  --protocol P       legacy | framed (default: legacy)
  --format F         bin | hex (default: bin; framed is binary only)
  --addr-bytes N     3 | 4 (default: 3)
  --arc-cache N      framed: an on-target arc cache of N entries; repeats leave as ARC_N
  --pc-cache N       framed: the same for PC samples (PC_N)
  --cache-flush N    framed: flush the caches every N passes of the main loop (default: 100)
  --seed N           random seed for PC positions and faults (default: 1)
  --dither N         the sampling timer's reload jittered by -N..+N cycles of its 1000 (an
                     LFSR, as target-fw's RACKPROF_SAMPLE_DITHER); felt by --model synced,
                     whose loop lasts exactly one sampling period (e.g. --dither 125)
  --slower NAME=K    another build: function NAME does K times its work (repeatable as
                     NAME=K,NAME2=K2); its calls stay the same
  --drop P           drop each byte with probability P
  --flip P           flip one bit of each byte with probability P
  --insert P         insert a random byte before each byte with probability P
  --drop-frames P    framed: lose each whole frame with probability P (not the HELLO and
                     the final STOP frames, whose loss no receiver could see)
  -o FILE            where the wire bytes go ('-': standard output)
  --truth FILE       write the ground truth as JSON
  --write-elf FILE   write an ELF with the model's functions (to symbolize the capture)
  --list-models      list the built-in models

as a board on a pseudo-terminal (the daemon opens it like a USB serial adapter):
  --pty PATH         create a pty and a symlink PATH to it; write the bytes there
  --rate BYTES/S     wire speed (default: 20000)
  --unplug-every MS  unplug the board this often: the pty vanishes, PATH disappears
  --unplug-for MS    how long it stays unplugged (default: 500)
  --unplugs N        at most N unplugs (default: no limit)

as a rack of boards on pseudo-terminals, all fed by this one process (one event loop, each
board paced to --rate on its own):
  --boards N         simulate N boards; board i uses seed (--seed + i) and, with
                     --model A,B,..., the (i mod count)-th model of the list
  --pty-dir DIR      create DIR/b0 .. DIR/b{N-1}, symlinks to the boards' ptys
  --rate BYTES/S     wire speed of each board (default: 20000)
  --tick-ms MS       write every board this often (default: 10; a USB serial adapter hands
                     its bytes on every 1 to 16 ms)
  --truth FILE       {"boards": [...]}: one ground truth per board, in order
  When every board has sent its bytes and they were read, a last line on standard error
  says "rack summary" with bytes_sent, seconds, cpu_seconds (of this process) and
  max_backlog (the most bytes a board had due that its pty had no room for).
)";

class OutputFile {
  public:
    explicit OutputFile(const std::string& path) {
        if (path == "-") {
            file_ = stdout;
            return;
        }
        file_ = std::fopen(path.c_str(), "wb");
        if (!file_) throw std::runtime_error("cannot write " + path);
        owned_ = true;
    }
    ~OutputFile() {
        if (owned_) std::fclose(file_);
    }
    OutputFile(const OutputFile&) = delete;
    OutputFile& operator=(const OutputFile&) = delete;
    void write(const std::uint8_t* data, std::size_t size) {
        if (std::fwrite(data, 1, size, file_) != size)
            throw std::runtime_error("write failed (disk full?)");
    }
    void close() {
        if (std::fflush(file_) != 0) throw std::runtime_error("write failed (disk full?)");
    }

  private:
    std::FILE* file_ = nullptr;
    bool owned_ = false;
};

nlohmann::json truth_json(const GroundTruth& truth, const SimulatorOptions& options,
                          std::uint64_t unplugs) {
    nlohmann::json functions = nlohmann::json::array();
    for (const auto& f : truth.functions) {
        functions.push_back(
            {{"name", f.name}, {"addr", gmon::hex_address(f.addr)}, {"size", f.size}});
    }
    nlohmann::json arcs = nlohmann::json::array();
    for (const auto& a : truth.aggregate.arcs()) {
        arcs.push_back({{"from", gmon::hex_address(a.from_pc)},
                        {"self", gmon::hex_address(a.self_pc)},
                        {"count", a.count}});
    }
    nlohmann::json pcs = nlohmann::json::array();
    for (const auto& p : truth.aggregate.pc_samples()) {
        pcs.push_back({{"pc", gmon::hex_address(p.pc)}, {"count", p.count}});
    }
    return {{"model", truth.model},
            {"protocol", wire_format_name(options.protocol)},
            {"format", options.encoding == protocol::LegacyEncoding::kHex ? "hex" : "bin"},
            {"arc_cache", options.arc_cache},
            {"pc_cache", options.pc_cache},
            {"addr_bytes", options.addr_bytes},
            {"seed", options.seed},
            {"iterations", truth.iterations},
            {"unplugs", unplugs},
            {"wire_bytes", truth.wire_bytes},
            {"arcs_sent", truth.arcs_sent},
            {"pc_samples_sent", truth.pc_samples_sent},
            {"calls", truth.calls},
            {"frames_sent", truth.frames_sent},
            {"faults",
             {{"frames_dropped", truth.faults.frames_dropped},
              {"dropped", truth.faults.dropped},
              {"flipped", truth.faults.flipped},
              {"inserted", truth.faults.inserted}}},
            {"code_range",
             {{"low", gmon::hex_address(truth.code_range.low)},
              {"high", gmon::hex_address(truth.code_range.high)}}},
            {"functions", functions},
            {"arcs", arcs},
            {"pc_samples", pcs}};
}

// "gamma=3,beta=2" -> {gamma: 3, beta: 2}.
std::map<std::string, std::uint32_t> parse_work_factors(const std::string& text) {
    std::map<std::string, std::uint32_t> factors;
    std::stringstream items(text);
    for (std::string item; std::getline(items, item, ',');) {
        const auto eq = item.find('=');
        std::uint32_t k = 0;
        const char* end = item.data() + item.size();
        if (eq == std::string::npos || eq == 0 ||
            std::from_chars(item.data() + eq + 1, end, k).ptr != end || k == 0 || k > 1000) {
            throw UsageError("--slower takes NAME=K with K in 1..1000, not '" + item + "'");
        }
        factors[item.substr(0, eq)] = k;
    }
    return factors;
}

// Not "b" + std::to_string(i): GCC 12 at -O3 warns about it (a false -Wrestrict).
std::string board_name(std::uint64_t i) {
    std::string name = "b";
    name += std::to_string(i);
    return name;
}

// Descriptors for two per board: a large rack would pass the usual soft limit of 1024.
void raise_descriptor_limit() {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        ::setrlimit(RLIMIT_NOFILE, &limit);
    }
}

double cpu_seconds() {
    rusage usage{};
    ::getrusage(RUSAGE_SELF, &usage);
    return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
           static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

std::vector<std::string> split_list(const std::string& text) {
    std::vector<std::string> items;
    std::stringstream in(text);
    for (std::string item; std::getline(in, item, ',');) items.push_back(item);
    if (items.empty()) items.push_back(text);
    return items;
}

// --boards N --pty-dir DIR: the whole rack in this process.
int run_rack(const CommandLine& cl, const SimulatorOptions& options) {
    const auto dir = cl.get("--pty-dir");
    if (!dir) throw UsageError("--boards needs --pty-dir DIR");
    if (cl.has("-o") || cl.has("--pty") || cl.has("--write-elf") || cl.has("--unplug-every"))
        throw UsageError("--boards excludes -o, --pty, --write-elf and --unplug-every");
    const std::uint64_t count = cl.get_uint("--boards", 1);
    if (count == 0 || count > 4096) throw UsageError("--boards takes 1..4096");
    PtyRackOptions rack;
    rack.rate = cl.get_uint("--rate", 20000);
    if (rack.rate == 0) throw UsageError("--rate must be above 0");
    rack.tick = std::chrono::milliseconds(cl.get_uint("--tick-ms", 10));
    if (rack.tick.count() == 0 || rack.tick.count() > 1000)
        throw UsageError("--tick-ms takes 1..1000");
    const auto models = split_list(options.model);
    std::filesystem::create_directories(*dir);
    for (std::uint64_t i = 0; i < count; ++i) {
        SimulatorOptions board = options;
        board.model = models[i % models.size()];
        board.seed = options.seed + i;
        rack.boards.push_back(board);
        rack.links.push_back(std::filesystem::path(*dir) / board_name(i));
    }
    raise_descriptor_limit();
    PtyRack feeder(rack);
    std::cerr << "rackprof: " << count << " boards on " << *dir << "/b0.. at " << rack.rate
              << " bytes/s each\n";
    const PtyRackStats stats = feeder.run();
    if (const auto path = cl.get("--truth")) {
        nlohmann::json boards = nlohmann::json::array();
        for (std::size_t i = 0; i < feeder.size(); ++i)
            boards.push_back(truth_json(feeder.truth(i), rack.boards[i], 0));
        const std::string text = nlohmann::json{{"boards", boards}}.dump(2) + "\n";
        gmon::write_file_atomically(*path, std::vector<std::uint8_t>(text.begin(), text.end()));
    }
    std::cerr << "rackprof: rack summary boards=" << count << " rate=" << rack.rate
              << " bytes_sent=" << stats.bytes_sent << " seconds=" << stats.seconds
              << " cpu_seconds=" << cpu_seconds() << " max_backlog=" << stats.max_backlog << "\n";
    return 0;
}

}  // namespace

int run_simulate(const std::vector<std::string>& args) {
    const CommandLine cl(args, {"--model",       "--elf",          "--iterations", "--bytes",
                                "--format",      "--addr-bytes",   "--seed",       "--drop",
                                "--flip",        "--insert",       "-o",           "--truth",
                                "--write-elf",   "--protocol",     "--arc-cache",  "--cache-flush",
                                "--drop-frames", "--pc-cache",     "--slower",     "--pty",
                                "--rate",        "--unplug-every", "--unplug-for", "--unplugs",
                                "--boards",      "--pty-dir",      "--tick-ms",    "--dither"},
                         {"--help", "-h", "--list-models"});
    if (cl.has("--help") || cl.has("-h")) {
        std::cout << kUsage;
        return 0;
    }
    if (cl.has("--list-models")) {
        for (const auto& [name, what] : builtin_models()) std::cout << name << "\t" << what << "\n";
        return 0;
    }
    if (!cl.positionals().empty())
        throw UsageError("unexpected argument '" + cl.positionals()[0] + "'");
    SimulatorOptions options;
    options.model = cl.get("--model", "blinky");
    if (const auto elf = cl.get("--elf")) options.elf = gmon::Symbolizer::load(*elf);
    options.addr_bytes = static_cast<int>(cl.get_uint("--addr-bytes", 3));
    if (options.addr_bytes != 3 && options.addr_bytes != 4)
        throw UsageError("--addr-bytes must be 3 or 4");
    options.encoding = cl.choice("--format", "bin", {"bin", "hex"}) == "hex"
                           ? protocol::LegacyEncoding::kHex
                           : protocol::LegacyEncoding::kBinary;
    options.seed = cl.get_uint("--seed", 1);
    options.dither_cycles = static_cast<std::uint32_t>(cl.get_uint("--dither", 0));
    if (options.dither_cycles >= kSamplePeriodCycles)
        throw UsageError("--dither must be below the sampling period (1000 cycles)");
    options.faults = {cl.get_rate("--drop"), cl.get_rate("--flip"), cl.get_rate("--insert"),
                      cl.get_rate("--drop-frames")};
    options.protocol = *simulated_protocol(cl.choice(
        "--protocol", "legacy",
        {wire_format_name(WireProtocol::kLegacy), wire_format_name(WireProtocol::kFramed)}));
    options.arc_cache = cl.get_uint("--arc-cache", 0);
    options.pc_cache = cl.get_uint("--pc-cache", 0);
    options.arc_cache_flush = cl.get_uint("--cache-flush", options.arc_cache_flush);
    if (options.protocol != WireProtocol::kFramed &&
        (options.arc_cache > 0 || options.pc_cache > 0 || options.faults.frame_drop > 0))
        throw UsageError("--arc-cache, --pc-cache and --drop-frames need --protocol framed");
    if (options.protocol == WireProtocol::kFramed &&
        options.encoding != protocol::LegacyEncoding::kBinary)
        throw UsageError("--protocol framed is binary only: leave out --format hex");
    if (const auto slower = cl.get("--slower")) options.work_factor = parse_work_factors(*slower);
    options.max_bytes = cl.get_uint("--bytes", 0);
    options.max_iterations = cl.get_uint("--iterations", options.max_bytes ? 0 : 100);

    if (cl.has("--boards") || cl.has("--pty-dir")) return run_rack(cl, options);

    GroundTruth truth;
    std::uint64_t unplugs = 0;
    if (const auto pty = cl.get("--pty")) {
        if (cl.has("-o")) throw UsageError("--pty and -o exclude each other");
        PtyBoardOptions p;
        p.simulator = options;
        p.rate = cl.get_uint("--rate", 20000);
        if (p.rate == 0) throw UsageError("--rate must be above 0");
        p.simulator.piece_bytes = std::max<std::size_t>(64, p.rate / 50);
        p.link_path = *pty;
        p.unplug_every = std::chrono::milliseconds(cl.get_uint("--unplug-every", 0));
        p.unplug_for = std::chrono::milliseconds(cl.get_uint("--unplug-for", 500));
        p.max_unplugs = cl.get_uint("--unplugs", 0);
        PtyBoard board(p);
        std::cerr << "rackprof: board '" << options.model << "' on " << *pty << " -> "
                  << board.device().string() << " at " << p.rate << " bytes/s\n";
        board.start();
        truth = board.wait();
        unplugs = board.unplugs();
        if (!board.error().empty())
            throw std::runtime_error("the board on " + *pty + " failed: " + board.error());
    } else {
        const auto out_path = cl.get("-o");
        if (!out_path && !cl.has("--truth") && !cl.has("--write-elf")) {
            throw UsageError(
                "say where the wire bytes go: -o FILE, -o - for standard output, or --pty PATH");
        }
        if (out_path && *out_path == "-" && ::isatty(STDOUT_FILENO)) {
            throw UsageError("refusing to write wire bytes to a terminal; use -o FILE or a pipe");
        }
        std::optional<OutputFile> out;
        if (out_path) out.emplace(*out_path);
        truth = simulate_board(options, [&](const std::uint8_t* data, std::size_t size) {
            if (out) out->write(data, size);
        });
        if (out) out->close();
    }

    if (const auto path = cl.get("--truth")) {
        const std::string text = truth_json(truth, options, unplugs).dump(2) + "\n";
        gmon::write_file_atomically(*path, std::vector<std::uint8_t>(text.begin(), text.end()));
    }
    if (const auto path = cl.get("--write-elf")) write_model_elf(*path, truth);
    std::cerr << "rackprof: simulated " << truth.model << ": " << truth.iterations
              << " iterations, " << truth.arcs_sent << " arcs and " << truth.pc_samples_sent
              << " PC samples in " << truth.wire_bytes << " wire bytes";
    if (unplugs) std::cerr << "; unplugged " << unplugs << " times";
    if (truth.frames_sent) std::cerr << "; " << truth.frames_sent << " frames";
    if (truth.faults.frames_dropped)
        std::cerr << ", " << truth.faults.frames_dropped << " of them dropped";
    if (options.faults.any()) {
        std::cerr << "; faults: " << truth.faults.dropped << " dropped, " << truth.faults.flipped
                  << " flipped, " << truth.faults.inserted << " inserted";
    }
    std::cerr << "\n";
    return 0;
}

}  // namespace rackprof::daemon
