// The profile engine, following binutils gprof step by step (hist.c, call_graph.c,
// cg_arcs.c, cg_dfn.c), so that every number equals what gprof prints for the same data.
#include "gmon/profile.h"

#include "gmon/report.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <set>
#include <stdexcept>
#include <unordered_map>

namespace rackprof::gmon {

namespace {

// gprof measures histogram addresses in 2-byte units (its UNIT type).
constexpr std::uint64_t kUnit = 2;

// Names gprof leaves out of the flat profile, the call graph and time propagation by default
// (binutils 2.40 gprof.c, default_excluded_list). `_mcount` is the RISC-V runtime's hook, so its
// samples leave the total as they do in gprof.
bool excluded_by_default(const std::string& name) {
    static const std::set<std::string> kNames = {"_gprof_mcount",     "mcount",     "_mcount",
                                                 "__mcount",          "__mcount_internal",
                                                 "__mcleanup"};
    return kNames.count(name) > 0;
}

class Engine {
  public:
    Engine(Profile& profile, std::vector<bool> excluded, bool last_unsampled)
        : p_(profile), excluded_(std::move(excluded)), last_unsampled_(last_unsampled) {}

    void assign_samples(const Histogram& h, double hist_scale);
    void reserve_arcs(std::size_t n) { arc_index_.reserve(n); }
    void tally(std::uint64_t from_pc, std::uint64_t self_pc, std::uint64_t count);
    void assemble();
    void order_flat();

  private:
    static constexpr int kDfnNan = 0;
    // Each symbol's start in gprof's 2-byte units, and one past the last's end: once for all
    // histograms (an imported gmon.out may have tens of thousands).
    const std::vector<std::uint64_t>& scaled_bounds();
    std::vector<std::uint64_t> scaled_;
    static constexpr int kDfnBusy = -1;

    std::optional<std::size_t> lookup(std::uint64_t address) const;
    void add_arc(std::size_t parent, std::size_t child, std::uint64_t count);
    std::optional<std::size_t> find_arc(std::size_t parent, std::size_t child) const;
    static std::uint64_t arc_key(std::size_t parent, std::size_t child) {
        return (static_cast<std::uint64_t>(parent) << 32) | static_cast<std::uint64_t>(child);
    }

    // Depth-first numbering with cycle detection (cg_dfn.c), iterative so that deep call
    // chains cannot exhaust the stack.
    void dfn(std::size_t root);
    void find_cycle(std::size_t child);
    void post_visit(std::size_t parent);
    void link_cycles();
    void inherit_flags(std::size_t child);
    void propagate_flags(const std::vector<std::size_t>& top_sorted);
    void cycle_time();
    void propagate_time(std::size_t parent);

    // Symbols and cycles share one index space while assembling, like gprof's Sym pointers:
    // [0, n) are symbols, [n, n + cycles) are cycle headers.
    ProfileNode& node(std::size_t i) {
        return i < p_.nodes.size() ? p_.nodes[i] : p_.cycles[i - p_.nodes.size()];
    }
    std::size_t head(std::size_t i) const { return heads_[i]; }

