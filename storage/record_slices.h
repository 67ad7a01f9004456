// Record slices (schema v11): the sums of a run of whole record_batches rows, so that a
// session's profile over a receive-time window adds the slices wholly inside the window and
// decodes only the rows the slices leave out (those at its edges, and rows no slice holds:
// written before v11, or after a rolled-back transaction), and stays exact.
//
// Slices nest: level 1 holds consecutive commits' records until it reaches kSliceRecords
// records; level k + 1 spans kSliceFanout consecutive slices of level k (its sums are theirs,
// read back when it closes, so only level 1's sums are held in memory). A window is covered by
// the largest slices inside it first: a few per level.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "gmon/aggregate.h"
#include "storage/chunk_blocks.h"
#include "storage/sqlite.h"

namespace rackprof::storage {

inline constexpr std::uint64_t kSliceRecords = 64u << 10;
inline constexpr int kSliceFanout = 4;
inline constexpr int kSliceLevels = 4;

// Where a slice's records are: record_batches rows with seq in [first_seq, last_seq], chunks
// received within [min_ns, max_ns].
struct SliceSpan {
    std::int64_t first_seq = 0;
    std::int64_t last_seq = 0;
    std::int64_t min_ns = 0;
    std::int64_t max_ns = 0;
    std::uint64_t records = 0;
    void extend(const SliceSpan& more);
};

// Builds a session's slices as its rows are written (the storage writer's connection). What it
// holds in memory is only good while every transaction it saw commits: after a rollback call
// forget_all() (the rows it holds may not be there); the rows already written stay unsliced
// and are decoded when asked for.
class SliceBuilder {
  public:
    explicit SliceBuilder(Database& db) : db_(db) {}
    // Rows just written for `session` (in the current transaction): their span and sums.
    void add(std::int64_t session, const SliceSpan& rows, const gmon::Aggregate& sums);
    // The session's open slices are written as they are (at its end).
    void finish(std::int64_t session);
    void forget(std::int64_t session) { open_.erase(session); }
    void forget_all() { open_.clear(); }

  private:
    struct Level {
        SliceSpan span;
        int children = 0;  // slices of the level below in it (level 1: unused)
        bool empty() const { return span.records == 0 && children == 0; }
    };
    struct Open {
        gmon::Aggregate sums;  // level 1's
        std::array<Level, kSliceLevels> levels;
    };
    void close(std::int64_t session, Open& open, int level);
    void write(std::int64_t session, int level, const SliceSpan& span,
               const std::vector<std::uint8_t>& sums);
    std::vector<std::uint8_t> sums_of_children(std::int64_t session, int level,
                                               const SliceSpan& span);

    Database& db_;
    std::map<std::int64_t, Open> open_;
};

// A stored slice chosen to answer a window.
struct StoredSlice {
    int level = 0;
    std::int64_t first_seq = 0;
    std::int64_t last_seq = 0;
    std::int64_t rowid = 0;
};

// The session's slices wholly inside [from_ns, to_ns], largest first, none inside another:
// sorted by first_seq.
std::vector<StoredSlice> slices_inside(Database& db, std::int64_t session, std::int64_t from_ns,
                                       std::int64_t to_ns);
// Record rows by seq, first..last inclusive.
struct SeqRange {
    std::int64_t first = 0;
    std::int64_t last = 0;
};
// The seq ranges of the rows a window must still decode, given the slices chosen for it
// (slices_inside): rows of level-1 slices that overlap the window without being inside a
// chosen slice, and rows no slice holds. Rows of slices wholly outside the window are left out
// unread (a row's last_ns comes after its blob: testing it reads the whole blob).
std::vector<SeqRange> ranges_to_decode(Database& db, std::int64_t session, std::int64_t from_ns,
                                       std::int64_t to_ns, const std::vector<StoredSlice>& chosen);
// A window's sums as its slices and the rows at its edges are added. Its PCs lie in the
// firmware's text and each slice's come sorted, so they are added into an array by address
// (two-byte slots over the slices' PC range, up to kMaxSlots of them): a walk through memory,
// where a hash table of many PCs grows by rehashing and must then be sorted for the profile.
// They come out sorted (Aggregate::adopt_sorted_pcs). Arcs, odd PCs and PCs beyond the array go
// into tables; a PC in both is summed, so the answer is the same whatever the order.
//
// A slice's block is decoded straight into the array, a run of PCs at a time (no vectors of
// the block's counts). take() leaves the array zeroed (it clears only the slots it hands out)
// and keeps it, and the decompression buffer, for the next window if they are at most
// kKeptSlots / kKeptPayload: a reader connection keeps one WindowSums (SessionStore), so its
// next window writes to memory already mapped instead of faulting fresh pages in.
class WindowSums {
  public:
    static constexpr std::uint64_t kMaxSlots = std::uint64_t{1} << 22;   // 8 MiB of text
    static constexpr std::uint64_t kKeptSlots = std::uint64_t{1} << 20;  // 8 MiB of counts
    static constexpr std::size_t kKeptPayload = std::size_t{4} << 20;

    void add_slice(Database& db, const StoredSlice& slice);
    // A sums block (record_slices.sums); throws StorageError for a damaged one.
    void add_block(std::span<const std::uint8_t> blob);
    void add(const SumsBlock& sums);
    void add(std::span<const protocol::Record> records);
    void add_pc(std::uint64_t pc, std::uint64_t count) {
        const std::uint64_t slot = (pc - low_) >> 1;
        if (pc >= low_ && ((pc - low_) & 1) == 0 && slot < slots_) {
            counts_[slot] += count;
            present_[slot >> 6] |= std::uint64_t{1} << (slot & 63);
        } else {
            other_pcs_.add_pc(pc, count);
        }
    }
    // The window's sums; this is empty again afterwards.
    gmon::Aggregate take();
    // The slots the array has room for (zeroed while none is in use): what a reader keeps.
    std::size_t slots() const { return counts_.size(); }

  private:
    // Makes the array hold [low, high] if it stays within kMaxSlots; whether it holds them.
    bool cover(std::uint64_t low, std::uint64_t high);
    // Sorted PCs (a run of a block): into the array, those it cannot hold into the table.
    void add_sorted(std::span<const gmon::PcCount> pcs);

    std::uint64_t low_ = 0;               // the PC of slot 0 (even)
    std::uint64_t slots_ = 0;             // the slots in use: 0 until a window places the array
    std::vector<std::uint64_t> counts_;   // by (pc - low_) / 2
    std::vector<std::uint64_t> present_;  // a bit per slot: that PC was added (even with 0)
    gmon::Aggregate sums_;                // the arcs
    gmon::Aggregate other_pcs_;           // PCs the array does not hold
    std::vector<std::uint8_t> payload_;   // the block being read, decompressed
};

}  // namespace rackprof::storage
