#include "storage/record_slices.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <limits>

#include "storage/chunk_blocks.h"

namespace rackprof::storage {

void SliceSpan::extend(const SliceSpan& more) {
    if (records == 0) {
        *this = more;
        return;
    }
    first_seq = std::min(first_seq, more.first_seq);
    last_seq = std::max(last_seq, more.last_seq);
    min_ns = std::min(min_ns, more.min_ns);
    max_ns = std::max(max_ns, more.max_ns);
    records += more.records;
}

void SliceBuilder::add(std::int64_t session, const SliceSpan& rows, const gmon::Aggregate& sums) {
    if (rows.records == 0) return;
    Open& open = open_[session];
    open.levels[0].span.extend(rows);
    open.sums.merge(sums);
    if (open.levels[0].span.records >= kSliceRecords) close(session, open, 0);
}

// Writes the level's open slice, counts it in the level above, and closes that one in turn
// when it is full.
void SliceBuilder::close(std::int64_t session, Open& open, int level) {
    Level& l = open.levels[level];
    const auto sums =
        level == 0 ? encode_sums_block(open.sums) : sums_of_children(session, level, l.span);
    if (!sums.empty()) write(session, level + 1, l.span, sums);
    const bool counted = !sums.empty() && level + 1 < kSliceLevels;
    if (counted) {
        Level& up = open.levels[level + 1];
        up.span.extend(l.span);
        ++up.children;
    }
    l = Level{};
    if (level == 0) open.sums = gmon::Aggregate{};
    if (counted && open.levels[level + 1].children == kSliceFanout) close(session, open, level + 1);
}

void SliceBuilder::finish(std::int64_t session) {
    const auto it = open_.find(session);
    if (it == open_.end()) return;
    Open& open = it->second;
    for (int level = 0; level < kSliceLevels; ++level) {
        const Level& l = open.levels[level];
        // A slice of one child would repeat its child: the level above does without it.
        if (l.empty() || (level > 0 && l.children < 2)) continue;
        close(session, open, level);
    }
    open_.erase(it);
}

void SliceBuilder::write(std::int64_t session, int level, const SliceSpan& span,
                         const std::vector<std::uint8_t>& sums) {
    Statement st = db_.prepare(
        "INSERT INTO record_slices (session_id, level, first_seq, last_seq, min_ns, max_ns, "
        "records, sums) VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
    st.bind(1, session).bind(2, level).bind(3, span.first_seq).bind(4, span.last_seq);
    st.bind(5, span.min_ns).bind(6, span.max_ns).bind(7, span.records).bind_blob(8, sums);
    st.run();
}

// A level's sums from the slices of the level below inside its span (stored levels count from
// 1: `level` 1 reads level 1's rows to make level 2's). Empty if they do not add up to the span.
std::vector<std::uint8_t> SliceBuilder::sums_of_children(std::int64_t session, int level,
                                                         const SliceSpan& span) {
    Statement st = db_.prepare(
        "SELECT records, sums FROM record_slices WHERE session_id = ? AND level = ? AND "
        "first_seq >= ? AND last_seq <= ?");
    st.bind(1, session).bind(2, level).bind(3, span.first_seq).bind(4, span.last_seq);
    gmon::Aggregate sums;
    std::uint64_t records = 0;
    while (st.step()) {
        records += static_cast<std::uint64_t>(st.column_int(0));
        add_sums_block(st.column_blob(1), sums);
    }
    if (records != span.records) return {};
    return encode_sums_block(sums);
}

std::vector<StoredSlice> slices_inside(Database& db, std::int64_t session, std::int64_t from_ns,
                                       std::int64_t to_ns) {
    Statement st = db.prepare(
        "SELECT level, first_seq, last_seq, rowid FROM record_slices WHERE session_id = ? AND "
        "min_ns >= ? AND max_ns <= ? ORDER BY level DESC, first_seq");
    st.bind(1, session).bind(2, from_ns).bind(3, to_ns);
    std::map<std::int64_t, StoredSlice> chosen;  // by first_seq
    while (st.step()) {
        const StoredSlice s{static_cast<int>(st.column_int(0)), st.column_int(1), st.column_int(2),
                            st.column_int(3)};
        // Slices nest, so one overlapping a chosen (larger) one lies inside it.
        const auto next = chosen.upper_bound(s.first_seq);
        if (next != chosen.end() && next->second.first_seq <= s.last_seq) continue;
        if (next != chosen.begin() && std::prev(next)->second.last_seq >= s.first_seq) continue;
        chosen.emplace(s.first_seq, s);
    }
    std::vector<StoredSlice> out;
    out.reserve(chosen.size());
    for (const auto& entry : chosen) out.push_back(entry.second);
    return out;
}

std::vector<SeqRange> ranges_to_decode(Database& db, std::int64_t session, std::int64_t from_ns,
                                       std::int64_t to_ns, const std::vector<StoredSlice>& chosen) {
    constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
    constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
    std::vector<SeqRange> out;
    const auto add = [&](std::int64_t first, std::int64_t last) {
        if (first > last) return;
        if (!out.empty() && out.back().last + 1 == first) {
            out.back().last = last;
        } else {
            out.push_back({first, last});
        }
    };
    Statement st = db.prepare(
        "SELECT first_seq, last_seq, min_ns, max_ns FROM record_slices WHERE session_id = ? AND "
        "level = 1 ORDER BY first_seq");
    st.bind(1, session);
    auto inside = chosen.begin();
    std::int64_t next = kMin;  // the first seq not yet looked at
    while (st.step()) {
        const SeqRange slice{st.column_int(0), st.column_int(1)};
        const std::int64_t min_ns = st.column_int(2), max_ns = st.column_int(3);
        if (slice.first < next) continue;  // cannot happen for slices the builder wrote
        add(next, slice.first - 1);        // rows no slice holds
        next = slice.last + 1;
        while (inside != chosen.end() && inside->last_seq < slice.first) ++inside;
        const bool chosen_holds_it = inside != chosen.end() && inside->first_seq <= slice.first &&
                                     slice.last <= inside->last_seq;
        const bool outside_window = max_ns < from_ns || min_ns > to_ns;
        if (!chosen_holds_it && !outside_window) add(slice.first, slice.last);
    }
    add(next, kMax);
    return out;
}

void WindowSums::add_slice(Database& db, const StoredSlice& slice) {
    Statement st = db.prepare("SELECT sums FROM record_slices WHERE rowid = ?");
    st.bind(1, slice.rowid);
    if (!st.step()) throw StorageError("a record slice went missing while it was read");
    add_block(st.column_blob(0));
}

void WindowSums::add_block(std::span<const std::uint8_t> blob) {
    SumsBlockReader in(blob, payload_);
    std::array<gmon::ArcCount, 256> arcs;
    sums_.reserve(static_cast<std::size_t>(in.arcs_left()), 0);
    for (std::size_t n; (n = in.arcs(arcs)) != 0;) {
        for (std::size_t i = 0; i < n; ++i)
            sums_.add_arc(arcs[i].from_pc, arcs[i].self_pc, arcs[i].count);
    }
    std::array<gmon::PcCount, 2048> pcs;
    for (std::size_t n; (n = in.pcs(pcs)) != 0;) add_sorted(std::span(pcs).first(n));
}

void WindowSums::add(const SumsBlock& sums) {
    sums_.reserve(sums.arcs.size(), 0);
    for (const auto& a : sums.arcs) sums_.add_arc(a.from_pc, a.self_pc, a.count);
    add_sorted(sums.pcs);
}

void WindowSums::add_sorted(std::span<const gmon::PcCount> pcs) {
    // Sorted (a damaged block's are not: every PC is checked in add_pc).
    if (pcs.empty()) return;
    // A few stray PCs far from the text (a damaged capture's) go to the table rather than
    // stretch the array past kMaxSlots.
    if (!cover(pcs.front().pc, pcs.back().pc)) {
        const std::size_t stray = pcs.size() / 100;
        cover(pcs[stray].pc, pcs[pcs.size() - 1 - stray].pc);
    }
    for (const auto& p : pcs) add_pc(p.pc, p.count);
}

void WindowSums::add(std::span<const protocol::Record> records) {
    for (const protocol::Record& r : records) {
        if (r.kind == protocol::RecordKind::kArc) {
            sums_.add_arc(r.from_pc, r.self_pc, r.count);
        } else {
            add_pc(r.self_pc, r.count);
        }
    }
}

bool WindowSums::cover(std::uint64_t low, std::uint64_t high) {
    low &= ~std::uint64_t{1};
    if (high < low || (high - low) / 2 >= kMaxSlots) return false;
    const std::uint64_t needed = (high - low) / 2 + 1;
    if (slots_ == 0) {
        // Nothing in the array: put it where this window's PCs are, in the room it has
        // (zeroed), growing it if it is too small.
        if (counts_.size() < needed) {
            counts_.assign(static_cast<std::size_t>(needed), 0);
            present_.assign(static_cast<std::size_t>((needed + 63) / 64), 0);
        }
        low_ = low;
        slots_ = counts_.size();
        return true;
    }
    const std::uint64_t size = slots_;
    const std::uint64_t last = low_ + 2 * (size - 1);  // the last slot's PC
    if (low >= low_ && high <= last) return true;
    std::uint64_t new_low = std::min(low, low_), new_high = std::max(high, last);
    if ((new_high - new_low) / 2 >= kMaxSlots) return false;  // the PCs outside: the table
    // Growing by at least the array's size (within kMaxSlots), so a block whose runs come one
    // after another up the text moves the counts a few times, not once a run.
    if (high > last) new_high = std::max(new_high, last + 2 * size);
    if (low < low_) new_low = std::min(new_low, low_ > 2 * size ? low_ - 2 * size : 0);
    if ((new_high - new_low) / 2 >= kMaxSlots) {
        new_low = std::min(low, low_);
        new_high = std::max(high, last);
    }
    const std::size_t slots = static_cast<std::size_t>((new_high - new_low) / 2 + 1);
    std::vector<std::uint64_t> counts(slots);
    std::vector<std::uint64_t> present((slots + 63) / 64);
    const std::size_t shift = static_cast<std::size_t>((low_ - new_low) / 2);
    for (std::size_t i = 0; i < slots_; ++i) {
        if (!(present_[i >> 6] >> (i & 63) & 1)) continue;
        counts[i + shift] = counts_[i];
        present[(i + shift) >> 6] |= std::uint64_t{1} << ((i + shift) & 63);
    }
    low_ = new_low;
    slots_ = slots;
    counts_.swap(counts);
    present_.swap(present);
    return true;
}

gmon::Aggregate WindowSums::take() {
    const auto others = other_pcs_.pc_samples();
    std::size_t in_array = 0;
    for (const std::uint64_t w : present_)
        in_array += static_cast<std::size_t>(__builtin_popcountll(w));
    std::vector<gmon::PcCount> pcs;
    pcs.reserve(in_array + others.size());
    auto other = others.begin();
    const std::size_t words = static_cast<std::size_t>((slots_ + 63) / 64);
    for (std::size_t word = 0; word < words; ++word) {
        for (std::uint64_t bits = present_[word]; bits != 0; bits &= bits - 1) {
            const std::size_t slot = word * 64 + static_cast<std::size_t>(__builtin_ctzll(bits));
            const std::uint64_t pc = low_ + 2 * slot;
            for (; other != others.end() && other->pc < pc; ++other) pcs.push_back(*other);
            std::uint64_t count = counts_[slot];
            counts_[slot] = 0;  // the array is left zeroed for the next window
            if (other != others.end() && other->pc == pc) count += (other++)->count;
            pcs.push_back({pc, count});
        }
        present_[word] = 0;
    }
    pcs.insert(pcs.end(), other, others.end());
    gmon::Aggregate out = std::move(sums_);
    out.adopt_sorted_pcs(std::move(pcs));
    sums_ = gmon::Aggregate{};
    other_pcs_ = gmon::Aggregate{};
    slots_ = 0;
    if (counts_.size() > kKeptSlots) {
        counts_ = {};
        present_ = {};
    }
    if (payload_.capacity() > kKeptPayload) payload_ = {};
    return out;
}

}  // namespace rackprof::storage
