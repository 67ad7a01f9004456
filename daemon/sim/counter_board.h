// A board for counter campaigns (framed protocol v3) with exact ground truth: a call model
// whose every function has its own per-call counts of the DWT's primary counters, run once per
// COUNTER_CONFIG the host sends, answering with the configured functions' inclusive counts as
// target-fw's counting does it (snapshot at the outermost entry, delta added at its exit).
// The truth is computed apart from that, from the model's structure.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "protocol/framed_decoder.h"

namespace rackprof::daemon::sim {

struct CounterModelOptions {
    std::string model = "layers";  // see counter_models()
    std::size_t functions = 60;    // layers: how many functions
    std::uint64_t seed = 1;
    int addr_bytes = 4;
    std::uint8_t slots = 8;        // functions one run can measure (the target's table)
    std::uint8_t counters = 0x3F;  // the primary counters the core has (armv7-m: all six)
};

struct CounterFunction {
    std::string name;
    std::uint32_t addr = 0;
    protocol::CounterValues own{};                             // per call, outside its callees
    std::vector<std::pair<std::size_t, std::uint32_t>> calls;  // callee, times per call
};

// Built-in counter models with one line each.
std::vector<std::pair<std::string, std::string>> counter_models();

class CounterBoard {
  public:
    // Throws std::invalid_argument for an unknown model or options out of range.
    explicit CounterBoard(const CounterModelOptions& options);

    const std::vector<CounterFunction>& functions() const { return functions_; }
    // What the target says after reset: HELLO (v3, flags bit 4) and COUNTERS.
    std::vector<std::uint8_t> start();
    // The host's bytes in (any chunking); the answer to every COUNTER_CONFIG completed in them.
    std::vector<std::uint8_t> receive(std::span<const std::uint8_t> bytes);
    std::uint64_t runs() const { return runs_; }
    const protocol::DecoderStats& host_stats() const { return decoder_.stats(); }

    // The exact truth: a function's inclusive counts over one run (all its activations; the
    // models have no recursion), its calls, and the run's totals.
    const protocol::CounterValues& inclusive(std::size_t f) const { return inclusive_[f]; }
    std::uint64_t calls(std::size_t f) const { return calls_[f]; }
    const protocol::CounterValues& totals() const { return totals_; }

  private:
    struct Sink;
    void run(const protocol::CounterConfig& config);
    void compute_truth();

    CounterModelOptions options_;
    std::vector<CounterFunction> functions_;
    std::vector<protocol::CounterValues> inclusive_;
    std::vector<std::uint64_t> calls_;
    protocol::CounterValues totals_{};
    protocol::FramedDecoder decoder_;
    protocol::FramedEncoder encoder_;
    std::uint64_t runs_ = 0;
};

}  // namespace rackprof::daemon::sim
