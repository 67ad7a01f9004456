// The one bench's rack: the capture service on this machine and its SQLite database. Writes go
// through daemon::CaptureService; reads share a small pool of read-only connections.
#pragma once

#include <filesystem>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "daemon/capture/capture_service.h"
#include "daemon/ingest/capture_import.h"
#include "daemon/service/fleet_source.h"
#include "daemon/service/live_views.h"
#include "daemon/service/rack_service.h"
#include "gmon/board_spread.h"
#include "gmon/elf_fit.h"
#include "gmon/export.h"
#include "gmon/profile_pipeline.h"
#include "gmon/symbolizer.h"
#include "storage/reader_pool.h"

namespace rackprof::daemon::service {

// Firmware images by path, loaded once and shared while their file is unchanged; the 16 most
// recently used are kept.
class SymbolizerCache {
  public:
    explicit SymbolizerCache(std::size_t capacity = 16) : capacity_(capacity) {}
    // Throws what gmon::Symbolizer::load throws.
    std::shared_ptr<const gmon::Symbolizer> get(const std::string& path);

  private:
    struct Entry {
        std::string path;
        std::filesystem::file_time_type modified;
        std::shared_ptr<const gmon::Symbolizer> elf;
    };
    std::size_t capacity_;
    std::mutex mutex_;
    std::vector<Entry> entries_;  // most recently used first
};

// Profiles of whole sessions, kept while the aggregate they were computed from is still the one
// served (a commit replaces it, which ends the entry) and the ELF is the same; the 4 most recently
// used. Computing a profile of 10^5 arcs takes tens of milliseconds, serving a kept one nothing.
class ProfileCache {
  public:
    explicit ProfileCache(std::size_t capacity = 4) : capacity_(capacity) {}
    // A session's profile, and how its capture fits the ELF's code (gmon/elf_fit.h), both
    // computed once per aggregate.
    struct Computed {
        gmon::Profile profile;
        gmon::ElfFit fit;
    };
    static Computed compute(const gmon::ProfileSource& source);
    // Throws what gmon::profile_of throws.
    std::shared_ptr<const Computed> get(std::int64_t session, const gmon::ProfileSource& source);

  private:
    struct Entry {
        std::int64_t session = 0;
        std::weak_ptr<const gmon::Aggregate> aggregate;
        std::weak_ptr<const gmon::Symbolizer> elf;
        std::optional<gmon::CodeRange> announced_range;
        std::shared_ptr<const Computed> profile;
        // The aggregate cache merges a commit's delta into its aggregate in place when no
        // reader holds it: the same pointer then holds more counts than this profile.
        std::uint64_t total_calls = 0;
        std::uint64_t total_samples = 0;

        bool serves(std::int64_t id, const gmon::ProfileSource& source) const;
    };
    std::size_t capacity_;
    std::mutex mutex_;
    std::vector<Entry> entries_;  // most recently used first
};

class LocalRack : public RackService {
  public:
    LocalRack(capture::CaptureService& capture, std::filesystem::path storage_path,
              std::size_t readers = 4);

    // From here on, selections (profiles, exports, diffs) are answered from the fleet store:
    // every bench's pushed sessions, merged by PostgreSQL. Call before serving.
    // `status`: the pusher's state, shown in readiness as "fleet".
    void use_fleet(std::shared_ptr<FleetSource> fleet, std::function<nlohmann::json()> status) {
        fleet_ = std::move(fleet);
        fleet_status_ = std::move(status);
    }

    nlohmann::json readiness() override;
    nlohmann::json boards() override;
    RackMetrics metrics() override;
    nlohmann::json board(const std::string& name) override;
    nlohmann::json add_board(const nlohmann::json& body) override;
    nlohmann::json update_board(const std::string& name, const nlohmann::json& body) override;
    void remove_board(const std::string& name) override;
    nlohmann::json start_session(const std::string& board) override;
    nlohmann::json stop_session(std::int64_t id) override;
    void delete_session(std::int64_t id) override;
    nlohmann::json sessions(const SessionFilter& filter) override;
    nlohmann::json session(std::int64_t id) override;
    std::string console(std::int64_t id, int tail) override;
    std::string profile(std::int64_t id, const TimeWindow& window,
                        const ProfileOptions& options) override;
    std::string selection_profile(const Selection& selection,
                                  const ProfileOptions& options) override;
    Export open_selection_export(const Selection& selection, const std::string& format) override;
    DiffResult diff(const Selection& a, const Selection& b, const DiffRequest& request) override;
    Export open_export(std::int64_t id, const std::string& format,
                       const TimeWindow& window) override;
    Stored put_firmware(const std::filesystem::path& elf) override;
    nlohmann::json attach_firmware(std::int64_t session, const std::string& firmware_id) override;
    nlohmann::json import_session(const std::filesystem::path& file,
                                  const ImportParameters& parameters) override;
    std::optional<LiveView> live(std::int64_t id) override;

