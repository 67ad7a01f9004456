// The one bench's rack: the capture service on this machine and its SQLite database. Writes go
// through daemon::CaptureService; reads share a small pool of read-only connections. A façade:
// each job (views, firmware, imports, merges, caches) is a class of its own beside it.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>

#include "daemon/capture/capture_service.h"
#include "daemon/service/firmware_store.h"
#include "daemon/service/fleet_source.h"
#include "daemon/service/live_views.h"
#include "daemon/service/profile_cache.h"
#include "daemon/service/rack_service.h"
#include "daemon/service/selection_merges.h"
#include "daemon/service/stored_aggregates.h"
#include "daemon/service/symbolizer_cache.h"
#include "daemon/service/upload_import.h"
#include "gmon/export.h"
#include "storage/reader_pool.h"

namespace rackprof::daemon::service {

class LocalRack : public RackService {
  public:
    LocalRack(capture::CaptureService& capture, std::filesystem::path storage_path,
              std::size_t readers = 4);

    // [sources] roots: where annotations may read source text (none: each ELF's compilation
    // directories). Call before serving.
    void set_source_roots(std::vector<std::filesystem::path> roots) {
        source_roots_ = std::move(roots);
    }

    // From here on, selections (profiles, exports, diffs) are answered from the fleet store:
    // every bench's pushed sessions, merged by PostgreSQL. Call before serving.
    // `status`: the pusher's state, shown in readiness as "fleet".
    void use_fleet(std::shared_ptr<FleetSource> fleet, std::function<nlohmann::json()> status) {
        selections_.use_fleet(std::move(fleet));
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
    Export profile(std::int64_t id, const TimeWindow& window,
                   const ProfileOptions& options) override;
    Export selection_profile(const Selection& selection, const ProfileOptions& options) override;
    Export open_selection_export(const Selection& selection, const std::string& format) override;
    nlohmann::json time_view(std::int64_t id, const std::string& view,
                             const TimeWindow& window) override;
    nlohmann::json annotate(std::int64_t id, const AnnotateRequest& request,
                            const TimeWindow& window) override;
    nlohmann::json selection_annotate(const Selection& selection,
                                      const AnnotateRequest& request) override;
    DiffResult diff(const Selection& a, const Selection& b, const DiffRequest& request) override;
    Export open_export(std::int64_t id, const std::string& format,
                       const TimeWindow& window) override;
    Stored put_firmware(const std::filesystem::path& elf) override;
    nlohmann::json firmware() override { return firmware_.list(); }
    nlohmann::json attach_firmware(std::int64_t session, const std::string& firmware_id) override;
    nlohmann::json import_session(const std::filesystem::path& file,
                                  const ImportParameters& parameters) override;
    std::optional<LiveView> live(std::int64_t id) override;

  private:
    storage::SessionInfo stored_session(std::int64_t id);
    std::string storage_error();  // what storage says while its commits fail; else ""
    nlohmann::json sync_check_of(const gmon::Profile& fixed, const storage::SessionInfo& fixed_info,
                                 std::int64_t reference);
    std::shared_ptr<gmon::ExportInput> session_input(const storage::SessionInfo& info,
                                                     const TimeWindow& window);
    nlohmann::json annotation_of(const gmon::ExportInput& input, const AnnotateRequest& request);
    std::vector<std::filesystem::path> source_roots_;

    capture::CaptureService& capture_;
    LiveViews live_views_;
    std::filesystem::path storage_path_;
    storage::ReaderPool readers_;
    FirmwareStore firmware_;
    SymbolizerCache elves_;
    ProfileCache profiles_;
    StoredAggregates aggregates_;
    SelectionMerges selections_;
    UploadImport imports_;
    std::function<nlohmann::json()> fleet_status_;
};

}  // namespace rackprof::daemon::service
