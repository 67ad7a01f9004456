// What a capturing session's live aggregate shows (its top functions and busiest arcs), for the
// live feeds: computed from the capture side's newest snapshot, and again only when the
// aggregate or the firmware changed, however many clients watch.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "daemon/capture/live_snapshots.h"
#include "daemon/service/rack_types.h"

namespace rackprof::daemon::service {

class LiveViews {
  public:
    // The view of `snapshot` (none: the session is not capturing).
    std::optional<LiveView> view_of(std::int64_t session,
                                    std::optional<capture::LiveSnapshot> snapshot);

  private:
    static constexpr std::size_t kMaxSessions = 4096;
    struct Computed {
        std::uint64_t version = 0;
        std::shared_ptr<const gmon::Symbolizer> elf;
        std::vector<LiveFunction> top_functions;
        std::vector<gmon::ArcCount> busiest_arcs;
    };
    std::mutex mutex_;  // guards computed_; held only to look up and store
    std::map<std::int64_t, std::shared_ptr<const Computed>> computed_;
};

}  // namespace rackprof::daemon::service
