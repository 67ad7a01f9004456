// `rackprof demo`: the whole chain with no hardware. A board's wire bytes go through the
// decoder into an aggregate, out as gmon.out, and into the profile engine. The board is a
// simulated one, or (--qemu) rackprof's own example firmware running in qemu-system-arm.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <stdexcept>
#include <thread>

#include "daemon/app/commands.h"
#include "daemon/app/decode_summary.h"
#include "daemon/ingest/capture_import.h"
#include "daemon/ingest/wire_settings.h"
#include "daemon/sim/board_simulator.h"
#include "gmon/calling_context_export.h"
#include "gmon/export.h"
#include "gmon/gmon_writer.h"
#include "protocol/wire_format.h"

extern char** environ;

namespace rackprof::daemon::app {
namespace {

constexpr auto kQemuTimeout = std::chrono::seconds(60);

constexpr const char* kDemoAbout =
    R"(rackprof demo [--model NAME] [--iterations N] [--dir DIR]
rackprof demo --qemu [--board mps2-an385|mps2-an386|mps2-an505[-ns]|microbit|sifive_e|virt]
              [--example NAME]
              [--mode framed|compat|enter-exit] [--firmware-dir DIR] [--dir DIR]

Without --qemu a simulated board runs call model NAME (default blinky).
With --qemu, target-fw's example NAME (default deterministic) runs to completion in
qemu-system-arm (Cortex-M boards) or qemu-system-riscv32 (sifive_e, virt: RV32IMAC) with its
UART captured to DIR/capture.bin and the firmware copied to DIR/firmware.elf. Firmware comes
from --firmware-dir (default: target-fw/ or target-fw-riscv/ beside the rackprof binary,
where the build puts it). --mode enter-exit runs the build with
-finstrument-functions: enter/exit events with cycle stamps (examples conflation,
nested). Both write DIR/gmon.out (DIR defaults to var/demo) and print the profile.
)";

struct DemoArgs {
    std::string model = "blinky";
    std::uint64_t iterations = 200;
    std::string dir = "var/demo";
    bool qemu = false;
    std::string board = "mps2-an385";
    std::string example = "deterministic";
    std::string mode = "framed";
    std::optional<std::string> firmware_dir;
};

// Writes gmon.out for `elf`, prints where things are and the profile.
// With entry/exit events (`calling_context`), the measured view comes first and gprof's
// estimate after it, as `rackprof convert` prints them.
void write_and_print(gmon::Aggregate aggregate, const std::filesystem::path& elf_path,
                     const std::filesystem::path& dir,
                     std::shared_ptr<const gmon::CallingContextTree> calling_context = nullptr) {
    auto input = std::make_shared<gmon::ExportInput>();
    input->source.aggregate = std::make_shared<const gmon::Aggregate>(std::move(aggregate));
    input->source.elf = gmon::Symbolizer::load(elf_path.string());
    input->calling_context = calling_context;
    const auto gmon_path = dir / "gmon.out";
    std::vector<std::uint8_t> bytes;
    gmon::export_to("gmon", input, [&](std::string_view chunk) {
        bytes.insert(bytes.end(), chunk.begin(), chunk.end());
    });
    gmon::write_file_atomically(gmon_path, bytes);
    std::cout << "wrote " << gmon_path.string() << "; try: arm-none-eabi-gprof "
              << elf_path.string() << " " << gmon_path.string() << "\n\n";
    if (calling_context && !calling_context->empty()) {
        std::cout << gmon::measured_arcs_text(*calling_context,
                                              gmon::ContextFrameNames(input->source.elf.get()));
    }
    gmon::export_to("text", input, [](std::string_view chunk) { std::cout << chunk; });
}

int simulated_demo(const DemoArgs& args, const std::filesystem::path& dir) {
    sim::SimulatorOptions options;
    options.model = args.model;
    options.max_iterations = args.iterations;
    const auto decoder = protocol::make_decoder(protocol::WireSpec{
        sim::wire_format_name(options.protocol), "bin", options.addr_bytes, std::nullopt, {}});
    gmon::Aggregate aggregate;
    gmon::AggregateSink sink(aggregate);
    const sim::GroundTruth truth =
        sim::simulate_board(options, [&](const std::uint8_t* data, std::size_t size) {
            decoder->feed(std::span<const std::uint8_t>(data, size), sink);
        });
    decoder->finish(sink);

    const auto elf_path = dir / (options.model + ".elf");
    sim::write_model_elf(elf_path.string(), truth);
    std::cout << "rackprof demo: simulated board '" << options.model
              << "': " << summary_line(decoder->stats(), aggregate) << "\n";
    const bool exact = truth.aggregate == aggregate;
    write_and_print(std::move(aggregate), elf_path, dir);
    return exact ? 0 : 1;
}

// Runs `argv` and waits for it, killing it after `timeout`. Returns its exit status.
int run_to_completion(const std::vector<std::string>& argv, std::chrono::seconds timeout) {
    std::vector<char*> c_argv;
    for (const auto& a : argv) c_argv.push_back(const_cast<char*>(a.c_str()));
    c_argv.push_back(nullptr);
    pid_t pid = 0;
    if (const int rc = posix_spawnp(&pid, c_argv[0], nullptr, nullptr, c_argv.data(), environ))
        throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(rc));
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            throw std::runtime_error(argv[0] + " did not finish within " +
                                     std::to_string(timeout.count()) + " s");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// A QEMU board the demo runs: its emulator, machine options, and target-fw's names for it.
struct QemuBoard {
    const char* emulator;
    std::vector<std::string> machine;
    const char* firmware_dir;  // beside the rackprof binary
    const char* elf_board;     // in the ELF's name: EXAMPLE-BOARD-MODE.elf
};

const std::map<std::string, QemuBoard>& qemu_boards() {
    static const std::map<std::string, QemuBoard> kBoards = {
        {"mps2-an385", {"qemu-system-arm", {"-M", "mps2-an385"}, "target-fw", "mps2-an385"}},
        {"mps2-an386", {"qemu-system-arm", {"-M", "mps2-an386"}, "target-fw", "mps2-an386"}},
        {"mps2-an505", {"qemu-system-arm", {"-M", "mps2-an505"}, "target-fw", "mps2-an505"}},
        // The same machine, the firmware Non-secure behind a Secure boot (TrustZone).
        {"mps2-an505-ns", {"qemu-system-arm", {"-M", "mps2-an505"}, "target-fw", "mps2-an505-ns"}},
        {"microbit", {"qemu-system-arm", {"-M", "microbit"}, "target-fw", "microbit"}},
        {"sifive_e", {"qemu-system-riscv32", {"-M", "sifive_e"}, "target-fw-riscv", "sifive-e"}},
        {"virt",
         {"qemu-system-riscv32", {"-M", "virt", "-bios", "none"}, "target-fw-riscv", "qemu-virt"}},
    };
    return kBoards;
}

std::filesystem::path default_firmware_dir(const char* name) {
    std::error_code ec;
    const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? std::filesystem::path("build") / name : exe.parent_path() / name;
}

int qemu_demo(const DemoArgs& args, const std::filesystem::path& dir) {
    const QemuBoard& board = qemu_boards().at(args.board);
    const std::string& example = args.example;
    const std::string& mode = args.mode;
    const bool riscv = std::string(board.emulator) == "qemu-system-riscv32";
    if (riscv && mode == "compat")
        throw UsageError(
            "--mode compat: the thesis' wire is Cortex-M only; RISC-V boards send "
            "framed (or enter-exit)");
    const std::filesystem::path firmware_dir = args.firmware_dir
                                                   ? std::filesystem::path(*args.firmware_dir)
                                                   : default_firmware_dir(board.firmware_dir);
    const auto elf = firmware_dir / (example + "-" + board.elf_board + "-" + mode + ".elf");
    if (!std::filesystem::exists(elf)) {
        throw std::runtime_error("no firmware " + elf.string() + " (build it with the " +
                                 (riscv ? "riscv64-unknown-elf" : "arm-none-eabi") +
                                 " toolchain: ./setup.sh, then cmake --build build; or give "
                                 "--firmware-dir)");
    }
    const auto capture = dir / "capture.bin";
    std::filesystem::remove(capture);
    // The firmware beside its capture: `rackprof convert capture.bin --elf firmware.elf`.
    std::filesystem::copy_file(elf, dir / "firmware.elf",
                               std::filesystem::copy_options::overwrite_existing);
    std::cout << "rackprof demo: running " << elf.filename().string() << " in " << board.emulator
              << " -M " << board.machine[1] << " ..." << std::endl;
    // -icount: the instruction count drives the clock, so the run is the same every time.
    std::vector<std::string> argv = {board.emulator};
    argv.insert(argv.end(), board.machine.begin(), board.machine.end());
    for (const char* a : {"-display", "none", "-monitor", "none", "-semihosting-config",
                          "enable=on,target=native", "-icount", "shift=5,sleep=off", "-serial"})
        argv.emplace_back(a);
    argv.push_back("file:" + capture.string());
    argv.insert(argv.end(), {"-kernel", elf.string()});
    const int rc = run_to_completion(argv, kQemuTimeout);
    if (rc == 127 || !std::filesystem::exists(capture)) {
        throw std::runtime_error(std::string(board.emulator) + " failed (exit " +
                                 std::to_string(rc) + "); ./setup.sh installs it");
    }
    if (rc != 0) std::cerr << "rackprof demo: the firmware exited with " << rc << "\n";

    // target-fw's modes and the wire format each sends.
    static const std::map<std::string, std::string> kModeWire = {
        {"compat", "legacy"}, {"framed", "framed"}, {"enter-exit", "framed"}};
    const auto& wire = protocol::wire_format(kModeWire.at(mode));
    gmon::Aggregate aggregate;
    ingest::AggregateImportSink sink(aggregate);
    ingest::ImportSpec spec;
    spec.kind = ingest::InputKind::kCapture;
    spec.wire =
        protocol::WireSpec{std::string(wire.name), "bin", wire.default_addr_bytes, std::nullopt};
    const auto decoded = ingest::import_file(capture, spec, sink);
    const auto& s = decoded.stats;
    std::cout << "rackprof demo: the board's UART: " << summary_line(s, aggregate) << "\n";
    if (decoded.function_events > 0 || decoded.events_lost > 0) {
        std::cout << "rackprof demo: " << decoded.function_events << " enter/exit events, "
                  << decoded.events_lost << " place(s) where some were lost; try: rackprof convert "
                  << capture.string() << " --protocol framed --elf "
                  << (dir / "firmware.elf").string() << "\n";
    }
    write_and_print(std::move(aggregate), elf, dir, decoded.calling_context);
    return rc == 0 && s.bytes_discarded == 0 && s.frames_lost == 0 ? 0 : 1;
}

}  // namespace

