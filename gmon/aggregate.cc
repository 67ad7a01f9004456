#include "gmon/aggregate.h"

#include <algorithm>
#include <array>
#include <stdexcept>

#include "gmon/radix_sort.h"

namespace rackprof::gmon {

namespace {

// A small direct-mapped cache in front of the hash table: firmware that repeats the same few
// arcs and PCs only bumps a counter in L1. Flushed at the end of every batch. It counts its
// misses: where hundreds of arcs take turns, every miss costs a table add on top of the
// cache's own work, and the caller goes to the table directly instead.
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
            ++misses_;
        }
        e.count += n;
    }
    std::uint64_t misses() const { return misses_; }

  private:
    static constexpr std::size_t kEntries = 64;
    struct Entry {
        std::uint64_t key = 0;
        std::uint64_t count = 0;
    };
    CountTable& table_;
    std::array<Entry, kEntries> entries_{};
    std::uint64_t misses_ = 0;
};

std::uint64_t arc_key(std::uint64_t from, std::uint64_t self) {
    return (from << 32) | self;
}

}  // namespace

void Aggregate::add(std::span<const protocol::Record> records) {
    unsort_pcs();
    if (window_.counts.empty() && table_samples_ >= kWindowAfter) open_window();
    // The arc cache again every kArcCacheRetry batches, to see whether it now pays.
    const bool cached = arc_cache_pays_ || ++batches_uncached_ % kArcCacheRetry == 0;
    CountCache cache(arcs_);
    const auto count_arc = [&](std::uint64_t key, std::uint64_t n) {
        if (cached) {
            cache.add(key, n);
        } else {
            arcs_.add(key, n);
        }
    };
    // Where arcs and samples take turns at random (a sampler against calls), a branch on the
    // kind mispredicts on a third of the records and splitting first pays; where they follow a
    // pattern (a loop's calls, a framed stream's frames), the CPU predicts it and the split is
    // only extra work.
    const bool split = kind_mispredicted(records);
    batches_split_ += split;
    const std::uint64_t arcs =
        split ? add_split(records, count_arc) : add_in_order(records, count_arc);
    if (cached && arcs >= 256) arc_cache_pays_ = cache.misses() * 4 < arcs;
}

// Whether a branch on the records' kind would mispredict often: a predictor like the CPU's
// (a 2-bit counter per history of the last 6 kinds, kept across batches) run over the batch's
// first records.
bool Aggregate::kind_mispredicted(std::span<const protocol::Record> records) {
    const std::size_t n = std::min<std::size_t>(records.size(), 128);
    std::size_t misses = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const bool arc = records[i].kind == protocol::RecordKind::kArc;
        std::uint8_t& counter = kind_predictor_[kind_history_ % kind_predictor_.size()];
        misses += (counter >= 2) != arc;
        counter = arc ? std::min<std::uint8_t>(counter + 1, 3)
                      : static_cast<std::uint8_t>(counter - (counter > 0));
        kind_history_ = (kind_history_ << 1) | arc;
    }
    return misses * 8 > n;
}

template <typename ArcCounter>
std::uint64_t Aggregate::add_in_order(std::span<const protocol::Record> records,
                                      const ArcCounter& count_arc) {
    std::uint64_t* const window = window_.counts.data();
    const std::uint64_t low = window_.low;
    const std::size_t slots = window_.counts.size();
    std::uint64_t arcs = 0, calls = 0, samples = 0;
    std::size_t distinct = window_.distinct;
    // The last two arcs' counts are kept in registers (n0 and n1, 0 for none): a loop's calls
    // take turns among a few arcs, and counting each in the cache's memory, where the same
    // entry was stored a few records before, made arcs 13 % of a framed capture's decode and
    // aggregate. When a third arc comes, the older of the two goes on to the cache. (A count
    // of 0 adds nothing, as the cache's flush skips it.)
    std::uint64_t key0 = 0, key1 = 0, n0 = 0, n1 = 0;
    for (const protocol::Record& r : records) {
        if (r.kind == protocol::RecordKind::kArc) {
            const std::uint64_t key = arc_key(r.from_pc, r.self_pc);
            if (key == key0 && n0) {
                n0 += r.count;
            } else if (key == key1 && n1) {
                n1 += r.count;
            } else {
                if (n1) count_arc(key1, n1);
                key1 = key0;
                n1 = n0;
                key0 = key;
                n0 = r.count;
            }
            ++arcs;
            calls += r.count;
            continue;
        }
        samples += r.count;
        const std::uint64_t slot = (r.self_pc - low) >> 1;
        if (slot < slots && (r.self_pc & 1) == 0) {
            distinct += window[slot] == 0;
            window[slot] += r.count;
        } else {
            count_outside_window(r.self_pc, r.count);
        }
    }
    if (n0) count_arc(key0, n0);
    if (n1) count_arc(key1, n1);
    window_.distinct = distinct;
    total_calls_ += calls;
    total_samples_ += samples;
    return arcs;
}

