// The JSON view of a profile: the schema `rackprof convert --report json` prints and the REST
// API serves. Times are in seconds; addresses are hex strings. Documented in gmon/README.md.
#include <algorithm>

#include "gmon/report.h"

namespace rackprof::gmon {

namespace {

nlohmann::json nullable_ratio(double numerator, std::uint64_t calls) {
    return calls ? nlohmann::json(numerator / static_cast<double>(calls)) : nlohmann::json(nullptr);
}

nlohmann::json arc_json(const Profile& p, const ProfileArc& a, std::size_t other, double hz) {
    const ProfileNode& o = p.nodes[other];
    const ProfileNode& callee = p.nodes[a.child];
    const std::uint64_t of =
        callee.cycle_head == kNone ? callee.ncalls : p.cycles[callee.cycle_head].ncalls;
    return {
        {"name", p.symbols[other].name},         {"index", o.index}, {"self_seconds", a.time / hz},
        {"children_seconds", a.child_time / hz}, {"count", a.count}, {"of", of}};
}

}  // namespace

nlohmann::json profile_json(const Profile& p, const JsonReportOptions& options) {
    const double hz = p.prof_rate;
    const double total = p.total_time > 0 ? p.total_time : 1.0;
    const double print_time = p.print_time > 0 ? p.print_time : 1.0;

    nlohmann::json flat = nlohmann::json::array();
    double cumulative = 0;
    for (std::size_t s : p.flat_order) {
        const ProfileNode& n = p.nodes[s];
        if (n.ncalls == 0 && n.self_time == 0) continue;
        cumulative += n.self_time;
        const double percent = 100 * n.self_time / total;
        if (percent < options.min_percent) continue;
        if (options.top && flat.size() >= options.top) break;
        const ProfileSymbol& sym = p.symbols[s];
        nlohmann::json row = {
            {"name", sym.name},
            {"address", hex_address(sym.addr)},
            {"percent", percent},
            {"cumulative_seconds", cumulative / hz},
            {"self_seconds", n.self_time / hz},
            {"samples", n.self_time},
            {"calls", n.ncalls ? nlohmann::json(n.ncalls) : nlohmann::json(nullptr)},
            {"self_ms_per_call", nullable_ratio(1000 * n.self_time / hz, n.ncalls)},
            {"total_ms_per_call",
             nullable_ratio(1000 * (n.self_time + n.child_time) / hz, n.ncalls)}};
        if (!sym.file.empty()) row["source"] = {{"file", sym.file}, {"line", sym.line}};
        flat.push_back(std::move(row));
    }

    nlohmann::json graph = nlohmann::json::array();
    for (std::size_t entry : p.graph_order) {
        const bool cycle = entry >= Profile::kCycleBase;
        const ProfileNode& n = cycle ? p.cycles[entry - Profile::kCycleBase] : p.nodes[entry];
        if ((n.ncalls == 0 && n.self_calls == 0 && n.prop_self == 0 && n.prop_child == 0) ||
            !n.print_flag)
            continue;
        nlohmann::json e = {{"index", n.index},
                            {"percent", 100 * (n.prop_self + n.prop_child) / print_time},
                            {"self_seconds", n.prop_self / hz},
                            {"children_seconds", n.prop_child / hz},
                            {"called", n.ncalls},
                            {"self_calls", n.self_calls}};
        if (cycle) {
            e["name"] = "<cycle " + std::to_string(n.cycle) + " as a whole>";
            e["cycle"] = n.cycle;
            nlohmann::json members = nlohmann::json::array();
            for (std::size_t m : n.members)
                members.push_back({{"name", p.symbols[m].name}, {"index", p.nodes[m].index}});
            e["members"] = members;
        } else {
            e["name"] = p.symbols[entry].name;
            e["cycle"] = n.cycle ? nlohmann::json(n.cycle) : nlohmann::json(nullptr);
            e["spontaneous"] = n.parents.empty();
            nlohmann::json parents = nlohmann::json::array();
            for (std::size_t ai : n.parents)
                parents.push_back(arc_json(p, p.arcs[ai], p.arcs[ai].parent, hz));
            nlohmann::json children = nlohmann::json::array();
            for (std::size_t ai : n.children)
                children.push_back(arc_json(p, p.arcs[ai], p.arcs[ai].child, hz));
            e["parents"] = parents;
            e["children"] = children;
        }
        graph.push_back(std::move(e));
    }

    return {{"seconds_per_sample", p.seconds_per_sample()},
            {"prof_rate", p.prof_rate},
            {"total_seconds", p.total_time / hz},
            {"total_samples", p.total_samples},
            {"propagated_seconds", p.print_time / hz},
            {"granularity_bytes", p.bin_bytes},
            {"flat", flat},
            {"call_graph", graph}};
}

}  // namespace rackprof::gmon
