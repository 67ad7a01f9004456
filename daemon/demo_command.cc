// `rackprof demo`: the whole chain with no hardware. A simulated board's wire bytes go through
// the decoder into an aggregate, out as gmon.out, and into the profile engine.
#include <filesystem>
#include <iostream>

#include "daemon/board_simulator.h"
#include "daemon/command_line.h"
#include "daemon/commands.h"
#include "daemon/wire_decoder.h"
#include "gmon/gmon_writer.h"
#include "gmon/profile.h"
#include "gmon/report.h"

namespace rackprof::daemon {

int run_demo(const std::vector<std::string>& args) {
    const CommandLine cl(args, {"--model", "--iterations", "--dir"}, {"--help", "-h"});
    if (cl.has("--help") || cl.has("-h")) {
        std::cout << "usage: rackprof demo [--model NAME] [--iterations N] [--dir DIR (default: "
                     "var/demo)]\n";
        return 0;
    }
    const std::filesystem::path dir = cl.get("--dir", "var/demo");
    std::filesystem::create_directories(dir);

    SimulatorOptions options;
    options.model = cl.get("--model", "blinky");
    options.max_iterations = cl.get_uint("--iterations", 200);
    const auto decoder =
        make_decoder(WireSpec{"legacy", "bin", options.addr_bytes, std::nullopt, {}});
    gmon::Aggregate aggregate;
    gmon::AggregateSink sink(aggregate);
    const GroundTruth truth =
        simulate_board(options, [&](const std::uint8_t* data, std::size_t size) {
            decoder->feed(std::span<const std::uint8_t>(data, size), sink);
        });
    decoder->finish(sink);

    const std::string elf_path = (dir / (options.model + ".elf")).string();
    write_model_elf(elf_path, truth);
    const auto elf = gmon::Symbolizer::load(elf_path);
    const auto spec = gmon::histogram_spec(aggregate, std::pair(elf->code_low(), elf->code_high()));
    const auto binned = gmon::to_gmon_data(aggregate, spec, elf->layout());
    const auto gmon_path = dir / "gmon.out";
    gmon::write_file_atomically(gmon_path, gmon::serialize_gmon(binned.data));

    const auto& s = decoder->stats();
    std::cout << "rackprof demo: simulated board '" << options.model << "' sent " << s.bytes_in
              << " bytes; decoded " << s.arcs << " arcs and " << s.pc_samples << " PC samples ("
              << s.bytes_discarded << " bytes discarded)\n"
              << "wrote " << gmon_path.string() << " and " << elf_path
              << "; try: arm-none-eabi-gprof " << elf_path << " " << gmon_path.string() << "\n\n";
    std::cout << gmon::render_gprof_text(gmon::compute_profile(binned.data, *elf));
    return truth.aggregate == aggregate ? 0 : 1;
}

}  // namespace rackprof::daemon