// Each piece of the batch is first split by kind without a branch, then each kind is counted
// in a loop of its own.
template <typename ArcCounter>
std::uint64_t Aggregate::add_split(std::span<const protocol::Record> records,
                                   const ArcCounter& count_arc) {
    constexpr std::size_t kPiece = 256;
    std::array<std::uint64_t, kPiece> arc_keys, pcs;
    std::array<std::uint32_t, kPiece> arc_counts, pc_counts;
    std::uint64_t arcs = 0, calls = 0;
    for (std::size_t at = 0; at < records.size(); at += kPiece) {
        const std::size_t n = std::min(kPiece, records.size() - at);
        std::size_t n_arcs = 0, n_pcs = 0;
        for (std::size_t i = 0; i < n; ++i) {
            const protocol::Record& r = records[at + i];
            const bool arc = r.kind == protocol::RecordKind::kArc;
            arc_keys[n_arcs] = arc_key(r.from_pc, r.self_pc);
            arc_counts[n_arcs] = r.count;
            pcs[n_pcs] = r.self_pc;
            pc_counts[n_pcs] = r.count;
            n_arcs += arc;
            n_pcs += !arc;
        }
        for (std::size_t i = 0; i < n_arcs; ++i) {
            count_arc(arc_keys[i], arc_counts[i]);
            calls += arc_counts[i];
        }
        arcs += n_arcs;
        count_samples(std::span(pcs.data(), n_pcs), std::span(pc_counts.data(), n_pcs));
    }
    total_calls_ += calls;
    return arcs;
}

void Aggregate::count_samples(std::span<const std::uint64_t> pcs,
                              std::span<const std::uint32_t> counts) {
    std::uint64_t* const window = window_.counts.data();
    const std::uint64_t low = window_.low;
    const std::size_t slots = window_.counts.size();
    std::size_t distinct = window_.distinct;
    for (std::size_t i = 0; i < pcs.size(); ++i) {
        total_samples_ += counts[i];
        const std::uint64_t slot = (pcs[i] - low) >> 1;
        if (slot < slots && (pcs[i] & 1) == 0) {
            distinct += window[slot] == 0;
            window[slot] += counts[i];
        } else {
            count_outside_window(pcs[i], counts[i]);
        }
    }
    window_.distinct = distinct;
}

// A sample the window does not hold, into the table. Out of line: inlined, the table's insert
// (and growth) took so many registers that the window's loops kept their values on the stack
// and loaded them again on every sample (the aggregate took a fifth longer on a sampler's PCs).
void Aggregate::count_outside_window(std::uint64_t pc, std::uint64_t n) {
    pcs_.add(pc, n);
    if (window_.counts.empty()) table_samples_ += n;
}

// Over the 64 KiB of code where the table's samples are densest; the table's PCs in it move.
void Aggregate::open_window() {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> regions;  // (pc / 64 KiB, samples)
    pcs_.for_each(
        [&](std::uint64_t pc, std::uint64_t n) { regions.emplace_back(pc / kWindowBytes, n); });
    std::sort(regions.begin(), regions.end());
    std::uint64_t best = 0, best_samples = 0;
    for (std::size_t i = 0; i < regions.size();) {
        std::uint64_t sum = 0;
        std::size_t j = i;
        for (; j < regions.size() && regions[j].first == regions[i].first; ++j)
            sum += regions[j].second;
        if (sum > best_samples) {
            best_samples = sum;
            best = regions[i].first;
        }
        i = j;
    }
    window_.low = best * kWindowBytes;
    window_.counts.assign(kWindowBytes / 2, 0);
    CountTable rest;
    pcs_.for_each([&](std::uint64_t pc, std::uint64_t n) {
        if (window_.holds(pc)) {
            window_.distinct += window_.counts[(pc - window_.low) >> 1] == 0;
            window_.counts[(pc - window_.low) >> 1] += n;
        } else {
            rest.add(pc, n);
        }
    });
    pcs_ = std::move(rest);
}

void Aggregate::count_pc(std::uint64_t pc, std::uint64_t n) {
    if (window_.holds(pc)) {
        std::uint64_t& c = window_.counts[(pc - window_.low) >> 1];
        window_.distinct += c == 0;
        c += n;
        return;
    }
    pcs_.add(pc, n);
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
    count_pc(pc, count);
}

void Aggregate::merge(const Aggregate& other) {
    unsort_pcs();
    other.arcs_.for_each([&](std::uint64_t key, std::uint64_t n) { arcs_.add(key, n); });
    other.pcs_.for_each([&](std::uint64_t key, std::uint64_t n) { count_pc(key, n); });
    for (const PcCount& p : other.sorted_pcs_) count_pc(p.pc, p.count);
    for (std::size_t i = 0; i < other.window_.counts.size(); ++i) {
        if (other.window_.counts[i]) count_pc(other.window_.low + 2 * i, other.window_.counts[i]);
    }
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
    for (const PcCount& p : sorted_pcs_) count_pc(p.pc, p.count);
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
    out.reserve(pcs_.size() + window_.distinct);
    pcs_.for_each([&](std::uint64_t pc, std::uint64_t n) { out.push_back({pc, n}); });
    // PCs are distinct, so any sort by address gives the same order.
    radix_sort_by_key(out, [](const PcCount& p) { return p.pc; });
    if (window_.distinct == 0) return out;
    // The window's PCs, in address order already, merged among the table's (odd PCs inside
    // its range are the table's).
    const auto table_end = static_cast<std::ptrdiff_t>(out.size());
    for (std::size_t i = 0; i < window_.counts.size(); ++i) {
        if (window_.counts[i]) out.push_back({window_.low + 2 * i, window_.counts[i]});
    }
    std::inplace_merge(out.begin(), out.begin() + table_end, out.end(),
                       [](const PcCount& a, const PcCount& b) { return a.pc < b.pc; });
    return out;
}

std::span<const PcCount> Aggregate::pc_samples(std::vector<PcCount>& scratch) const {
    if (!sorted_pcs_.empty()) return sorted_pcs_;
    scratch = pc_samples();
    return scratch;
}

}  // namespace rackprof::gmon
