#include "gmon/aggregate.h"

#include <algorithm>
#include <array>
#include <stdexcept>

#include "gmon/radix_sort.h"

namespace rackprof::gmon {

namespace {

// A small direct-mapped cache in front of the hash table: firmware repeats the same few arcs
// and PCs, so most records only bump a counter in L1. Flushed at the end of every batch.
class CountCache {
  public:
    explicit CountCache(CountTable& table) : table_(table) {}
    ~CountCache() {
        for (const Entry& e : entries_) {
            if (e.count) table_.add(e.key, e.count);
        }
    }
    void add(std::uint64_t key, std::uint64_t n) {
        Entry& e = entries_[CountTable::hash(key) & (kEntries - 1)];
        if (e.key != key) {
            if (e.count) table_.add(e.key, e.count);
            e.key = key;
            e.count = 0;
        }
        e.count += n;
    }

  private:
    static constexpr std::size_t kEntries = 64;
    struct Entry {
        std::uint64_t key = 0;
        std::uint64_t count = 0;
    };
    CountTable& table_;
    std::array<Entry, kEntries> entries_{};
};

std::uint64_t arc_key(std::uint64_t from, std::uint64_t self) {
    return (from << 32) | self;
}

}  // namespace

void Aggregate::add(std::span<const protocol::Record> records) {
    unsort_pcs();
    CountCache arcs(arcs_);
    CountCache pcs(pcs_);
    for (const protocol::Record& r : records) {
        if (r.kind == protocol::RecordKind::kArc) {
            arcs.add(arc_key(r.from_pc, r.self_pc), r.count);
            total_calls_ += r.count;
        } else {
            pcs.add(r.self_pc, r.count);
            total_samples_ += r.count;
        }
    }
}

void Aggregate::add_arc(std::uint64_t from_pc, std::uint64_t self_pc, std::uint64_t count) {
    total_calls_ += count;
    if ((from_pc >> 32) == 0 && (self_pc >> 32) == 0) {
        arcs_.add(arc_key(from_pc, self_pc), count);
        return;
    }
    for (ArcCount& a : wide_arcs_) {
        if (a.from_pc == from_pc && a.self_pc == self_pc) {
            a.count += count;
            return;
        }
    }
    wide_arcs_.push_back({from_pc, self_pc, count});
}

void Aggregate::add_pc(std::uint64_t pc, std::uint64_t count) {
    unsort_pcs();
    total_samples_ += count;
    pcs_.add(pc, count);
}

void Aggregate::merge(const Aggregate& other) {
    unsort_pcs();
    other.arcs_.for_each([&](std::uint64_t key, std::uint64_t n) { arcs_.add(key, n); });
    other.pcs_.for_each([&](std::uint64_t key, std::uint64_t n) { pcs_.add(key, n); });
    for (const PcCount& p : other.sorted_pcs_) pcs_.add(p.pc, p.count);
    for (const ArcCount& a : other.wide_arcs_) {
        add_arc(a.from_pc, a.self_pc, a.count);
        total_calls_ -= a.count;  // counted below with the rest
    }
    total_calls_ += other.total_calls_;
    total_samples_ += other.total_samples_;
}

void Aggregate::reserve(std::size_t arcs, std::size_t pcs) {
    arcs_.reserve(arcs);
    if (sorted_pcs_.empty()) pcs_.reserve(pcs);
}

void Aggregate::adopt_sorted_pcs(std::vector<PcCount> pcs) {
    if (distinct_pcs() != 0)
        throw std::logic_error("adopt_sorted_pcs: the aggregate already holds PC counts");
    for (std::size_t i = 1; i < pcs.size(); ++i) {
        if (pcs[i - 1].pc >= pcs[i].pc)
            throw std::logic_error("adopt_sorted_pcs: PCs not sorted or not distinct");
    }
    for (const PcCount& p : pcs) total_samples_ += p.count;
    sorted_pcs_ = std::move(pcs);
}

void Aggregate::unsort_pcs() {
    if (sorted_pcs_.empty()) return;
    pcs_.reserve(sorted_pcs_.size());
    for (const PcCount& p : sorted_pcs_) pcs_.add(p.pc, p.count);
    sorted_pcs_ = {};
}

std::vector<ArcCount> Aggregate::arcs() const {
    // The table's key (from << 32 | self) sorts as (from, self) does.
    struct Keyed {
        std::uint64_t key;
        std::uint64_t count;
    };
    std::vector<Keyed> keyed;
    keyed.reserve(arcs_.size());
    arcs_.for_each([&](std::uint64_t key, std::uint64_t n) { keyed.push_back({key, n}); });
    radix_sort_by_key(keyed, [](const Keyed& k) { return k.key; });
    std::vector<ArcCount> out;
    out.reserve(keyed.size() + wide_arcs_.size());
    for (const Keyed& k : keyed) out.push_back({k.key >> 32, k.key & 0xFFFFFFFFu, k.count});
    if (!wide_arcs_.empty()) {
        out.insert(out.end(), wide_arcs_.begin(), wide_arcs_.end());
        std::sort(out.begin(), out.end(), [](const ArcCount& a, const ArcCount& b) {
            return a.from_pc != b.from_pc ? a.from_pc < b.from_pc : a.self_pc < b.self_pc;
        });
    }
    return out;
}

std::vector<PcCount> Aggregate::pc_samples() const {
    if (!sorted_pcs_.empty()) return sorted_pcs_;
    std::vector<PcCount> out;
    out.reserve(pcs_.size());
    pcs_.for_each([&](std::uint64_t pc, std::uint64_t n) { out.push_back({pc, n}); });
    // PCs are distinct, so any sort by address gives the same order.
    radix_sort_by_key(out, [](const PcCount& p) { return p.pc; });
    return out;
}

std::span<const PcCount> Aggregate::pc_samples(std::vector<PcCount>& scratch) const {
    if (!sorted_pcs_.empty()) return sorted_pcs_;
    scratch = pc_samples();
    return scratch;
}

}  // namespace rackprof::gmon
