// The plain data the rack service hands out: a board's status, its events, and the live view
// of a capturing session. No Asio, no Beast: web/ and daemon/ both include this.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "daemon/capture/board_status.h"
#include "gmon/aggregate.h"
#include "gmon/profile_pipeline.h"
#include "protocol/record.h"
#include "storage/counters.h"       // SessionCounters
#include "storage/storage_types.h"  // ConsoleLine, WriterStats

namespace rackprof::daemon::service {

using capture::BoardEvent;
using capture::BoardStatus;
using capture::LinkState;
using capture::LiveState;
using capture::to_string;

// A function among a live session's busiest by self time.
struct LiveFunction {
    std::string name;
    double self_percent = 0;
    std::optional<std::uint64_t> calls;  // none: never called, only sampled (gprof's blank)
};

// A capturing session as the capture side last published it (every 100 ms), and what its live
// aggregate shows; `version` changes whenever the aggregate does, and the aggregate's views are
// computed again only then (daemon/service/live_views.h).
struct LiveView {
    LiveState state;
    std::uint64_t version = 0;
    // The top 10 by self time through the one profile pipeline (the same numbers as a session's
    // profile); none without an ELF, or with one the data cannot be profiled with.
    std::vector<LiveFunction> top_functions;
    std::vector<gmon::ArcCount> busiest_arcs;  // the 5 busiest, busiest first
};

// What /metrics reports of the rack: every board (its link state and the counters of its
// current session) and the storage writer. Counters restart with each session (a counter reset
// to Prometheus, which rate() handles).
struct BoardMetrics {
    std::string name;
    LinkState state = LinkState::kConnecting;
    bool capturing = false;
    std::uint64_t reconnects = 0;
    storage::SessionCounters counters;
};
struct RackMetrics {
    std::vector<BoardMetrics> boards;
    storage::WriterStats writer;
};

}  // namespace rackprof::daemon::service
