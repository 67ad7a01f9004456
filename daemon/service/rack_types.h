// The plain data the rack service hands out: a board's status, its events, and the live view
// of a capturing session. No Asio, no Beast: web/ and daemon/ both include this.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gmon/aggregate.h"
#include "gmon/profile_pipeline.h"
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
};

}  // namespace rackprof::service