    Profile& p_;
    std::vector<bool> excluded_;
    bool last_unsampled_;             // the last symbol's end is gprof's zeroed left-over slot
    std::vector<std::size_t> heads_;  // cyc.head of each symbol (or cycle)
    std::vector<std::size_t> next_;   // cyc.next of each symbol (or cycle): kNone ends the list
    std::vector<std::size_t> tail_;   // the last member of each head's list
    // One arc per (parent, child): gprof searches the parent's list; a map keeps tallying
    // linear when functions have thousands of callees.
    std::unordered_map<std::uint64_t, std::size_t> arc_index_;
    struct Frame {
        std::size_t sym;
        // Frames (run_low, this one] were glommed into one cycle by an earlier find_cycle and
        // share a head; equal to the frame's own index until then.
        std::size_t run_low;
    };
    std::vector<Frame> dfn_stack_;       // index 0 unused, as in gprof
    std::vector<std::size_t> on_stack_;  // each symbol's frame index while busy, else kNone
    std::vector<std::size_t> to_glom_;   // find_cycle's scratch lists
    std::vector<std::size_t> glommed_;
    int dfn_counter_ = kDfnNan;
};

// sym_lookup() from symtab.c, including how it treats gaps and the last symbol.
std::optional<std::size_t> Engine::lookup(std::uint64_t address) const {
    const auto& sym = p_.symbols;
    if (sym.empty()) return std::nullopt;
    long low = 0;
    long high = static_cast<long>(sym.size()) - 1;
    long mid = -1;
    auto at = [&](long i) -> const ProfileSymbol& { return sym[static_cast<std::size_t>(i)]; };
    while (low != high) {
        mid = (high + low) / 2;
        if (at(mid).addr <= address && at(mid + 1).addr > address) {
            if (address > at(mid).end_addr) return std::nullopt;
            return static_cast<std::size_t>(mid);
        }
        if (at(mid).addr > address) {
            high = mid;
        } else {
            low = mid + 1;
        }
    }
    if (at(mid + 1).addr <= address) {
        if (address > at(mid + 1).end_addr) return std::nullopt;
        return static_cast<std::size_t>(mid + 1);
    }
    return std::nullopt;
}

// hist_assign_samples_1(): a bin's count is credited to the symbols it overlaps, in
// proportion to the overlap; a symbol reaches up to where the next one starts.
const std::vector<std::uint64_t>& Engine::scaled_bounds() {
    if (!scaled_.empty()) return scaled_;
    const std::size_t n = p_.symbols.size();
    scaled_.assign(n + 1, 0);
    for (std::size_t i = 0; i < n; ++i) scaled_[i] = p_.symbols[i].addr / kUnit;
    // The last symbol has no successor: gprof reads one entry past its table there. When
    // de-duplication shortened the table, that slot is a left-over entry whose scaled address
    // was never set (0), and the last symbol gets no samples; otherwise the read goes past the
    // allocation (undefined), and rackprof does what gprof means: the last symbol ends where
    // .text ends. Firmware's last .text symbol is normally a label like _etext.
    scaled_[n] = last_unsampled_ ? 0 : (p_.symbols[n - 1].end_addr + 1) / kUnit;
    return scaled_;
}

void Engine::assign_samples(const Histogram& h, double hist_scale) {
    const std::size_t n = p_.symbols.size();
    const std::vector<std::uint64_t>& scaled = scaled_bounds();
    const std::uint64_t lowpc = h.low_pc / kUnit;
    // gprof walks the symbols from the first for every histogram; those that end at or
    // before the histogram's first bin only take its `continue`, so the walk starts after them.
    std::size_t k = 1;
    if (const auto first =
            std::find_if(h.bins.begin(), h.bins.end(), [](std::uint64_t b) { return b != 0; });
        first != h.bins.end()) {
        const auto i = static_cast<double>(first - h.bins.begin());
        const std::uint64_t bin_low = lowpc + static_cast<std::uint64_t>(hist_scale * i);
        k = 1 + static_cast<std::size_t>(std::upper_bound(scaled.begin() + 1,
                                                          scaled.begin() + static_cast<long>(n),
                                                          bin_low) -
                                         (scaled.begin() + 1));
        k = std::min(k, n);
    }
    for (std::size_t i = 0; i < h.bins.size(); ++i) {
        const std::uint64_t bin_count = h.bins[i];
        if (bin_count == 0) continue;
        const std::uint64_t bin_low =
            lowpc + static_cast<std::uint64_t>(hist_scale * static_cast<double>(i));
        const std::uint64_t bin_high =
            lowpc + static_cast<std::uint64_t>(hist_scale * static_cast<double>(i + 1));
        const auto count_time = static_cast<double>(bin_count);
        p_.total_time += count_time;
        for (std::size_t j = k - 1; j < n; k = ++j) {
            const std::uint64_t sym_low = scaled[j];
            const std::uint64_t sym_high = scaled[j + 1];
            if (bin_high < sym_low) break;
            if (bin_low >= sym_high) continue;
            const std::uint64_t overlap = std::min(bin_high, sym_high) - std::max(bin_low, sym_low);
            if (overlap > 0) {
                const double credit = static_cast<double>(overlap) * count_time / hist_scale;
                if (excluded_[j]) {
                    p_.total_time -= credit;
                } else {
                    p_.nodes[j].self_time += credit;
                }
            }
        }
    }
}

// cg_tally(): an arc counts for the functions containing its two addresses.
void Engine::tally(std::uint64_t from_pc, std::uint64_t self_pc, std::uint64_t count) {
    const auto parent = lookup(from_pc);
    auto child = lookup(self_pc);
    if (!parent || !child) return;
    // The callee is a function entry: back up over labels that are not functions.
    std::size_t c = *child;
    while (!p_.symbols[c].is_func) {
        if (c == 0) return;
        --c;
    }
    p_.nodes[c].ncalls += count;
    add_arc(*parent, c, count);
}

std::optional<std::size_t> Engine::find_arc(std::size_t parent, std::size_t child) const {
    const auto it = arc_index_.find(arc_key(parent, child));
    if (it == arc_index_.end()) return std::nullopt;
    return it->second;
}

void Engine::add_arc(std::size_t parent, std::size_t child, std::uint64_t count) {
    if (const auto existing = find_arc(parent, child)) {
        p_.arcs[*existing].count += count;
        return;
    }
    p_.arcs.push_back({parent, child, count, 0.0, 0.0});
    arc_index_.emplace(arc_key(parent, child), p_.arcs.size() - 1);
    p_.nodes[parent].children.push_back(p_.arcs.size() - 1);
    p_.nodes[child].parents.push_back(p_.arcs.size() - 1);
}

// cg_dfn(): number nodes in depth-first post-order; a node reached again while busy closes a
// cycle, whose members are glommed onto one list and share one number.
void Engine::dfn(std::size_t root) {
    struct Visit {
        std::size_t sym;
        std::size_t next_child;  // how many of the children (newest first) were visited
    };
    auto enter = [&](std::size_t s, std::vector<Visit>& work) {
        ProfileNode& n = p_.nodes[s];
        if (n.top_order != kDfnNan && n.top_order != kDfnBusy) return;  // numbered already
        if (n.top_order == kDfnBusy) {
            find_cycle(s);
            return;
        }
        on_stack_[s] = dfn_stack_.size();
        dfn_stack_.push_back({s, dfn_stack_.size()});
        n.top_order = kDfnBusy;
        work.push_back({s, 0});
    };
    std::vector<Visit> work;
    enter(root, work);
    while (!work.empty()) {
        Visit& v = work.back();
        const auto& children = p_.nodes[v.sym].children;
        if (v.next_child < children.size()) {
            const std::size_t arc = children[children.size() - 1 - v.next_child];
            ++v.next_child;
            enter(p_.arcs[arc].child, work);
            continue;
        }
        const std::size_t done = v.sym;
        work.pop_back();
        post_visit(done);
    }
}

// gprof walks down the stack to the child (or its cycle's head) and then over every frame
// above it; on one big cycle that is quadratic. Here the frame is found by position, frames
// glommed by an earlier call are skipped a run at a time, and each head knows its list's tail.
// Heads are glommed in the same (stack) order as gprof's, so the lists come out identical.
void Engine::find_cycle(std::size_t child) {
    const std::size_t depth = dfn_stack_.size() - 1;
    std::size_t cycle_top = on_stack_[child] == kNone ? 0 : on_stack_[child];
    if (head(child) != child && on_stack_[head(child)] != kNone)
        cycle_top = std::max(cycle_top, on_stack_[head(child)]);
    if (cycle_top == 0) throw std::logic_error("call graph: could not find the head of a cycle");
    if (cycle_top == depth) return;  // a self-call: handled elsewhere
    const std::size_t top = head(dfn_stack_[cycle_top].sym);
    to_glom_.clear();
    glommed_.clear();
    for (std::size_t index = depth; index > cycle_top;) {
        Frame& frame = dfn_stack_[index];
        const std::size_t below =
            frame.run_low < index ? std::max(frame.run_low, cycle_top) : index - 1;
        if (head(frame.sym) == frame.sym) {
            to_glom_.push_back(frame.sym);
        } else {
            glommed_.push_back(frame.sym);
        }
        frame.run_low = cycle_top;
        index = below;
    }
    std::size_t tail = tail_[top];
    for (auto it = to_glom_.rbegin(); it != to_glom_.rend(); ++it) {
        // Not yet glommed anywhere: glom it, and whatever it had glommed.
        const std::size_t member = *it;
        next_[tail] = member;
        heads_[member] = top;
        for (tail = member; next_[tail] != kNone; tail = next_[tail]) heads_[next_[tail]] = top;
    }
    tail_[top] = tail;
    for (const std::size_t member : glommed_) {
        if (head(member) != top)
            throw std::logic_error("call graph: cycle member glommed, but not to the head");
    }
}

void Engine::post_visit(std::size_t parent) {
    if (head(parent) == parent) {
        ++dfn_counter_;
        for (std::size_t m = parent; m != kNone; m = next_[m]) p_.nodes[m].top_order = dfn_counter_;
    }
    on_stack_[dfn_stack_.back().sym] = kNone;
    dfn_stack_.pop_back();
}

// cycle_link(): a header per cycle, numbered in symbol order, with calls into the cycle
// from outside (ncalls) and among its members (self_calls).
void Engine::link_cycles() {
    const std::size_t n = p_.symbols.size();
    for (std::size_t s = 0; s < n; ++s) {
        if (!(head(s) == s && next_[s] != kNone)) continue;
        ProfileNode cycle;
        cycle.print_flag = true;
        cycle.cycle = p_.cycles.size() + 1;
        p_.cycles.push_back(cycle);
        const std::size_t c = n + p_.cycles.size() - 1;
        heads_.push_back(c);
        next_.push_back(s);
        for (std::size_t m = s; m != kNone; m = next_[m]) {
            p_.nodes[m].cycle = p_.cycles.size();
            heads_[m] = c;
            p_.cycles.back().members.push_back(m);
        }
        for (std::size_t m = s; m != kNone; m = next_[m]) {
            const auto& parents = p_.nodes[m].parents;
            for (auto it = parents.rbegin(); it != parents.rend(); ++it) {
                const ProfileArc& a = p_.arcs[*it];
                if (a.parent == m) continue;
                if (p_.nodes[a.parent].cycle == p_.cycles.size()) {
                    p_.cycles.back().self_calls += a.count;
                } else {
                    p_.cycles.back().ncalls += a.count;
                }
            }
        }
    }
}

void Engine::inherit_flags(std::size_t child) {
    const std::size_t h = head(child);
    if (child == h) {
        ProfileNode& c = p_.nodes[child];
        c.print_flag = false;
        c.prop_fract = 0.0;
        for (auto it = c.parents.rbegin(); it != c.parents.rend(); ++it) {
            const ProfileArc& a = p_.arcs[*it];
            if (a.parent == child) continue;
            const ProfileNode& parent = node(a.parent);
            c.print_flag = c.print_flag || parent.print_flag;
            if (c.ncalls != 0) {
                c.prop_fract += parent.prop_fract *
                                (static_cast<double>(a.count) / static_cast<double>(c.ncalls));
            }
        }
        return;
    }
    ProfileNode& hd = node(h);
    hd.print_flag = false;
    hd.prop_fract = 0.0;
    for (std::size_t m = next_[h]; m != kNone; m = next_[m]) {
        const auto& parents = p_.nodes[m].parents;
        for (auto it = parents.rbegin(); it != parents.rend(); ++it) {
            const ProfileArc& a = p_.arcs[*it];
            if (head(a.parent) == h) continue;
            const ProfileNode& parent = node(a.parent);
            hd.print_flag = hd.print_flag || parent.print_flag;
            if (hd.ncalls != 0) {
                hd.prop_fract += parent.prop_fract *
                                 (static_cast<double>(a.count) / static_cast<double>(hd.ncalls));
            }
        }
    }
    for (std::size_t m = next_[h]; m != kNone; m = next_[m]) {
        p_.nodes[m].print_flag = hd.print_flag;
        p_.nodes[m].prop_fract = hd.prop_fract;
    }
}

void Engine::propagate_flags(const std::vector<std::size_t>& top_sorted) {
    std::size_t old_head = kNone;
    for (auto it = top_sorted.rbegin(); it != top_sorted.rend(); ++it) {
        const std::size_t s = *it;
        if (head(s) != old_head) {
            old_head = head(s);
            inherit_flags(s);
        }
        ProfileNode& c = p_.nodes[s];
        if (!c.print_flag) {
            if (!excluded_[s]) c.print_flag = true;
        } else if (excluded_[s]) {
            c.print_flag = false;
        }
        if (c.prop_fract == 0.0) {
            if (!excluded_[s]) c.prop_fract = 1.0;
        } else if (excluded_[s]) {
            c.prop_fract = 0.0;
        }
        c.prop_self = c.self_time * c.prop_fract;
        p_.print_time += c.prop_self;
    }
}

void Engine::cycle_time() {
    for (ProfileNode& cycle : p_.cycles) {
        for (std::size_t m : cycle.members) {
            if (p_.nodes[m].prop_fract == 0.0) continue;
            cycle.self_time += p_.nodes[m].self_time;
        }
        cycle.prop_self = cycle.prop_fract * cycle.self_time;
    }
}

void Engine::propagate_time(std::size_t parent_index) {
    ProfileNode& parent = p_.nodes[parent_index];
    if (parent.prop_fract == 0.0) return;
    for (auto it = parent.children.rbegin(); it != parent.children.rend(); ++it) {
        ProfileArc& a = p_.arcs[*it];
        std::size_t child_index = a.child;
        if (a.count == 0 || child_index == parent_index || p_.nodes[child_index].prop_fract == 0)
            continue;
        if (head(child_index) != child_index) {
            if (parent.cycle == p_.nodes[child_index].cycle) continue;
            child_index = head(child_index);
        } else if (parent.top_order <= p_.nodes[child_index].top_order) {
            continue;  // gprof: "toporder botches"
        }
        const ProfileNode& child = node(child_index);
        if (child.ncalls == 0) continue;
        const double fraction = static_cast<double>(a.count) / static_cast<double>(child.ncalls);
        a.time = child.self_time * fraction;
        a.child_time = child.child_time * fraction;
        const double share = a.time + a.child_time;
        parent.child_time += share;
        const double prop_share = parent.prop_fract * share;
        parent.prop_child += prop_share;
        a.time *= parent.prop_fract;
        a.child_time *= parent.prop_fract;
        if (head(parent_index) != parent_index) {
            ProfileNode& hd = node(head(parent_index));
            hd.child_time += share;
            hd.prop_child += prop_share;
        }
    }
}

// cg_assemble(): self-calls set aside, depth-first numbering, cycles, flags top-down,
// time bottom-up, and the call graph's order by total propagated time.
void Engine::assemble() {
    const std::size_t n = p_.symbols.size();
    heads_.resize(n);
    next_.assign(n, kNone);
    tail_.resize(n);
    on_stack_.assign(n, kNone);
    for (std::size_t s = 0; s < n; ++s) {
        ProfileNode& node_s = p_.nodes[s];
        node_s.child_time = 0.0;
        if (const auto self_arc = find_arc(s, s)) {
            node_s.ncalls -= p_.arcs[*self_arc].count;
            node_s.self_calls = p_.arcs[*self_arc].count;
        }
        node_s.top_order = kDfnNan;
        heads_[s] = s;
        tail_[s] = s;
    }
    dfn_stack_.assign(1, Frame{kNone, 0});
    for (std::size_t s = 0; s < n; ++s) {
        if (p_.nodes[s].top_order == kDfnNan) dfn(s);
    }
    link_cycles();

    std::vector<std::size_t> top_sorted(n);
    for (std::size_t s = 0; s < n; ++s) top_sorted[s] = s;
    std::stable_sort(top_sorted.begin(), top_sorted.end(), [&](std::size_t l, std::size_t r) {
        return p_.nodes[l].top_order < p_.nodes[r].top_order;
    });
    propagate_flags(top_sorted);
    cycle_time();
    for (std::size_t s : top_sorted) propagate_time(s);

    for (std::size_t s = 0; s < n; ++s) p_.nodes[s].cycle_head = head(s) == s ? kNone : head(s) - n;

    // cmp_total(): by total propagated time, cycles first on ties, names without a leading
    // underscore first, then more calls, then by name.
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < n + p_.cycles.size(); ++i) order.push_back(i);
    auto name_of = [&](std::size_t i) -> const char* {
        return i < n ? p_.symbols[i].name.c_str() : nullptr;
    };
    std::stable_sort(order.begin(), order.end(), [&](std::size_t li, std::size_t ri) {
        const ProfileNode& l = node(li);
        const ProfileNode& r = node(ri);
        const double diff = (l.prop_self + l.prop_child) - (r.prop_self + r.prop_child);
        if (diff < 0.0) return false;
        if (diff > 0.0) return true;
        const char* ln = name_of(li);
        const char* rn = name_of(ri);
        if (!ln || !rn) return !ln && rn;
        if (ln[0] != '_' && rn[0] == '_') return true;
        if (ln[0] == '_' && rn[0] != '_') return false;
        if (l.ncalls != r.ncalls) return l.ncalls > r.ncalls;
        return std::strcmp(ln, rn) < 0;
    });
    for (std::size_t i = 0; i < order.size(); ++i) node(order[i]).index = i + 1;
    for (std::size_t i : order) p_.graph_order.push_back(i < n ? i : Profile::kCycleBase + (i - n));
}

// hist_print()'s order: by self time, then calls, then name.
void Engine::order_flat() {
    const std::size_t n = p_.symbols.size();
    for (std::size_t s = 0; s < n; ++s) p_.flat_order.push_back(s);
    std::stable_sort(p_.flat_order.begin(), p_.flat_order.end(), [&](std::size_t l, std::size_t r) {
        const ProfileNode& a = p_.nodes[l];
        const ProfileNode& b = p_.nodes[r];
        const double diff = b.self_time - a.self_time;
        if (diff > 0.0) return false;
        if (diff < 0.0) return true;
        if (a.ncalls != b.ncalls) return a.ncalls > b.ncalls;
        return std::strcmp(p_.symbols[l].name.c_str(), p_.symbols[r].name.c_str()) < 0;
    });
    // Excluded symbols are not printed in the flat profile.
    std::erase_if(p_.flat_order, [&](std::size_t s) { return excluded_[s]; });
}

}  // namespace

