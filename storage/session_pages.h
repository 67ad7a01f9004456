// A stored session's raw chunks and record batches as the export seam pulls them: a page at a
// time, in order, so an export is never whole in memory. `open_store` is called once per page
// and returns something that points at a SessionStore (a shared store, or a lease from a
// ReaderPool, so a slow reader holds no connection between pages).
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "gmon/export.h"
#include "storage/retention.h"
#include "storage/session_store.h"

namespace rackprof::storage {

// A page is bounded by size, not by rows: about kPageBytes of raw bytes, or kPageRecords
// records (under 1 MiB of NDJSON), whatever a row holds (an import's rows hold 1 MiB of raw
// bytes or 64 Ki records each, a capture's a few hundred KiB). Each page is one HTTP chunk and
// a client has one in flight, so a reader that stops reading pins about a page and the rest
// of one row (the page's closure keeps what it has not handed out yet), never many rows.
inline constexpr std::size_t kPageBytes = std::size_t{1} << 20;
inline constexpr std::size_t kPageRecords = std::size_t{8} << 10;

// At a stream's end: if retention began pruning the session meanwhile, the stream may have
// missed rows, so it ends with an error (the reason), never as a shorter export.
template <typename Store>
void check_not_pruned(Store&& store, std::int64_t session) {
    const auto info = store->session(session);
    if (info && info->raw_pruned) throw StorageError(raw_pruned_reason(*info->raw_pruned));
}

template <typename OpenStore>
gmon::RawPages raw_pages(OpenStore open_store, std::int64_t session) {
    struct Left {  // the last row read: its chunks' bytes not yet handed out
        std::deque<std::vector<std::uint8_t>> chunks;
        std::size_t offset = 0;  // into chunks.front()
        std::int64_t after = -1;
    };
    return [open_store, session, left = Left{}]() mutable -> std::optional<std::string> {
        auto store = open_store();
        std::string out;
        while (out.size() < kPageBytes) {
            if (left.chunks.empty()) {
                for (auto& row : store->chunk_page(session, left.after, 1)) {
                    left.chunks.push_back(std::move(row.bytes));
                    left.after = row.seq;
                }
                left.offset = 0;
                if (left.chunks.empty()) break;
            }
            const auto& chunk = left.chunks.front();
            const std::size_t take = std::min(kPageBytes - out.size(), chunk.size() - left.offset);
            out.append(reinterpret_cast<const char*>(chunk.data() + left.offset), take);
            left.offset += take;
            if (left.offset == chunk.size()) {
                left.chunks.pop_front();
                left.offset = 0;
            }
        }
        if (out.empty()) {
            check_not_pruned(store, session);
            return std::nullopt;
        }
        return out;
    };
}

template <typename OpenStore>
gmon::RecordPages record_pages(OpenStore open_store, std::int64_t session) {
    struct Left {  // the last row read: its chunks' records not yet handed out
        std::deque<SessionStore::BatchRow> chunks;
        std::size_t offset = 0;  // into chunks.front().records
        std::int64_t after = -1;
    };
    return [open_store, session,
            left = Left{}]() mutable -> std::optional<std::vector<gmon::RecordBatch>> {
        auto store = open_store();
        std::vector<gmon::RecordBatch> out;
        std::size_t records = 0;
        while (records < kPageRecords) {
            if (left.chunks.empty()) {
                for (auto& row : store->batch_page(session, left.after, 1)) {
                    left.after = row.seq;
                    left.chunks.push_back(std::move(row));
                }
                left.offset = 0;
                if (left.chunks.empty()) break;
            }
            auto& chunk = left.chunks.front();
            const std::size_t take =
                std::min(kPageRecords - records, chunk.records.size() - left.offset);
            const auto from = chunk.records.begin() + static_cast<std::ptrdiff_t>(left.offset);
            if (take > 0)
                out.push_back({chunk.received_ns, {from, from + static_cast<std::ptrdiff_t>(take)}});
            records += take;
            left.offset += take;
            if (left.offset == chunk.records.size()) {
                left.chunks.pop_front();
                left.offset = 0;
            }
        }
        if (out.empty()) {
            check_not_pruned(store, session);
            return std::nullopt;
        }
        return out;
    };
}

}  // namespace rackprof::storage
