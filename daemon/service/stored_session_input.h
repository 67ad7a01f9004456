// One stored session as the export pipeline's input. The daemon's API and `rackprof convert
// --db --session` both make it here, so the two export one session identically.
#pragma once

#include <cstdint>
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include "daemon/ingest/wire_settings.h"
#include "gmon/calling_context.h"
#include "gmon/export.h"
#include "gmon/symbolizer.h"
#include "protocol/swo_decoder.h"
#include "storage/session_pages.h"
#include "storage/session_store.h"

namespace rackprof::daemon::service {

// What the caller read for the session; the rest comes from its row.
struct StoredSessionData {
    std::shared_ptr<const gmon::Aggregate> aggregate;  // whole, or a time window's; null: none
    std::shared_ptr<const gmon::Symbolizer> elf;       // null: addresses only
    std::shared_ptr<const gmon::CallingContextTree> calling_context;  // null: none measured
};

// An SWO capture's exception trace as the report's "source" lists it.
nlohmann::json exceptions_json(const std::map<std::uint16_t, protocol::ExceptionStats>& counts);

// The report's "source" for a stored session: the session (id, board, state, gaps, records
// lost), its board, wire settings, decoder counters, the target's build-id, an SWO session's
// exception trace, and the ELF that names its functions.
nlohmann::json stored_session_summary(const storage::SessionInfo& info,
                                      const gmon::Symbolizer* elf);

// The profile source (aggregate, ELF, the target's text range, stored histogram shapes), the
// summary and the calling-context tree; no raw bytes or records.
std::shared_ptr<gmon::ExportInput> stored_session_input(const storage::SessionInfo& info,
                                                        StoredSessionData data);

// With its raw bytes and records, paged from `open_store` (see storage/session_pages.h).
template <typename OpenStore>
std::shared_ptr<gmon::ExportInput> stored_session_input(const storage::SessionInfo& info,
                                                        StoredSessionData data,
                                                        OpenStore open_store) {
    auto input = stored_session_input(info, std::move(data));
    input->raw = storage::raw_pages(open_store, info.id);
    input->records = storage::record_pages(open_store, info.id);
    // A capture's bytes decode again; an imported gmon.out or Tiva report has none of its own.
    if (!info.raw_pruned && (info.spec.format == "bin" || info.spec.format == "hex"))
        input->wire = ingest::wire_spec_of(info.spec);
    return input;
}

}  // namespace rackprof::daemon::service