  private:
    storage::SessionInfo stored_session(std::int64_t id);
    std::string storage_error();  // what storage says while its commits fail; else ""
    std::filesystem::path firmware_dir() const;
    config::BoardConfig board_from_body(nlohmann::json body, const std::string& name);
    void check_api_board(const config::BoardConfig& board) const;
    nlohmann::json import_gmon(const std::filesystem::path& file, const ingest::ImportSpec& import,
                               storage::NewSession spec);
    nlohmann::json sync_check_of(const gmon::Profile& fixed, std::int64_t reference);
    nlohmann::json import_tiva(const std::filesystem::path& file, storage::NewSession spec);
    nlohmann::json import_capture(const std::filesystem::path& file,
                                  const ingest::ImportSpec& import, storage::NewSession spec);
    // The sessions a selection names, and those merged into one input (no raw bytes, no
    // records).
    std::vector<storage::SessionInfo> selected(const Selection& selection);
    // `by_name`: sessions of different builds matched by function name (their layout's ELF
    // is kept in the firmware store's folder).
    std::shared_ptr<gmon::ExportInput> merged(
        const std::vector<storage::SessionInfo>& sessions, bool by_name,
        const std::function<std::shared_ptr<const gmon::Aggregate>(std::int64_t)>& aggregate_of);
    std::shared_ptr<const gmon::CallingContextTree> merged_calling_context(
        const std::vector<storage::SessionInfo>& sessions, bool by_name);
    // A selection merged once: its input, its profile (null when no ELF names functions) and
    // each board's samples by function (the spread). The last few merges of finished sessions
    // are kept: they cannot change, and a fleet's sessions are more than the aggregate cache
    // holds.
    struct MergedSelection {
        std::shared_ptr<const gmon::ExportInput> input;
        std::shared_ptr<const gmon::Profile> profile;
        std::vector<gmon::BoardSamples> boards;
        // A fleet's merge by build: `boards` carry their sessions only; the spread reads their
        // sums from the fleet store (fleet_spread_boards).
        bool fleet_boards = false;
        // The last spread's boards read for it, and for which functions: a merge is kept only
        // while its sessions cannot change, and neither can these.
        mutable std::mutex spread_mutex;
        mutable std::vector<std::string> spread_functions;
        mutable std::vector<gmon::BoardSamples> spread_boards;
    };
    std::vector<gmon::BoardSamples> fleet_spread_boards(const MergedSelection& merged,
                                                        const std::vector<std::string>& functions);
    std::shared_ptr<const MergedSelection> merged_selection(const Selection& selection);
    std::shared_ptr<const MergedSelection> merge(const std::vector<storage::SessionInfo>& sessions,
                                                 bool by_name);
    // The merged profile; kNoElf when no session's ELF loads.
    static const gmon::Profile& profile_of(const MergedSelection& merged);
    std::shared_ptr<gmon::ExportInput> session_input(const storage::SessionInfo& info,
                                                     const TimeWindow& window);
    std::shared_ptr<const gmon::Aggregate> aggregate(std::int64_t id);
    std::shared_ptr<const gmon::Aggregate> aggregate_between(std::int64_t id,
                                                             const TimeWindow& window);

    capture::CaptureService& capture_;
    LiveViews live_views_;
    std::filesystem::path storage_path_;
    storage::ReaderPool readers_;
    SymbolizerCache elves_;
    ProfileCache profiles_;
    std::mutex selections_mutex_;
    std::list<std::pair<std::string, std::shared_ptr<const MergedSelection>>> selections_;
    std::shared_ptr<FleetSource> fleet_;  // null: selections are this bench's own
    std::function<nlohmann::json()> fleet_status_;
};

}  // namespace rackprof::daemon::service
