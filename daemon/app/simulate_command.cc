// `rackprof simulate`: a virtual board writing the exact bytes a profiled target would send.
#include <sys/resource.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "daemon/app/commands.h"
#include "daemon/sim/board_simulator.h"
#include "daemon/sim/pty_board.h"
#include "daemon/sim/pty_rack.h"
#include "gmon/gmon_writer.h"
#include "gmon/report.h"
#include "protocol/framed_format.h"

namespace rackprof::daemon::app {

namespace {

constexpr const char* kSimulateAbout =
    R"(Runs a call model as a profiled board would and writes the wire bytes it sends (the thesis'
legacy format, or the rackprof framed protocol), plus the ground truth: every arc and PC
sample sent, before any fault.

As a board on a pseudo-terminal (--pty), the daemon opens it like a USB serial adapter. As a
rack of boards on pseudo-terminals (--boards, --pty-dir), all are fed by this one process (one
event loop, each board paced to --rate on its own); when every board has sent its bytes and
they were read, a last line on standard error says "rack summary" with bytes_sent, seconds,
cpu_seconds (of this process) and max_backlog (the most bytes a board had due that its pty had
no room for).
)";

struct SimulateArgs {
    std::string model = "blinky";
    std::optional<std::string> elf;
    std::string arch;
    std::optional<std::uint64_t> iterations;
    std::uint64_t bytes = 0;
    std::string protocol = "legacy";
    std::string format = "bin";
    int addr_bytes = 3;
    std::uint64_t arc_cache = 0;
    std::uint64_t pc_cache = 0;
    std::optional<std::uint64_t> cache_flush;
    std::uint64_t seed = 1;
    std::uint32_t dither = 0;
    std::optional<std::string> slower;
    double drop = 0, flip = 0, insert = 0, drop_frames = 0;
    std::optional<std::string> output;  // -o
    std::optional<std::string> truth;
    std::optional<std::string> write_elf;
    bool list_models = false;
    std::optional<std::string> pty;
    std::uint64_t rate = 20000;
    std::uint64_t unplug_every = 0;
    std::uint64_t unplug_for = 500;
    std::uint64_t unplugs = 0;
    std::optional<std::uint64_t> boards;
    std::optional<std::string> pty_dir;
    std::uint64_t tick_ms = 10;
};

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

