// The plain data the rack service hands out: a board's status, its events, and the live view
// of a capturing session. No Asio, no Beast: web/ and daemon/ both include this.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gmon/aggregate.h"
#include "protocol/record.h"
#include "storage/storage_writer.h"  // SessionHandle, SessionCounters

// Declared in namespace daemon because the capture code (board.cc) defines to_string there;
// namespace service re-exports them under the names web/ uses.
namespace rackprof::daemon {

enum class LinkState { kConnecting, kConnected, kDisconnected, kFinished, kStopped };
const char* to_string(LinkState state);

struct BoardStatus {
    std::string name;
    std::string link;
    LinkState state = LinkState::kConnecting;
    std::string last_error;
    std::uint64_t reconnects = 0;
    std::optional<storage::SessionHandle> session;
    std::int64_t session_id = 0;  // the stored session's id (0 until its row is committed)
    storage::SessionCounters counters;
};

// A change worth telling the world: a link state, a session starting or ending.
struct BoardEvent {
    std::string board;
    std::string kind;   // link | session_started | session_stopped
    std::string state;  // link: the new state
    std::string reason;
    std::optional<storage::SessionHandle> session;
};

}  // namespace rackprof::daemon

namespace rackprof::service {

using daemon::BoardEvent;
using daemon::BoardStatus;
using daemon::LinkState;
using daemon::to_string;

// A session's counters as the API and the feeds show them: the one list of their JSON names.
inline nlohmann::json counters_json(const storage::SessionCounters& c) {
    return {{"bytes_in", c.bytes_in},
            {"bytes_discarded", c.bytes_discarded},
            {"resyncs", c.resyncs},
            {"arcs", c.arcs},
            {"pc_samples", c.pc_samples},
            {"gaps", c.gaps},
            {"records_lost", c.records_lost},
            {"bytes_lost", c.bytes_lost},
            {"frames", c.frames},
            {"frames_bad", c.frames_bad},
            {"frames_lost", c.frames_lost},
            {"target_dropped", c.target_dropped},
            {"overflows", c.overflows},
            {"sleep_samples", c.sleep_samples}};
}

// A capturing session as the capture thread sees it now.
struct LiveView {
    BoardStatus board;
    gmon::Aggregate aggregate;
    std::vector<protocol::Record> newest_arcs;         // oldest first
    std::vector<storage::ConsoleLine> newest_console;  // itm; oldest first
    // The top functions by self time ({name, self_percent, calls}); empty without a usable
    // ELF. Filled by the service, not by the capture thread.
    nlohmann::json top_functions = nlohmann::json::array();
};

}  // namespace rackprof::service
