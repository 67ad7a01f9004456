#include "gmon/callgrind_export.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

#include "gmon/function_index.h"

namespace rackprof::gmon {

namespace {

// Names and paths on one line whatever they hold.
std::string one_line(std::string s) {
    for (char& c : s) {
        if (c == '\n' || c == '\r') c = ' ';
    }
    return s;
}

std::string file_of(const ProfileSymbol& s) {
    return s.file.empty() ? "???" : one_line(s.file);  // callgrind's name for "unknown"
}

std::uint64_t whole(double samples) {
    return samples > 0 ? static_cast<std::uint64_t>(std::llround(samples)) : 0;
}

// The arcs a caller's block lists: those gprof charges time along.
bool listed(const Profile& p, const ProfileArc& a) {
    if (a.parent == a.child || a.count == 0) return false;
    const std::size_t cycle = p.nodes[a.parent].cycle;
    return cycle == 0 || cycle != p.nodes[a.child].cycle;
}

// `total` spread over keys in proportion to their weights, in whole numbers that add up to it
// (largest remainders).
std::map<int, std::uint64_t> spread(std::uint64_t total,
                                    const std::map<int, std::uint64_t>& weights) {
    std::map<int, std::uint64_t> out;
    std::uint64_t sum = 0;
    for (const auto& [key, w] : weights) sum += w;
    if (sum == 0 || total == 0) return out;
    std::vector<std::pair<double, int>> remainders;
    std::uint64_t given = 0;
    for (const auto& [key, w] : weights) {
        const double exact =
            static_cast<double>(total) * static_cast<double>(w) / static_cast<double>(sum);
        out[key] = static_cast<std::uint64_t>(exact);
        given += out[key];
        remainders.emplace_back(exact - std::floor(exact), key);
    }
    std::stable_sort(remainders.begin(), remainders.end(),
                     [](const auto& l, const auto& r) { return l.first > r.first; });
    for (std::size_t i = 0; given < total && i < remainders.size(); ++i, ++given)
        ++out[remainders[i].second];
    return out;
}

// Where each function's samples and calls lie by source line, from the aggregate's PCs and
// call sites, in the profile's own symbol table.
class LineWeights {
  public:
    LineWeights(const Profile& p, const ExportInput& input) : p_(p), elf_(*input.source.elf) {
        for (const PcCount& pc : input.source.aggregate->pc_samples()) {
            if (const auto s = symbol_at(pc.pc)) samples_[*s][line_of(pc.pc)] += pc.count;
        }
        for (const ArcCount& arc : input.source.aggregate->arcs()) {
            const std::uint64_t site = call_site_of(elf_, arc.from_pc);
            auto parent = symbol_at(site);
            auto child = symbol_at(arc.self_pc);
            while (child && *child > 0 && !p.symbols[*child].is_func) child = *child - 1;
            if (parent && child) calls_[{*parent, *child}][line_of(site)] += arc.count;
        }
    }
    // A function's samples by line; empty when its PCs are not known.
    const std::map<int, std::uint64_t>& samples(std::size_t symbol) const {
        const auto it = samples_.find(symbol);
        return it == samples_.end() ? none_ : it->second;
    }
    const std::map<int, std::uint64_t>& calls(std::size_t parent, std::size_t child) const {
        const auto it = calls_.find({parent, child});
        return it == calls_.end() ? none_ : it->second;
    }

  private:
    std::optional<std::size_t> symbol_at(std::uint64_t addr) const {
        const ProfileSymbol* s = symbol_holding(p_.symbols, addr);
        if (!s) return std::nullopt;
        return static_cast<std::size_t>(s - p_.symbols.data());
    }
    int line_of(std::uint64_t addr) {
        auto [it, added] = lines_.try_emplace(addr, 0);
        if (added) {
            if (const auto where = elf_.source_of(addr)) it->second = where->line;
        }
        return it->second;
    }

