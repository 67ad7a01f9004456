// Selections of stored sessions merged into one profile input, board by board, so that the
// fleet's profile and each board's share (the spread) come from one pass over the aggregates.
// Merges of finished sessions are kept: they cannot change, and a fleet's sessions are more
// than the aggregate cache holds.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "daemon/capture/capture_service.h"
#include "daemon/service/fleet_source.h"
#include "daemon/service/rack_service.h"
#include "daemon/service/selection.h"
#include "daemon/service/stored_aggregates.h"
#include "daemon/service/symbolizer_cache.h"
#include "gmon/board_spread.h"
#include "gmon/export.h"
#include "storage/reader_pool.h"

namespace rackprof::daemon::service {

// A selection merged once: its input, its profile (null when no ELF names functions) and each
// board's samples by function (the spread).
struct MergedSelection {
    std::shared_ptr<const gmon::ExportInput> input;
    std::shared_ptr<const gmon::Profile> profile;
    std::vector<gmon::BoardSamples> boards;
    // A fleet's merge by build: `boards` carry their sessions only; the spread reads their
    // sums from the fleet store (SelectionMerges::spread_boards).
    bool fleet_boards = false;
    // The last spread's boards read for it, and for which functions: a merge is kept only
    // while its sessions cannot change, and neither can these.
    mutable std::mutex spread_mutex;
    mutable std::vector<std::string> spread_functions;
    mutable std::vector<gmon::BoardSamples> spread_boards;
};

class SelectionMerges {
  public:
    // `by_name_dir`: where a by-name merge's layout ELF is written.
    SelectionMerges(capture::CaptureService& capture, storage::ReaderPool& readers,
                    StoredAggregates& aggregates, SymbolizerCache& elves,
                    std::filesystem::path by_name_dir)
        : capture_(capture),
          readers_(readers),
          aggregates_(aggregates),
          elves_(elves),
          by_name_dir_(std::move(by_name_dir)) {}

    // From here on, selections come from the fleet store. Call before serving.
    void use_fleet(std::shared_ptr<FleetSource> fleet) { fleet_ = std::move(fleet); }

    // Throws ServiceError as select_sessions and merged_input do.
    std::shared_ptr<const MergedSelection> merged(const Selection& selection);

    // The boards for a spread over `functions`: a fleet's read from the fleet store for them.
    std::vector<gmon::BoardSamples> spread_boards(const MergedSelection& merged,
                                                  const std::vector<std::string>& functions);

    // The merged profile; ServiceError kNoElf when no session's ELF loads.
    static const gmon::Profile& profile_of(const MergedSelection& merged);

  private:
    std::vector<storage::SessionInfo> selected(const Selection& selection);
    std::shared_ptr<gmon::ExportInput> merged_input_of(
        const std::vector<storage::SessionInfo>& sessions, bool by_name,
        const std::function<std::shared_ptr<const gmon::Aggregate>(std::int64_t)>& aggregate_of);
    std::shared_ptr<const gmon::CallingContextTree> merged_calling_context(
        const std::vector<storage::SessionInfo>& sessions, bool by_name);
    std::shared_ptr<const gmon::CallingContextTree> merged_task_trees(
        const std::map<std::int64_t, TaskSlice>& slices, bool by_name);
    std::shared_ptr<const MergedSelection> merge(const std::vector<storage::SessionInfo>& sessions,
                                                 bool by_name,
                                                 const std::vector<std::string>& tasks);
    std::shared_ptr<const MergedSelection> merge_in_fleet(
        const std::vector<storage::SessionInfo>& sessions);
    std::vector<gmon::BoardSamples> fleet_spread_boards(const MergedSelection& merged,
                                                        const std::vector<std::string>& functions);

    capture::CaptureService& capture_;
    storage::ReaderPool& readers_;
    StoredAggregates& aggregates_;
    SymbolizerCache& elves_;
    std::filesystem::path by_name_dir_;
    std::shared_ptr<FleetSource> fleet_;  // null: selections are this bench's own
    std::mutex kept_mutex_;
    std::list<std::pair<std::string, std::shared_ptr<const MergedSelection>>> kept_;
};

}  // namespace rackprof::daemon::service
