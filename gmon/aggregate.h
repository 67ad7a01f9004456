// Aggregate: arc -> count and PC -> count, with wide integers. What a session accumulates,
// what gmon.out is written from, and what merges across sessions, boards and a fleet.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "gmon/count_table.h"
#include "protocol/record.h"
#include "protocol/record_sink.h"

namespace rackprof::gmon {

struct ArcCount {
    std::uint64_t from_pc = 0;
    std::uint64_t self_pc = 0;
    std::uint64_t count = 0;
    friend bool operator==(const ArcCount&, const ArcCount&) = default;
};

struct PcCount {
    std::uint64_t pc = 0;
    std::uint64_t count = 0;
    friend bool operator==(const PcCount&, const PcCount&) = default;
};

class Aggregate {
  public:
    void add(std::span<const protocol::Record> records);
    void add_arc(std::uint64_t from_pc, std::uint64_t self_pc, std::uint64_t count);
    void add_pc(std::uint64_t pc, std::uint64_t count);
    void merge(const Aggregate& other);
    // Room for this many distinct arcs and PCs without the tables growing.
    void reserve(std::size_t arcs, std::size_t pcs);
    // PC counts already summed and sorted by address, each PC once, for an aggregate that holds
    // no PCs yet (a time window's, added up by address from record slices): kept as given, so
    // pc_samples() sorts nothing. Adding PCs later moves them into the table first.
    void adopt_sorted_pcs(std::vector<PcCount> pcs);

    // Sorted by address, so output built from them is deterministic.
    std::vector<ArcCount> arcs() const;
    std::vector<PcCount> pc_samples() const;
    // The same without a copy where the PCs are held sorted (adopt_sorted_pcs', a window's
    // 10^5 of them); else sorted into `scratch`. Valid while both are unchanged.
    std::span<const PcCount> pc_samples(std::vector<PcCount>& scratch) const;

    std::uint64_t total_calls() const { return total_calls_; }
    std::uint64_t total_samples() const { return total_samples_; }
    std::size_t distinct_arcs() const { return arcs_.size(); }
    std::size_t distinct_pcs() const { return pcs_.size() + sorted_pcs_.size() + window_.distinct; }
    // Batches counted split by kind (add()'s choice where kinds take turns at random).
    std::uint64_t batches_split() const { return batches_split_; }
    bool empty() const { return arcs_.size() == 0 && distinct_pcs() == 0 && wide_arcs_.empty(); }

    friend bool operator==(const Aggregate& a, const Aggregate& b) {
        return a.arcs() == b.arcs() && a.pc_samples() == b.pc_samples();
    }

  private:
    // The hot code's sampled PCs counted by index, not hashed: a capture's samples land on
    // thousands of PCs of one code region, and an array indexed by address keeps each add a
    // load and a store. Made once the table holds kWindowAfter samples (small aggregates, of a
    // stored block or a window, never pay for it), over the 64 KiB of code with the most of
    // them. Invariant: a PC in [low, low + 2 * counts.size()) is counted here and never in
    // pcs_, so the two are disjoint and pc_samples() merges them without summing.
    struct PcWindow {
        std::uint64_t low = 0;
        std::vector<std::uint64_t> counts;  // per halfword (Thumb and RISC-V C: even PCs)
        std::size_t distinct = 0;           // non-zero counts
        bool holds(std::uint64_t pc) const {
            return ((pc - low) >> 1) < counts.size() && (pc & 1) == 0;
        }
    };
    static constexpr std::uint64_t kWindowBytes = 64 * 1024;
    static constexpr std::uint64_t kWindowAfter = 1 << 16;

    void unsort_pcs();
    bool kind_mispredicted(std::span<const protocol::Record> records);
    // Each returns the number of arc records.
    template <typename ArcCounter>
    std::uint64_t add_in_order(std::span<const protocol::Record> records,
                               const ArcCounter& count_arc);
    template <typename ArcCounter>
    std::uint64_t add_split(std::span<const protocol::Record> records, const ArcCounter& count_arc);
    void count_samples(std::span<const std::uint64_t> pcs, std::span<const std::uint32_t> counts);
    [[gnu::noinline]] void count_outside_window(std::uint64_t pc, std::uint64_t n);
    void count_pc(std::uint64_t pc, std::uint64_t n);
    void open_window();

    // Arcs with both addresses below 2^32 (every supported target) share one table.
    CountTable arcs_;
    CountTable pcs_;
    // Whether the arc cache (aggregate.cc) hits often enough to pay for itself: it does when a
    // few arcs repeat (blinky), it does not when hundreds take turns.
    static constexpr std::uint64_t kArcCacheRetry = 64;
    bool arc_cache_pays_ = true;
    std::uint64_t batches_uncached_ = 0;
    std::array<std::uint8_t, 64> kind_predictor_{};  // kind_mispredicted()'s
    std::uint64_t kind_history_ = 0;
    std::uint64_t batches_split_ = 0;
    PcWindow window_;
    std::uint64_t table_samples_ = 0;  // samples counted in pcs_ before the window opened
    std::vector<PcCount> sorted_pcs_;  // adopt_sorted_pcs'; empty whenever pcs_ is not
    std::vector<ArcCount> wide_arcs_;  // arcs with a 64-bit address (from a 64-bit gmon.out)
    std::uint64_t total_calls_ = 0;
    std::uint64_t total_samples_ = 0;
};

// Feeds decoded records straight into an Aggregate.
class AggregateSink : public protocol::RecordSink {
  public:
    explicit AggregateSink(Aggregate& aggregate) : aggregate_(aggregate) {}
    void on_records(std::span<const protocol::Record> batch) override { aggregate_.add(batch); }
    // Counts that are already aggregated (an imported gmon.out), kept wide.
    void add(const Aggregate& counts) { aggregate_.merge(counts); }

  private:
    Aggregate& aggregate_;
};

}  // namespace rackprof::gmon
