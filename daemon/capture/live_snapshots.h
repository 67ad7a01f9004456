// What the capture side publishes about each capturing session, at its own pace (every
// publish period, on the capture thread): counters, link state, the newest arcs and console
// lines, the firmware it is named by, and the live aggregate's changes since the last publish.
// Readers (the WebSocket feed hub) take the newest snapshot from any thread: they never wait
// on the capture thread, never reopen SQLite, and see by `version` whether the aggregate
// changed, so a profile is computed again only when there is something new.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "daemon/capture/board_status.h"
#include "gmon/aggregate.h"
#include "gmon/profile_pipeline.h"
#include "gmon/symbolizer.h"
#include "protocol/record.h"
#include "storage/session_store.h"
#include "storage/storage_writer.h"

namespace rackprof::daemon::capture {

struct LiveSnapshot {
    storage::SessionId session = 0;
    LiveState state;
    // The whole live aggregate; a new object whenever it changed (readers may keep it).
    std::shared_ptr<const gmon::Aggregate> aggregate;
    std::uint64_t version = 0;  // goes up with every change of `aggregate`
};

class LiveSnapshots {
  public:
    // Capture thread: the state now and the records aggregated since the last publish. Costs
    // the size of the delta, never of the whole aggregate.
    void publish(storage::SessionId session, LiveState state, const gmon::Aggregate& delta);
    // The session ended: its snapshot goes.
    void retire(storage::SessionId session);
    // Any thread: the newest snapshot (the aggregate rebuilt here, off the capture thread, only
    // when changes arrived since the last call).
    std::optional<LiveSnapshot> snapshot(storage::SessionId session);
    std::vector<storage::SessionId> sessions();

  private:
    struct Entry {
        LiveState state;
        gmon::Aggregate pending;  // published changes not yet folded into `whole`
        bool changed = false;
        std::shared_ptr<const gmon::Aggregate> whole = std::make_shared<gmon::Aggregate>();
        std::uint64_t version = 0;
    };
    std::mutex mutex_;       // guards entries_; held only for moves and small copies
    std::mutex fold_mutex_;  // one reader folds changes at a time
    std::map<storage::SessionId, Entry> entries_;
};

}  // namespace rackprof::daemon::capture
