// The fleet store as a source of selections: the sessions a selection names on every bench
// that pushed to it, and their aggregates summed by PostgreSQL. LocalRack (with [fleet] url)
// and `rackprof fleet` feed these into the same merge (merged_input) as local sessions, so
// every profile view, export format and diff works unchanged.
#pragma once

#include <filesystem>
#include <list>
#include <memory>
#include <mutex>
#include <vector>

#include "daemon/service/selection.h"
#include "gmon/aggregate.h"
#include "storage/fleet/fleet_store.h"

namespace rackprof::daemon::service {

class FleetSource {
  public:
    // `elf_dir`: where firmware images stored in the fleet are written to be symbolized.
    // Connects on first use (and again after a failure).
    FleetSource(storage::fleet::FleetConnection connection, std::filesystem::path elf_dir);

    // The selection's sessions in id order, boards named "bench/board", each one's ELF (from
    // the fleet's firmware table) written to elf_dir and named by spec.elf_path. ServiceError:
    // kNotFound (no session, an id that does not exist), kBadRequest (too many: counted
    // before anything is loaded), kNotReady (the fleet store cannot be reached), kBadUpstream
    // (it answered with an error or a row rackprof cannot read).
    std::vector<storage::SessionInfo> select(const Selection& selection);
    // The sessions' aggregates added, by the server. kNotReady, kBadUpstream as above.
    std::shared_ptr<const gmon::Aggregate> sum(const std::vector<std::int64_t>& session_ids);
    // Per board of the sessions: calls, samples and samples in the functions starting at
    // `functions` (FleetStore::board_sums). kNotReady, kBadUpstream as above.
    std::vector<storage::fleet::FleetBoardSum> board_sums(
        const std::vector<std::int64_t>& session_ids, const gmon::FunctionIndex& index,
        const std::vector<std::uint64_t>& functions);

  private:
    template <typename F>
    auto with_store(F&& f);

    storage::fleet::FleetConnection connection_;
    std::filesystem::path elf_dir_;
    std::mutex mutex_;  // one libpq connection: one query at a time
    std::unique_ptr<storage::fleet::FleetStore> store_;
    struct KeptSelection {
        std::string key;  // the selection (selection_key)
        std::string fingerprint;
        std::vector<storage::SessionInfo> sessions;
    };
    std::list<KeptSelection> kept_;  // the last few, newest first; under mutex_
};

// The whole selection as one profile input, merged in SQL (the `rackprof fleet` commands').
std::shared_ptr<gmon::ExportInput> fleet_input(FleetSource& fleet, const Selection& selection);

}  // namespace rackprof::daemon::service
