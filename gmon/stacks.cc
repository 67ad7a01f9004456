#include "gmon/stacks.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <unordered_map>
#include <utility>

namespace rackprof::gmon {

namespace {

using Path = std::vector<std::size_t>;

// The time gprof's call graph charges to a caller along an arc: the callee's (or its cycle's)
// self and children time, in proportion to the calls on this arc.
double share_of(const ProfileArc& a) {
    return a.time + a.child_time;
}

// Where a unit's time goes: a function's (or cycle member's) own self time, or an arc out.
struct Sink {
    std::size_t member = 0;   // the symbol whose self time it is, or the arc's caller
    std::size_t arc = kNone;  // kNone: self time
    double weight = 0;        // samples
};

// A walk that went past StackOptions::max_frames.
struct OverBudget {};

// The top-down walk: flows of samples along paths, each ending as self samples of a path.
class StackWalk {
  public:
    StackWalk(const Profile& profile, const StackOptions& options, double threshold)
        : p_(profile),
          options_(options),
          threshold_(threshold),
          on_path_(profile.symbols.size(), false) {}

    // Every unit (a function off cycles, or a whole cycle) with time no caller is charged for
    // starts stacks of its own.
    void walk_roots() {
        for (std::size_t s = 0; s < p_.symbols.size(); ++s) {
            if (p_.nodes[s].cycle != 0) continue;
            const double total = total_of(function_sinks(s));
            const double root = total - function_inflow(s);
            if (root > kNoise * total) start(s, root);
        }
        for (std::size_t k = 0; k < p_.cycles.size(); ++k) {
            const double total = total_of(cycle_sinks(k));
            const double root = total - cycle_inflow(k);
            if (root > kNoise * total) start(cycle_root_entry(k), root);
        }
    }

    std::map<Path, double> flows;  // path -> its self samples
    double cut = 0;

  private:
    // Less than this fraction of a unit's time uncharged to callers is rounding, not a root.
    static constexpr double kNoise = 1e-9;

    static double total_of(const std::vector<Sink>& sinks) {
        double total = 0;
        for (const Sink& s : sinks) total += s.weight;
        return total;
    }

    bool in_cycle(std::size_t symbol, std::size_t cycle_index) const {
        return p_.nodes[symbol].cycle == cycle_index + 1;
    }

    std::vector<Sink> function_sinks(std::size_t f) const {
        std::vector<Sink> sinks;
        if (p_.nodes[f].prop_self > 0) sinks.push_back({f, kNone, p_.nodes[f].prop_self});
        for (const std::size_t arc : p_.nodes[f].children) {
            const ProfileArc& a = p_.arcs[arc];
            if (a.child != f && share_of(a) > 0) sinks.push_back({f, arc, share_of(a)});
        }
        return sinks;
    }

    double function_inflow(std::size_t f) const {
        double in = 0;
        for (const std::size_t arc : p_.nodes[f].parents) {
            const ProfileArc& a = p_.arcs[arc];
            if (a.parent != f && share_of(a) > 0) in += share_of(a);
        }
        return in;
    }

    // A cycle as a whole: its members' self time and its arcs out of the cycle (arcs among
    // members carry no time in gprof's call graph).
    const std::vector<Sink>& cycle_sinks(std::size_t k) {
        auto [it, fresh] = cycle_sinks_.try_emplace(k);
        if (!fresh) return it->second;
        for (const std::size_t m : p_.cycles[k].members) {
            if (p_.nodes[m].prop_self > 0) it->second.push_back({m, kNone, p_.nodes[m].prop_self});
            for (const std::size_t arc : p_.nodes[m].children) {
                const ProfileArc& a = p_.arcs[arc];
                if (!in_cycle(a.child, k) && share_of(a) > 0)
                    it->second.push_back({m, arc, share_of(a)});
            }
        }
        return it->second;
    }

    double cycle_inflow(std::size_t k) const {
        double in = 0;
        for (const std::size_t m : p_.cycles[k].members) {
            for (const std::size_t arc : p_.nodes[m].parents) {
                const ProfileArc& a = p_.arcs[arc];
                if (!in_cycle(a.parent, k) && share_of(a) > 0) in += share_of(a);
            }
        }
        return in;
    }

