// The host's end of a counter campaign on the framed protocol v3: a run's plan becomes a
// COUNTER_CONFIG frame, the target's bytes (HELLO, COUNTERS, FUNCTION_COUNTS, RUN_TOTALS) go
// through the real FramedDecoder and come out as the planner's RunResults.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "campaign/planner.h"
#include "protocol/framed_decoder.h"

namespace rackprof::campaign {

class HostWire {
  public:
    explicit HostWire(const CallGraph& graph, int addr_bytes = 4);

    // The COUNTER_CONFIG frame for a plan (addresses at the width of the target's HELLO).
    std::vector<std::uint8_t> config_frame(const RunPlan& plan);
    // Bytes from the target, in any chunking.
    void feed(std::span<const std::uint8_t> bytes);

    const std::optional<protocol::TargetHello>& hello() const { return hello_; }
    const std::optional<protocol::CounterCapabilities>& capabilities() const { return caps_; }
    // A finished run (its RUN_TOTALS arrived), oldest first. Throws std::runtime_error for a
    // run the target refused (RUN_TOTALS without counts) or whose counts did not all arrive.
    std::optional<RunResult> take_result();
    const protocol::DecoderStats& stats() const { return decoder_.stats(); }
    // FUNCTION_COUNTS naming an address that is no function of the graph (counted, ignored).
    std::uint64_t unknown_functions() const { return unknown_functions_; }

  private:
    struct Sink;
    const CallGraph& graph_;
    int addr_bytes_;
    std::map<std::uint32_t, std::size_t> by_addr_;
    protocol::FramedDecoder decoder_;
    protocol::FramedEncoder encoder_;
    std::optional<protocol::TargetHello> hello_;
    std::optional<protocol::CounterCapabilities> caps_;
    RunResult pending_;
    std::size_t pending_items_ = 0;
    std::deque<std::pair<RunResult, std::string>> done_;  // a result, or why it failed
    std::uint64_t unknown_functions_ = 0;
};

// Sends a configuration's bytes to the target and returns what the target answered (at least
// up to that run's RUN_TOTALS; more, or less with a later call giving the rest, is fine).
using Exchange = std::function<std::vector<std::uint8_t>(const std::vector<std::uint8_t>&)>;

// Drives a planner to the end: each plan out as a frame, the answer in, recorded. `on_run` (if
// set) sees each plan with its result. Throws std::runtime_error when a run gets no answer.
void run_campaign(Planner& planner, HostWire& wire, const Exchange& exchange,
                  const std::function<void(const RunPlan&, const RunResult&)>& on_run = {});

}  // namespace rackprof::campaign