    const Profile& p_;
    const Symbolizer& elf_;
    std::map<std::uint64_t, int> lines_;
    std::map<std::size_t, std::map<int, std::uint64_t>> samples_;
    std::map<std::pair<std::size_t, std::size_t>, std::map<int, std::uint64_t>> calls_;
    std::map<int, std::uint64_t> none_;
};

// Cost lines "LINE COST", the function's own line where nothing better is known (line 0 is
// DWARF's "no line": its share goes to the function's line too).
void cost_lines(std::ostringstream& body, std::uint64_t cost,
                const std::map<int, std::uint64_t>& weights, int fallback) {
    std::map<int, std::uint64_t> by_line = spread(cost, weights);
    if (by_line.empty()) by_line[fallback] = cost;
    if (const auto zero = by_line.find(0); zero != by_line.end() && fallback != 0) {
        by_line[fallback] += zero->second;
        by_line.erase(zero);
    }
    for (const auto& [line, c] : by_line) body << line << " " << c << "\n";
}

void header(std::ostringstream& out, const ExportInput& input, const Profile& p) {
    out << "# callgrind format\nversion: 1\ncreator: rackprof\n";
    out << "cmd: " << one_line(input.source.elf->path().string()) << "\n";
    const double ms = p.prof_rate ? 1000.0 / p.prof_rate : 0;
    out << "desc: Samples: PC samples at " << p.prof_rate << " Hz (one is " << ms << " ms)\n";
    out << "desc: Calls: costs are gprof's propagated time along each arc, in whole samples\n";
    for (const auto& [key, item] : input.summary.items()) {
        // A stored session's summary is an object: its id stands for it.
        const nlohmann::json& value = item.is_object() && item.contains("id") ? item["id"] : item;
        if (value.is_string() && !value.get<std::string>().empty())
            out << "desc: " << key << ": " << one_line(value.get<std::string>()) << "\n";
        else if (value.is_number() || value.is_array())
            out << "desc: " << key << ": " << one_line(value.dump()) << "\n";
    }
    out << "positions: line\nevents: Samples\n";
}

}  // namespace

std::string callgrind_profile(const ExportInput& input) {
    if (!input.source.elf)
        throw ExportNeedsElf("callgrind needs the firmware's ELF to name functions");
    const Profile p = profile_of(input.source, input.profile_options);
    std::ostringstream out;
    header(out, input, p);
    std::ostringstream body;
    std::uint64_t total = 0;
    LineWeights weights(p, input);
    for (std::size_t s = 0; s < p.symbols.size(); ++s) {
        const ProfileSymbol& sym = p.symbols[s];
        const ProfileNode& n = p.nodes[s];
        if (n.self_time == 0 && n.parents.empty() && n.children.empty()) continue;
        body << "\nfl=" << file_of(sym) << "\nfn=" << one_line(sym.name) << "\n";
        const std::uint64_t self = whole(n.self_time);
        total += self;
        cost_lines(body, self, weights.samples(s), sym.line);
        for (const std::size_t ai : n.children) {
            const ProfileArc& a = p.arcs[ai];
            if (!listed(p, a)) continue;
            const ProfileSymbol& callee = p.symbols[a.child];
            // Each call site its own calls= line; the arc's cost spread over them by calls.
            const auto& sites = weights.calls(s, a.child);
            const std::map<int, std::uint64_t> counts = spread(a.count, sites);
            const std::map<int, std::uint64_t> costs = spread(whole(a.time + a.child_time), sites);
            if (counts.empty()) {
                body << "cfl=" << file_of(callee) << "\ncfn=" << one_line(callee.name) << "\n";
                body << "calls=" << a.count << " " << callee.line << "\n";
                body << sym.line << " " << whole(a.time + a.child_time) << "\n";
                continue;
            }
            for (const auto& [line, calls] : counts) {
                if (calls == 0) continue;
                body << "cfl=" << file_of(callee) << "\ncfn=" << one_line(callee.name) << "\n";
                body << "calls=" << calls << " " << callee.line << "\n";
                const auto cost = costs.find(line);
                body << (line ? line : sym.line) << " " << (cost == costs.end() ? 0 : cost->second)
                     << "\n";
            }
        }
    }
    // Histogram samples gprof credited to no function (outside every symbol's range).
    double credited = 0;
    for (const ProfileNode& n : p.nodes) credited += n.self_time;
    if (const std::uint64_t outside = whole(p.total_time - credited); outside > 0) {
        body << "\nfl=???\nfn=(outside every function)\n0 " << outside << "\n";
        total += outside;
    }
    out << "summary: " << total << "\n" << body.str();
    return out.str();
}

}  // namespace rackprof::gmon