    // A cycle no caller explains is entered at its least-called member (the first, on ties).
    std::size_t cycle_root_entry(std::size_t k) const {
        const auto& members = p_.cycles[k].members;
        return *std::min_element(members.begin(), members.end(), [&](std::size_t l, std::size_t r) {
            return p_.nodes[l].ncalls < p_.nodes[r].ncalls;
        });
    }

    void start(std::size_t symbol, double samples) {
        push(symbol);
        body(symbol, samples);
        pop();
    }

    void body(std::size_t symbol, double samples) {
        if (samples < threshold_) return keep_cut(samples);
        if (p_.nodes[symbol].cycle != 0)
            return cycle_body(p_.nodes[symbol].cycle - 1, symbol, samples);
        function_body(symbol, samples);
    }

    // Self samples of the path as it stands.
    void keep(double samples) {
        visited_ += path_.size();
        if (visited_ > options_.max_frames) throw OverBudget{};
        flows[path_] += samples;
    }
    void keep_cut(double samples) {
        keep(samples);
        cut += samples;
    }

    // Frames are not pushed past the depth limit, nor a function already on the path (a
    // cycle gprof did not collapse must not loop).
    bool push(std::size_t symbol) {
        if (path_.size() >= options_.max_depth || on_path_[symbol]) return false;
        if (++visited_ > options_.max_frames) throw OverBudget{};
        path_.push_back(symbol);
        on_path_[symbol] = true;
        return true;
    }
    void pop() {
        on_path_[path_.back()] = false;
        path_.pop_back();
    }

    void descend(std::size_t child, double samples) {
        if (samples < threshold_ || !push(child)) return keep_cut(samples);
        body(child, samples);
        pop();
    }

    void spread(const std::vector<Sink>& sinks, double samples,
                const std::function<void(const Sink&, double)>& to_sink) {
        const double total = total_of(sinks);
        if (total <= 0) return keep(samples);  // nothing below: all its own
        for (const Sink& s : sinks) to_sink(s, samples * (s.weight / total));
    }

    void function_body(std::size_t f, double samples) {
        spread(function_sinks(f), samples, [&](const Sink& s, double part) {
            if (s.arc == kNone) return keep(part);
            descend(p_.arcs[s.arc].child, part);
        });
    }

    // The path ends at `entry`, the member the cycle was called at; each sink is reached
    // through the shortest chain of calls from there.
    void cycle_body(std::size_t k, std::size_t entry, double samples) {
        const std::vector<Sink>& sinks = cycle_sinks(k);  // a map's elements stay put
        spread(sinks, samples, [&](const Sink& s, double part) {
            if (part < threshold_) return keep_cut(part);
            std::size_t pushed = 0;
            bool reached = true;
            for (const std::size_t m : chain(k, entry, s.member)) {
                if (!push(m)) {
                    reached = false;
                    break;
                }
                ++pushed;
            }
            if (!reached) {
                keep_cut(part);
            } else if (s.arc == kNone) {
                keep(part);
            } else {
                descend(p_.arcs[s.arc].child, part);
            }
            for (; pushed > 0; --pushed) pop();
        });
    }

    // Members after `entry` on the shortest chain of calls inside cycle k to `member`
    // (breadth first over the arcs in gprof's order).
    std::vector<std::size_t> chain(std::size_t k, std::size_t entry, std::size_t member) {
        if (member == entry) return {};
        auto [it, fresh] = previous_.try_emplace({k, entry});
        auto& previous = it->second;
        if (fresh) {
            std::deque<std::size_t> queue{entry};
            previous[entry] = entry;
            while (!queue.empty()) {
                const std::size_t at = queue.front();
                queue.pop_front();
                for (const std::size_t arc : p_.nodes[at].children) {
                    const std::size_t next = p_.arcs[arc].child;
                    if (!in_cycle(next, k) || previous.count(next)) continue;
                    previous[next] = at;
                    queue.push_back(next);
                }
            }
        }
        if (!previous.count(member)) return {member};  // not reachable: called as if directly
        std::vector<std::size_t> out;
        for (std::size_t at = member; at != entry; at = previous.at(at)) out.push_back(at);
        std::reverse(out.begin(), out.end());
        return out;
    }

