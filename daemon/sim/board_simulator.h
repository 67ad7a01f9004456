// A virtual board: runs a call model and produces the exact wire bytes a profiled target would
// send, plus the ground truth (every arc and PC sample it sent) so tests can demand equality.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "gmon/aggregate.h"
#include "gmon/symbolizer.h"
#include "protocol/framed_format.h"
#include "protocol/legacy_format.h"

namespace rackprof::daemon::sim {

// Byte-level faults applied to the binary wire, each a per-byte probability.
struct FaultSpec {
    double drop = 0.0;
    double flip = 0.0;    // one random bit of the byte inverted
    double insert = 0.0;  // a random byte inserted before this one
    // Framed protocol: each whole frame lost with this probability (a degraded link). The
    // frames holding the HELLO and the final STOP are spared: no receiver could tell those
    // went missing, and tests demand exact loss counts.
    double frame_drop = 0.0;
    bool any() const { return drop > 0 || flip > 0 || insert > 0; }
};

enum class WireProtocol { kLegacy, kFramed };
// The registered wire format (protocol/wire_format.h) each simulated protocol produces.
const char* wire_format_name(WireProtocol protocol);
// The simulated protocol for a wire format's name; nothing for one the simulator cannot send.
std::optional<WireProtocol> simulated_protocol(std::string_view wire_format);

// The sampling period, in cycles of a model's clock (the synced model's main loop lasts exactly
// this long).
inline constexpr std::uint32_t kSamplePeriodCycles = 1000;

struct SimulatorOptions {
    std::string model = "blinky";  // a built-in model, or "elf" with `elf` set
    std::shared_ptr<const gmon::Symbolizer> elf;
    int addr_bytes = 3;
    protocol::LegacyEncoding encoding = protocol::LegacyEncoding::kBinary;  // legacy only
    WireProtocol protocol = WireProtocol::kLegacy;
    // Framed: entries of the on-target arc cache (0: off). Repeats of a cached arc are counted
    // on the target and sent as one ARC_N when the entry is evicted, at every
    // `arc_cache_flush` passes of the main loop (0: only at the end) and at the end.
    std::size_t arc_cache = 0;
    std::size_t pc_cache = 0;  // the same for PC samples (PC_N), flushed with the arc cache
    std::uint64_t arc_cache_flush = 100;
    // Another build of the model: the named functions do this many times their work (more PC
    // samples in them, the same calls), so two runs differ by a known self time.
    std::map<std::string, std::uint32_t> work_factor;
    std::uint32_t sample_hz = 1000;  // the HELLO's sampling rate
    std::uint8_t arch = 0;           // the HELLO's architecture (protocol::TargetArch); 0: none
    // The sampling timer's reload jittered by a pseudo-random -N..+N cycles (a 16-bit LFSR, as
    // target-fw's RACKPROF_SAMPLE_DITHER does) around kSamplePeriodCycles; 0: a fixed period.
    // Felt by the models that run on a cycle clock (synced); the others place their samples at
    // random PCs of the function doing the work and do not change.
    std::uint32_t dither_cycles = 0;
    std::uint64_t seed = 1;
    FaultSpec faults;
    // Stop after the first pass of the model's main loop that reaches either limit.
    std::uint64_t max_bytes = 0;       // of binary wire bytes; 0: no limit
    std::uint64_t max_iterations = 1;  // of the model's main loop; 0: no limit
    // Runs until this turns true (with no other limit, it must be given).
    const std::atomic<bool>* stop = nullptr;
    // Wire output is handed out in pieces of about this size, each holding whole records.
    std::size_t piece_bytes = 1 << 20;
};

struct FaultCounts {
    std::uint64_t dropped = 0;
    std::uint64_t flipped = 0;
    std::uint64_t inserted = 0;
    std::uint64_t frames_dropped = 0;
};

struct SimulatedFunction {
    std::string name;
    std::uint32_t addr = 0;
    std::uint32_t size = 0;
    // Where mcount's `self` lies for calls of it, bytes past its entry: past the prologue's
    // call (a real ELF's, found in its code), else 4.
    std::uint32_t mcount_offset = 4;
};

// What the simulated board sent, before any fault was applied (records as they left the
// target: an arc cache's ARC_N is one record with its count).
struct GroundTruth {
    std::string model;
    std::vector<SimulatedFunction> functions;
    gmon::Aggregate aggregate;
    std::uint64_t arcs_sent = 0;        // arc records on the wire (ARC_N counts once)
    std::uint64_t pc_samples_sent = 0;  // PC-sample records on the wire
    std::uint64_t calls = 0;            // calls the model made (with an arc cache: > arcs_sent)
    std::uint64_t frames_sent = 0;      // framed protocol
    std::uint64_t wire_bytes = 0;       // as written (after faults; hex counts characters)
    std::uint64_t iterations = 0;
    FaultCounts faults;
    protocol::AddressRange code_range;
};

// Called with each piece of wire output, in order.
using WireOutput = std::function<void(const std::uint8_t* data, std::size_t size)>;

// Names of the built-in models with one line describing each.
std::vector<std::pair<std::string, std::string>> builtin_models();

// Runs the simulation, streaming the wire bytes to `out`. Throws std::invalid_argument for an
// unknown model or invalid options.
GroundTruth simulate_board(const SimulatorOptions& options, const WireOutput& out);

// The same simulation one pass of the model's main loop at a time, so that one thread can
// interleave many boards and generate each one's bytes only when its wire has room for them.
// The bytes are exactly those simulate_board() sends for the same options.
class BoardSimulation {
  public:
    // Validates (std::invalid_argument) and sends what the target says first (framed: HELLO).
    BoardSimulation(SimulatorOptions options, WireOutput out);
    ~BoardSimulation();
    BoardSimulation(const BoardSimulation&) = delete;
    BoardSimulation& operator=(const BoardSimulation&) = delete;

    // One pass of the main loop; the pass that reaches a limit also sends the end of the run
    // (cache flush, framed STOP) and everything still held back.
    void step();
    bool done() const;
    const GroundTruth& truth() const;

  private:
    struct State;
    std::unique_ptr<State> state_;
};

// Writes an ELF holding the model's functions, so its captures symbolize like real firmware.
void write_model_elf(const std::filesystem::path& path, const GroundTruth& truth);

}  // namespace rackprof::daemon::sim
