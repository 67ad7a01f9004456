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
#include <stdexcept>
#include <thread>

#include "daemon/app/command_line.h"
#include "daemon/app/commands.h"
#include "daemon/app/decode_summary.h"
#include "daemon/ingest/capture_import.h"
#include "daemon/ingest/wire_settings.h"
#include "daemon/sim/board_simulator.h"
#include "gmon/export.h"
#include "gmon/gmon_writer.h"
#include "protocol/wire_format.h"

extern char** environ;

namespace rackprof::daemon {
namespace {

constexpr auto kQemuTimeout = std::chrono::seconds(60);

void usage(std::ostream& out) {
    out << "usage: rackprof demo [--model NAME] [--iterations N] [--dir DIR]\n"
           "       rackprof demo --qemu [--board mps2-an385|microbit] [--example NAME]\n"
           "                     [--mode framed|compat|enter-exit] [--firmware-dir DIR] [--dir "
           "DIR]\n"
           "\n"
           "Without --qemu a simulated board runs call model NAME (default blinky).\n"
           "With --qemu, target-fw's example NAME (default deterministic) runs to completion in\n"
           "qemu-system-arm with its UART captured to DIR/capture.bin and the firmware copied to\n"
           "DIR/firmware.elf. Firmware comes from --firmware-dir (default: target-fw/ beside the\n"
           "rackprof binary, where the build puts it). --mode enter-exit runs the build with\n"
           "-finstrument-functions: enter/exit events with cycle stamps (examples conflation,\n"
           "nested). Both write DIR/gmon.out (DIR defaults to var/demo) and print the profile.\n";
}

// Writes gmon.out for `elf`, prints where things are and the profile.
void write_and_print(gmon::Aggregate aggregate, const std::filesystem::path& elf_path,
                     const std::filesystem::path& dir) {
    auto input = std::make_shared<gmon::ExportInput>();
    input->source.aggregate = std::make_shared<const gmon::Aggregate>(std::move(aggregate));
    input->source.elf = gmon::Symbolizer::load(elf_path.string());
    const auto gmon_path = dir / "gmon.out";
    std::vector<std::uint8_t> bytes;
    gmon::export_to("gmon", input, [&](std::string_view chunk) {
        bytes.insert(bytes.end(), chunk.begin(), chunk.end());
    });
    gmon::write_file_atomically(gmon_path, bytes);
    std::cout << "wrote " << gmon_path.string() << "; try: arm-none-eabi-gprof "
              << elf_path.string() << " " << gmon_path.string() << "\n\n";
    gmon::export_to("text", input, [](std::string_view chunk) { std::cout << chunk; });
}

int simulated_demo(const CommandLine& cl, const std::filesystem::path& dir) {
    SimulatorOptions options;
    options.model = cl.get("--model", "blinky");
    options.max_iterations = cl.get_uint("--iterations", 200);
    const auto decoder = protocol::make_decoder(protocol::WireSpec{
        wire_format_name(options.protocol), "bin", options.addr_bytes, std::nullopt, {}});
    gmon::Aggregate aggregate;
    gmon::AggregateSink sink(aggregate);
    const GroundTruth truth =
        simulate_board(options, [&](const std::uint8_t* data, std::size_t size) {
            decoder->feed(std::span<const std::uint8_t>(data, size), sink);
        });
    decoder->finish(sink);

    const auto elf_path = dir / (options.model + ".elf");
    write_model_elf(elf_path.string(), truth);
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

std::filesystem::path default_firmware_dir() {
    std::error_code ec;
    const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? std::filesystem::path("build/target-fw") : exe.parent_path() / "target-fw";
}

int qemu_demo(const CommandLine& cl, const std::filesystem::path& dir) {
    const std::string board = cl.get("--board", "mps2-an385");
    const std::string example = cl.get("--example", "deterministic");
    const std::string mode = cl.choice("--mode", "framed", {"framed", "compat", "enter-exit"});
    if (board != "mps2-an385" && board != "microbit")
        throw UsageError("--board must be mps2-an385 or microbit");
    const auto given_dir = cl.get("--firmware-dir");
    const std::filesystem::path firmware_dir =
        given_dir ? std::filesystem::path(*given_dir) : default_firmware_dir();
    const auto elf = firmware_dir / (example + "-" + board + "-" + mode + ".elf");
    if (!std::filesystem::exists(elf)) {
        throw std::runtime_error("no firmware " + elf.string() +
                                 " (build it with the arm-none-eabi toolchain: ./setup.sh, then "
                                 "cmake --build build; or give --firmware-dir)");
    }
    const auto capture = dir / "capture.bin";
    std::filesystem::remove(capture);
    // The firmware beside its capture: `rackprof convert capture.bin --elf firmware.elf`.
    std::filesystem::copy_file(elf, dir / "firmware.elf",
                               std::filesystem::copy_options::overwrite_existing);
    std::cout << "rackprof demo: running " << elf.filename().string() << " in qemu-system-arm -M "
              << board << " ..." << std::endl;
    // -icount: the instruction count drives the clock, so the run is the same every time.
    const int rc = run_to_completion(
        {"qemu-system-arm", "-M", board, "-display", "none", "-monitor", "none", "-serial",
         "file:" + capture.string(), "-semihosting-config", "enable=on,target=native", "-icount",
         "shift=5,sleep=off", "-kernel", elf.string()},
        kQemuTimeout);
    if (rc == 127 || !std::filesystem::exists(capture)) {
        throw std::runtime_error("qemu-system-arm failed (exit " + std::to_string(rc) +
                                 "); ./setup.sh installs it");
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
    write_and_print(std::move(aggregate), elf, dir);
    return rc == 0 && s.bytes_discarded == 0 && s.frames_lost == 0 ? 0 : 1;
}

}  // namespace

int run_demo(const std::vector<std::string>& args) {
    const CommandLine cl(
        args,
        {"--model", "--iterations", "--dir", "--board", "--example", "--mode", "--firmware-dir"},
        {"--help", "-h", "--qemu"});
    if (cl.has("--help") || cl.has("-h")) {
        usage(std::cout);
        return 0;
    }
    const std::filesystem::path dir = cl.get("--dir", "var/demo");
    std::filesystem::create_directories(dir);
    return cl.has("--qemu") ? qemu_demo(cl, dir) : simulated_demo(cl, dir);
}

}  // namespace rackprof::daemon
