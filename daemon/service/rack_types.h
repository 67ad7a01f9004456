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

namespace rackprof::service {

using daemon::BoardEvent;
using daemon::BoardStatus;
using daemon::LinkState;
using daemon::to_string;

// A capturing session as the capture side last published it (every 100 ms): its state and
// its live aggregate as a profile source; `version` changes whenever the aggregate does, so a
// view is computed again only then.
struct LiveView {
    std::string board;
    std::string link;  // the link's state: connecting | connected | disconnected | ...
    storage::SessionCounters counters;
    std::vector<protocol::Record> newest_arcs;         // oldest first
    std::vector<storage::ConsoleLine> newest_console;  // itm; oldest first
    gmon::ProfileSource source;  // the live aggregate, its ELF (if any), the announced range
    std::uint64_t version = 0;
    std::string storage_error;  // while storage's commits fail; else ""
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

}  // namespace rackprof::service
