// A stored session's raw chunks and record batches as the export seam pulls them: a page at a
// time, in order, so an export is never whole in memory. `open_store` is called once per page
// and returns something that points at a SessionStore (a shared store, or a lease from a
// ReaderPool, so a slow reader holds no connection between pages).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gmon/export.h"
#include "storage/retention.h"
#include "storage/session_store.h"

namespace rackprof::storage {

inline constexpr int kPageRows = 64;

// At a stream's end: if retention began pruning the session meanwhile, the stream may have
// missed rows, so it ends with an error (the reason), never as a shorter export.
template <typename Store>
void check_not_pruned(Store&& store, std::int64_t session) {
    const auto info = store->session(session);
    if (info && info->raw_pruned) throw StorageError(raw_pruned_reason(*info->raw_pruned));
}

template <typename OpenStore>
gmon::RawPages raw_pages(OpenStore open_store, std::int64_t session) {
    return [open_store, session, after = std::int64_t{-1}]() mutable -> std::optional<std::string> {
        std::string out;
        for (const auto& row : open_store()->chunk_page(session, after, kPageRows)) {
            out.append(reinterpret_cast<const char*>(row.bytes.data()), row.bytes.size());
            after = row.seq;
        }
        if (out.empty()) {
            check_not_pruned(open_store(), session);
            return std::nullopt;
        }
        return out;
    };
}

template <typename OpenStore>
gmon::RecordPages record_pages(OpenStore open_store, std::int64_t session) {
    return [open_store, session,
            after = std::int64_t{-1}]() mutable -> std::optional<std::vector<gmon::RecordBatch>> {
        std::vector<gmon::RecordBatch> out;
        for (auto& row : open_store()->batch_page(session, after, kPageRows)) {
            out.push_back({row.received_ns, std::move(row.records)});
            after = row.seq;
        }
        if (out.empty()) {
            check_not_pruned(open_store(), session);
            return std::nullopt;
        }
        return out;
    };
}

}  // namespace rackprof::storage
