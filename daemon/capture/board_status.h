// A board as the capture side reports it: its link state, its session, its events. Plain data
// (no Asio), shown by the rack service to web/.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "storage/storage_writer.h"  // SessionHandle, SessionCounters

namespace rackprof::daemon {

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