CommandRun add_demo_command(CLI::App& root) {
    auto args = std::make_shared<DemoArgs>();
    CLI::App& app = add_command(
        root, "demo",
        "simulate a board, convert its capture and print the profile (no hardware needed)",
        kDemoAbout);
    app.add_option("--model", args->model, "the simulated board's call model (default: blinky)")
        ->type_name("NAME");
    add_count(app, "--iterations", args->iterations,
              "passes of the model's main loop (default: 200)")
        ->type_name("N");
    app.add_option("--dir", args->dir, "where gmon.out and the rest go (default: var/demo)")
        ->type_name("DIR");
    app.add_flag("--qemu", args->qemu, "run target-fw's example firmware in qemu-system-arm");
    app.add_option("--board", args->board,
                   "qemu: mps2-an385 | mps2-an386 | mps2-an505 (Cortex-M33, Secure) |\n"
                   "mps2-an505-ns (Non-secure) | microbit | sifive_e | virt (RV32IMAC)\n"
                   "(default: mps2-an385)")
        ->type_name("BOARD")
        ->check(CLI::IsMember({"mps2-an385", "mps2-an386", "mps2-an505", "mps2-an505-ns",
                               "microbit", "sifive_e", "virt"}));
    app.add_option("--example", args->example, "qemu: target-fw's example (default: deterministic)")
        ->type_name("NAME");
    app.add_option("--mode", args->mode, "qemu: framed | compat | enter-exit (default: framed)")
        ->type_name("MODE")
        ->check(CLI::IsMember({"framed", "compat", "enter-exit"}));
    app.add_option("--firmware-dir", args->firmware_dir,
                   "qemu: where the firmware is (default: target-fw/ beside rackprof)")
        ->type_name("DIR");
    return [args] {
        const std::filesystem::path dir = args->dir;
        std::filesystem::create_directories(dir);
        return args->qemu ? qemu_demo(*args, dir) : simulated_demo(*args, dir);
    };
}

}  // namespace rackprof::daemon::app
