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

// The chunks of the last row read, handed out in slices across pages: what a page does not
// take waits here for the next one (at most one row).
template <typename Chunk>
struct RowSlices {
    std::deque<Chunk> chunks;
    std::size_t offset = 0;  // units of chunks.front() already handed out
    std::int64_t after = -1;  // the last row read: the next page reads after it

    // Hands up to `budget` units to take(chunk, offset, n), reading the next row with
    // read_row(*this) (which appends its chunks and moves `after`) whenever none is left.
    // `units(chunk)` is a chunk's size. Returns the units handed out; 0 at the end.
    template <typename ReadRow, typename Units, typename Take>
    std::size_t take_up_to(std::size_t budget, ReadRow read_row, Units units, Take take) {
        std::size_t taken = 0;
        while (taken < budget) {
            if (chunks.empty()) {
                read_row(*this);
                offset = 0;
                if (chunks.empty()) break;
            }
            const Chunk& chunk = chunks.front();
            const std::size_t n = std::min(budget - taken, units(chunk) - offset);
            if (n > 0) take(chunk, offset, n);
            taken += n;
            offset += n;
            if (offset == units(chunk)) {
                chunks.pop_front();
                offset = 0;
            }
        }
        return taken;
    }
};

template <typename OpenStore>
gmon::RawPages raw_pages(OpenStore open_store, std::int64_t session) {
    using Bytes = std::vector<std::uint8_t>;
    return [open_store, session,
            left = RowSlices<Bytes>{}]() mutable -> std::optional<std::string> {
        auto store = open_store();
        std::string out;
        left.take_up_to(
            kPageBytes,
            [&](RowSlices<Bytes>& slices) {
                for (auto& row : store->chunk_page(session, slices.after, 1)) {
                    slices.chunks.push_back(std::move(row.bytes));
                    slices.after = row.seq;
                }
            },
            [](const Bytes& chunk) { return chunk.size(); },
            [&](const Bytes& chunk, std::size_t at, std::size_t n) {
                out.append(reinterpret_cast<const char*>(chunk.data() + at), n);
            });
        if (out.empty()) {
            check_not_pruned(store, session);
            return std::nullopt;
        }
        return out;
    };
}

template <typename OpenStore>
gmon::RecordPages record_pages(OpenStore open_store, std::int64_t session) {
    using Batch = SessionStore::BatchRow;
    return [open_store, session, left = RowSlices<Batch>{}]() mutable
           -> std::optional<std::vector<gmon::RecordBatch>> {
        auto store = open_store();
        std::vector<gmon::RecordBatch> out;
        left.take_up_to(
            kPageRecords,
            [&](RowSlices<Batch>& slices) {
                for (auto& row : store->batch_page(session, slices.after, 1)) {
                    slices.after = row.seq;
                    slices.chunks.push_back(std::move(row));
                }
            },
            [](const Batch& chunk) { return chunk.records.size(); },
            [&](const Batch& chunk, std::size_t at, std::size_t n) {
                const auto from = chunk.records.begin() + static_cast<std::ptrdiff_t>(at);
                out.push_back({chunk.received_ns, {from, from + static_cast<std::ptrdiff_t>(n)}});
            });
        if (out.empty()) {
            check_not_pruned(store, session);
            return std::nullopt;
        }
        return out;
    };
}

}  // namespace rackprof::storage