nlohmann::json truth_json(const sim::GroundTruth& truth, const sim::SimulatorOptions& options,
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
            {"protocol", sim::wire_format_name(options.protocol)},
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
int run_rack(const SimulateArgs& args, const sim::SimulatorOptions& options) {
    if (!args.pty_dir) throw UsageError("--boards needs --pty-dir DIR");
    const std::string dir = *args.pty_dir;
    if (args.output || args.pty || args.write_elf || args.unplug_every)
        throw UsageError("--boards excludes -o, --pty, --write-elf and --unplug-every");
    const std::uint64_t count = args.boards.value_or(1);
    sim::PtyRackOptions rack;
    rack.rate = args.rate;
    rack.tick = std::chrono::milliseconds(args.tick_ms);
    const auto models = split_list(options.model);
    std::filesystem::create_directories(dir);
    for (std::uint64_t i = 0; i < count; ++i) {
        sim::SimulatorOptions board = options;
        board.model = models[i % models.size()];
        board.seed = options.seed + i;
        rack.boards.push_back(board);
        rack.links.push_back(std::filesystem::path(dir) / board_name(i));
    }
    raise_descriptor_limit();
    sim::PtyRack feeder(rack);
    std::cerr << "rackprof: " << count << " boards on " << dir << "/b0.. at " << rack.rate
              << " bytes/s each\n";
    const sim::PtyRackStats stats = feeder.run();
    if (args.truth) {
        nlohmann::json boards = nlohmann::json::array();
        for (std::size_t i = 0; i < feeder.size(); ++i)
            boards.push_back(truth_json(feeder.truth(i), rack.boards[i], 0));
        const std::string text = nlohmann::json{{"boards", boards}}.dump(2) + "\n";
        gmon::write_file_atomically(*args.truth,
                                    std::vector<std::uint8_t>(text.begin(), text.end()));
    }
    std::cerr << "rackprof: rack summary boards=" << count << " rate=" << rack.rate
              << " bytes_sent=" << stats.bytes_sent << " seconds=" << stats.seconds
              << " cpu_seconds=" << cpu_seconds() << " max_backlog=" << stats.max_backlog << "\n";
    return 0;
}

// The simulator's options; each value's range was checked as it was parsed.
sim::SimulatorOptions simulator_options(const SimulateArgs& args) {
    sim::SimulatorOptions options;
    options.model = args.model;
    if (args.elf) options.elf = gmon::Symbolizer::load(*args.elf);
    options.arch = protocol::arch_code(args.arch);
    options.addr_bytes = args.addr_bytes;
    options.encoding =
        args.format == "hex" ? protocol::LegacyEncoding::kHex : protocol::LegacyEncoding::kBinary;
    options.seed = args.seed;
    options.dither_cycles = args.dither;
    options.faults = {args.drop, args.flip, args.insert, args.drop_frames};
    options.protocol = *sim::simulated_protocol(args.protocol);
    options.arc_cache = args.arc_cache;
    options.pc_cache = args.pc_cache;
    options.arc_cache_flush = args.cache_flush.value_or(options.arc_cache_flush);
    if (options.protocol != sim::WireProtocol::kFramed &&
        (options.arc_cache > 0 || options.pc_cache > 0 || options.faults.frame_drop > 0))
        throw UsageError("--arc-cache, --pc-cache and --drop-frames need --protocol framed");
    if (options.protocol == sim::WireProtocol::kFramed &&
        options.encoding != protocol::LegacyEncoding::kBinary)
        throw UsageError("--protocol framed is binary only: leave out --format hex");
    if (args.slower) options.work_factor = parse_work_factors(*args.slower);
    options.max_bytes = args.bytes;
    options.max_iterations = args.iterations.value_or(options.max_bytes ? 0 : 100);
    return options;
}

// --pty PATH: one board on a pseudo-terminal, unplugged now and then.
sim::GroundTruth run_pty(const SimulateArgs& args, const sim::SimulatorOptions& options,
                         std::uint64_t& unplugs) {
    if (args.output) throw UsageError("--pty and -o exclude each other");
    sim::PtyBoardOptions p;
    p.simulator = options;
    p.rate = args.rate;
    p.simulator.piece_bytes = std::max<std::size_t>(64, p.rate / 50);
    p.link_path = *args.pty;
    p.unplug_every = std::chrono::milliseconds(args.unplug_every);
    p.unplug_for = std::chrono::milliseconds(args.unplug_for);
    p.max_unplugs = args.unplugs;
    sim::PtyBoard board(p);
    std::cerr << "rackprof: board '" << options.model << "' on " << *args.pty << " -> "
              << board.device().string() << " at " << p.rate << " bytes/s\n";
    board.start();
    sim::GroundTruth truth = board.wait();
    unplugs = board.unplugs();
    if (!board.error().empty())
        throw std::runtime_error("the board on " + *args.pty + " failed: " + board.error());
    return truth;
}

// -o FILE (or -): the wire bytes to a file or a pipe.
sim::GroundTruth run_to_file(const SimulateArgs& args, const sim::SimulatorOptions& options) {
    const auto& out_path = args.output;
    if (!out_path && !args.truth && !args.write_elf) {
        throw UsageError(
            "say where the wire bytes go: -o FILE, -o - for standard output, or --pty PATH");
    }
    if (out_path && *out_path == "-" && ::isatty(STDOUT_FILENO)) {
        throw UsageError("refusing to write wire bytes to a terminal; use -o FILE or a pipe");
    }
    std::optional<OutputFile> out;
    if (out_path) out.emplace(*out_path);
    sim::GroundTruth truth =
        sim::simulate_board(options, [&](const std::uint8_t* data, std::size_t size) {
            if (out) out->write(data, size);
        });
    if (out) out->close();
    return truth;
}

int run_simulate(const SimulateArgs& args) {
    if (args.list_models) {
        for (const auto& [name, what] : sim::builtin_models())
            std::cout << name << "\t" << what << "\n";
        return 0;
    }
    const sim::SimulatorOptions options = simulator_options(args);
    if (args.boards || args.pty_dir) return run_rack(args, options);
    std::uint64_t unplugs = 0;
    const sim::GroundTruth truth =
        args.pty ? run_pty(args, options, unplugs) : run_to_file(args, options);
    if (args.truth) {
        const std::string text = truth_json(truth, options, unplugs).dump(2) + "\n";
        gmon::write_file_atomically(*args.truth,
                                    std::vector<std::uint8_t>(text.begin(), text.end()));
    }
    if (args.write_elf) sim::write_model_elf(*args.write_elf, truth);
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

// The model and its wire: what is simulated.
void add_model_options(CLI::App& app, SimulateArgs& args) {
    app.add_option("--model", args.model,
                   "blinky | conflation | deterministic | synced | elf (default: blinky;\n"
                   "with --boards, A,B,... gives board i the (i mod count)-th model)")
        ->type_name("NAME");
    app.add_option("--elf", args.elf,
                   "with --model elf: take functions and addresses from this ELF")
        ->type_name("FILE");
    app.add_option("--arch", args.arch,
                   "framed: the core the HELLO says it is (armv6-m, armv7-m, armv7e-m,\n"
                   "armv8-m.base, armv8-m.main, rv32imc, rv32imac; default: not said)")
        ->type_name("ARCH")
        ->check(CLI::IsMember({"armv6-m", "armv7-m", "armv7e-m", "armv8-m.base", "armv8-m.main",
                               "rv32imc", "rv32imac"}));
    add_count(app, "--iterations", args.iterations,
              "passes of the model's main loop (default: 100, or unlimited with --bytes)")
        ->type_name("N");
    add_count(app, "--bytes", args.bytes, "stop after about SIZE binary wire bytes (e.g. 200M)")
        ->type_name("SIZE");
    app.add_option("--protocol", args.protocol, "legacy | framed (default: legacy)")
        ->type_name("P")
        ->check(CLI::IsMember({sim::wire_format_name(sim::WireProtocol::kLegacy),
                               sim::wire_format_name(sim::WireProtocol::kFramed)}));
    app.add_option("--format", args.format, "bin | hex (default: bin; framed is binary only)")
        ->type_name("F")
        ->check(CLI::IsMember({"bin", "hex"}));
    add_count(app, "--addr-bytes", args.addr_bytes, "address width on the wire (default: 3)")
        ->type_name("N")
        ->check(in_range(3, 4));
    add_count(app, "--arc-cache", args.arc_cache,
              "framed: an on-target arc cache of N entries; repeats leave as ARC_N")
        ->type_name("N");
    add_count(app, "--pc-cache", args.pc_cache, "framed: the same for PC samples (PC_N)")
        ->type_name("N");
    add_count(app, "--cache-flush", args.cache_flush,
              "framed: flush the caches every N passes of the main loop (default: 100)")
        ->type_name("N");
    add_count(app, "--seed", args.seed, "random seed for PC positions and faults (default: 1)")
        ->type_name("N");
    add_count(app, "--dither", args.dither,
              "the sampling timer's reload jittered by -N..+N cycles of its 1000 (an\n"
              "LFSR, as target-fw's RACKPROF_SAMPLE_DITHER); felt by --model synced,\n"
              "whose loop lasts exactly one sampling period (e.g. --dither 125)")
        ->type_name("N")
        ->check(in_range(0, sim::kSamplePeriodCycles - 1, "below the sampling period"));
    app.add_option("--slower", args.slower,
                   "another build: function NAME does K times its work (several as\n"
                   "NAME=K,NAME2=K2); its calls stay the same")
        ->type_name("NAME=K");
}

// Faults on the wire, and where the bytes and the truth go.
void add_fault_and_output_options(CLI::App& app, SimulateArgs& args) {
    app.add_option("--drop", args.drop, "drop each byte with probability P")
        ->type_name("P")
        ->check(probability());
    app.add_option("--flip", args.flip, "flip one bit of each byte with probability P")
        ->type_name("P")
        ->check(probability());
    app.add_option("--insert", args.insert,
                   "insert a random byte before each byte with probability P")
        ->type_name("P")
        ->check(probability());
    app.add_option("--drop-frames", args.drop_frames,
                   "framed: lose each whole frame with probability P (not the HELLO and\n"
                   "the final STOP frames, whose loss no receiver could see)")
        ->type_name("P")
        ->check(probability());
    app.add_option("-o", args.output, "where the wire bytes go ('-': standard output)")
        ->type_name("FILE");
    app.add_option("--truth", args.truth,
                   "write the ground truth as JSON (--boards: {\"boards\": [...]}, in order)")
        ->type_name("FILE");
    app.add_option("--write-elf", args.write_elf,
                   "write an ELF with the model's functions (to symbolize the capture)")
        ->type_name("FILE");
    app.add_flag("--list-models", args.list_models, "list the built-in models");
}

// A board on a pseudo-terminal, or a rack of them.
void add_pty_options(CLI::App& app, SimulateArgs& args) {
    const std::string pty = "a board on a pty";
    const std::string rack = "a rack of boards on ptys";
    app.add_option("--pty", args.pty,
                   "create a pty and a symlink PATH to it; write the bytes there")
        ->type_name("PATH")
        ->group(pty);
    add_count(app, "--rate", args.rate, "wire speed of each board (default: 20000)")
        ->type_name("BYTES/S")
        ->check(at_least(1))
        ->group(pty);
    add_count(app, "--unplug-every", args.unplug_every,
              "unplug the board this often: the pty vanishes, PATH disappears")
        ->type_name("MS")
        ->group(pty);
    add_count(app, "--unplug-for", args.unplug_for, "how long it stays unplugged (default: 500)")
        ->type_name("MS")
        ->group(pty);
    add_count(app, "--unplugs", args.unplugs, "at most N unplugs (default: no limit)")
        ->type_name("N")
        ->group(pty);
    add_count(app, "--boards", args.boards, "simulate N boards; board i uses seed (--seed + i)")
        ->type_name("N")
        ->check(in_range(1, 4096))
        ->group(rack);
    app.add_option("--pty-dir", args.pty_dir,
                   "create DIR/b0 .. DIR/b{N-1}, symlinks to the boards' ptys")
        ->type_name("DIR")
        ->group(rack);
    add_count(app, "--tick-ms", args.tick_ms,
              "write every board this often (default: 10; a USB serial adapter hands\n"
              "its bytes on every 1 to 16 ms)")
        ->type_name("MS")
        ->check(in_range(1, 1000))
        ->group(rack);
}

}  // namespace

CommandRun add_simulate_command(CLI::App& root) {
    auto args = std::make_shared<SimulateArgs>();
    CLI::App& app = add_command(
        root, "simulate",
        "run a virtual board: write the wire bytes it sends, and its ground truth", kSimulateAbout);
    add_model_options(app, *args);
    add_fault_and_output_options(app, *args);
    add_pty_options(app, *args);
    return [args] { return run_simulate(*args); };
}

}  // namespace rackprof::daemon::app