Profile compute_profile(const GmonData& data, const Symbolizer& elf,
                        const ProfileOptions& options) {
    Profile p;
    p.lines = options.lines;
    bool shrunk = false;
    if (options.lines) {
        p.symbols = gprof_line_symbol_table(elf, &shrunk);
    } else {
        p.symbols = gprof_symbol_table(elf, &shrunk);
        for (ProfileSymbol& s : p.symbols) {
            if (const auto where = elf.source_of(s.addr)) {
                s.file = where->file;
                s.line = where->line;
            }
        }
    }
    p.nodes.resize(p.symbols.size());
    std::vector<bool> excluded(p.symbols.size());
    for (std::size_t i = 0; i < p.symbols.size(); ++i)
        excluded[i] = excluded_by_default(p.symbols[i].name);
    Engine engine(p, excluded, shrunk);

    p.has_histogram = !data.histograms.empty();
    p.has_arcs = !data.arcs.empty();
    if (p.has_histogram) {
        const Histogram& first = data.histograms.front();
        p.prof_rate = first.prof_rate;
        p.dimension = first.dimension;
        p.dimension_abbrev = first.dimension_abbrev;
        if (first.bins.empty()) throw std::invalid_argument("histogram without bins");
        // gprof's hist_scale: 2-byte units per bin, from the first histogram.
        const double hist_scale = static_cast<double>((first.high_pc - first.low_pc) / kUnit) /
                                  static_cast<double>(first.bins.size());
        p.bin_bytes = hist_scale * kUnit;
        for (const Histogram& h : data.histograms) {
            p.total_samples += h.total();
            engine.assign_samples(h, hist_scale);
        }
    }
    if (options.prof_rate_override) p.prof_rate = options.prof_rate_override;
    if (p.prof_rate == 0)
        p.prof_rate = 1000;  // no histogram or an old BSD file: rackprof's default
    engine.reserve_arcs(data.arcs.size());
    for (const ArcCount& a : data.arcs) engine.tally(a.from_pc, a.self_pc, a.count);
    engine.assemble();
    engine.order_flat();
    keep_printed_order(p);
    return p;
}

}  // namespace rackprof::gmon