    const Profile& p_;
    StackOptions options_;
    double threshold_;
    std::size_t visited_ = 0;  // frames pushed and stored so far
    Path path_;
    std::vector<bool> on_path_;
    std::map<std::size_t, std::vector<Sink>> cycle_sinks_;
    std::map<std::pair<std::size_t, std::size_t>, std::unordered_map<std::size_t, std::size_t>>
        previous_;
};

// Samples as integers summing to `total` exactly: scaled to it, floored, and the remainder
// given to the largest fractions (Hamilton's method; ties to the earlier path).
std::vector<std::uint64_t> apportion(const std::vector<double>& values, std::uint64_t total) {
    std::vector<std::uint64_t> out(values.size(), 0);
    const double sum = std::accumulate(values.begin(), values.end(), 0.0);
    if (values.empty() || sum <= 0) return out;
    const double scale = static_cast<double>(total) / sum;
    std::vector<double> fraction(values.size());
    std::uint64_t given = 0;
    for (std::size_t i = 0; i < values.size(); ++i) {
        const double x = values[i] * scale;
        const double whole = std::floor(x);
        out[i] = static_cast<std::uint64_t>(whole);
        fraction[i] = x - whole;
        given += out[i];
    }
    std::vector<std::size_t> order(values.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t l, std::size_t r) { return fraction[l] > fraction[r]; });
    // Rounding error cannot move the floors' sum by more than the number of values; still,
    // the loops settle any difference so the sum is exact.
    for (std::size_t i = 0; given < total; i = (i + 1) % order.size(), ++given) ++out[order[i]];
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t l, std::size_t r) { return out[l] > out[r]; });
    for (std::size_t i = 0; given > total; --given) {
        while (out[order[i]] == 0) i = (i + 1) % order.size();
        --out[order[i]];
    }
    return out;
}

}  // namespace

std::string_view frame_name(const Profile& profile, std::size_t frame) {
    if (frame == kUnknownFrame || frame >= profile.symbols.size()) return "[unknown]";
    return profile.symbols[frame].name;
}

EstimatedStacks estimate_stacks(const Profile& profile, const StackOptions& options) {
    EstimatedStacks out;
    out.total_samples = profile.total_samples;
    if (profile.total_samples == 0) return out;

    std::optional<StackWalk> walk;
    for (double fraction = options.min_fraction;; fraction = std::max(fraction * 10, 1e-6)) {
        walk.emplace(profile, options, fraction * static_cast<double>(profile.total_samples));
        try {
            walk->walk_roots();
            out.min_fraction = fraction;
            break;
        } catch (const OverBudget&) {
            if (fraction >= 1) throw std::length_error("call stacks: too many roots to walk");
        }
    }
    out.cut_samples = walk->cut;
    auto& flows = walk->flows;
    // What the call graph leaves out of a function (the share of its time from calls by
    // excluded functions) is a stack of its own.
    for (std::size_t s = 0; s < profile.symbols.size(); ++s) {
        const double left_out = profile.nodes[s].self_time - profile.nodes[s].prop_self;
        if (left_out > 0) flows[{s}] += left_out;
    }
    double placed = 0;
    for (const auto& [path, samples] : flows) placed += samples;
    const double unknown = static_cast<double>(profile.total_samples) - placed;
    if (unknown > 0) flows[{kUnknownFrame}] += unknown;

    std::vector<double> values;
    values.reserve(flows.size());
    for (const auto& [path, samples] : flows) values.push_back(samples);
    const auto counts = apportion(values, profile.total_samples);
    std::size_t i = 0;
    for (auto& [path, samples] : flows) {
        if (counts[i] > 0) out.stacks.push_back({path, counts[i]});
        ++i;
    }
    std::sort(out.stacks.begin(), out.stacks.end(),
              [&](const EstimatedStack& l, const EstimatedStack& r) {
                  return std::lexicographical_compare(l.frames.begin(), l.frames.end(),
                                                      r.frames.begin(), r.frames.end(),
                                                      [&](std::size_t a, std::size_t b) {
                                                          const auto na = frame_name(profile, a);
                                                          const auto nb = frame_name(profile, b);
                                                          return na != nb ? na < nb : a < b;
                                                      });
              });
    return out;
}

}  // namespace rackprof::gmon
