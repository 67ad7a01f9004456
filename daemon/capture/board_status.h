// A board as the capture side reports it: its link state, its session, its events. Plain data
// (no Asio), shown by the rack service to web/.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gmon/profile_pipeline.h"  // CodeRange, Symbolizer
#include "protocol/record.h"

#include "storage/counters.h"       // SessionCounters
#include "storage/storage_types.h"  // SessionId

namespace rackprof::daemon::capture {

enum class LinkState { kConnecting, kConnected, kDisconnected, kFinished, kStopped };
// Plain data the web side shows too, so defined here rather than in the capture library.
inline const char* to_string(LinkState state) {
    switch (state) {
        case LinkState::kConnecting:
            return "connecting";
        case LinkState::kConnected:
            return "connected";
        case LinkState::kDisconnected:
            return "disconnected";
        case LinkState::kFinished:
            return "finished";
        case LinkState::kStopped:
            return "stopped";
    }
    return "?";
}

struct BoardStatus {
    std::string name;
    std::string link;
    LinkState state = LinkState::kConnecting;
    std::string last_error;
    std::uint64_t reconnects = 0;
    std::optional<storage::SessionId> session;  // the session capturing now (its API id)
    storage::SessionCounters counters;          // with its losses to storage failures
    // What storage says while its commits fail and this board's session loses data; else "".
    std::string storage_error;
};

// A change worth telling the world: a link state, a session starting or ending.
struct BoardEvent {
    std::string board;
    std::string kind;   // link | session_started | session_stopped
    std::string state;  // link: the new state
    std::string reason;
    std::optional<storage::SessionId> session;
};

// The session's state as of one publish (small: copied on every publish).
struct LiveState {
    std::string board;
    std::string link_state;  // connecting | connected | disconnected | finished | stopped
    storage::SessionCounters counters;
    std::vector<protocol::Record> newest_arcs;         // oldest first
    std::vector<storage::ConsoleLine> newest_console;  // itm; oldest first
    std::shared_ptr<const gmon::Symbolizer> elf;       // null: addresses only
    std::optional<gmon::CodeRange> announced_range;    // a framed target's text range
    std::string storage_error;                         // while storage's commits fail; else ""
};

}  // namespace rackprof::daemon::capture
