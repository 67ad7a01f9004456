// Uploaded files made stored sessions: a capture (decoded as a board's bytes would be), a
// gmon.out or a Tiva binned PC report, stored a piece at a time as it is read, so an upload of
// any size is never whole in memory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "daemon/capture/capture_service.h"
#include "daemon/ingest/capture_import.h"
#include "daemon/service/firmware_store.h"
#include "daemon/service/rack_service.h"
#include "daemon/service/symbolizer_cache.h"

namespace rackprof::daemon::service {

class UploadImport {
  public:
    UploadImport(capture::CaptureService& capture, const FirmwareStore& firmware,
                 SymbolizerCache& elves)
        : capture_(capture), firmware_(firmware), elves_(elves) {}

    // The stored sessions' ids: one, or one per report of a Tiva file (reports=each, the
    // default: each report is a minute of its own, compared and windowed as sessions are;
    // reports=sum: their sum, one session). `query`: format, board, firmware (an uploaded
    // image's id), the wire settings a board has (protocol, addr_bytes, the itm keys), and
    // reports. Throws ServiceError: kNotReady while storage fails, kBadRequest for bad
    // settings, kNotFound for unknown firmware, kBadGmon for a damaged gmon.out or Tiva report,
    // kNoRecords for a capture that decodes to nothing.
    std::vector<std::int64_t> import(const std::filesystem::path& file,
                                     const ImportParameters& query);

  private:
    std::int64_t import_gmon(const std::filesystem::path& file, const ingest::ImportSpec& import,
                             storage::NewSession spec);
    std::vector<std::int64_t> import_tiva(const std::filesystem::path& file, bool summed,
                                          const storage::NewSession& spec);
    std::int64_t store_tiva(const gmon::TivaReport& report, std::uint64_t bytes_in,
                            storage::NewSession spec);
    std::int64_t import_capture(const std::filesystem::path& file, const ingest::ImportSpec& import,
                                storage::NewSession spec);

    capture::CaptureService& capture_;
    const FirmwareStore& firmware_;
    SymbolizerCache& elves_;
};

}  // namespace rackprof::daemon::service
