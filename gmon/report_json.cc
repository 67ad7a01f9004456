// The JSON view of a profile: the schema `rackprof convert --report json` prints and the REST
// API serves. Times are in seconds; addresses are hex strings. Documented in gmon/README.md.
//
// Written straight to text (a report with 10^5 arcs as a DOM costs more than the profile
// itself), members in nlohmann's key order so the text equals what dump() printed of the DOM.
#include <algorithm>

#include "gmon/report.h"
#include "gmon/sampling_stats.h"

namespace rackprof::gmon {

namespace {

JsonStream& nullable_ratio(JsonStream& out, double numerator, std::uint64_t calls) {
    return calls ? out.value(numerator / static_cast<double>(calls)) : out.value(nullptr);
}

// An arc as a parent or child line; `of` is the callee's (or its cycle's) calls from outside.
void write_arc(JsonStream& out, const Profile& p, const ProfileArc& a, std::size_t other,
               double hz) {
    const ProfileNode& callee = p.nodes[a.child];
    const std::uint64_t of =
        callee.cycle_head == kNone ? callee.ncalls : p.cycles[callee.cycle_head].ncalls;
    out.begin_object()
        .field("children_seconds", a.child_time / hz)
        .field("count", a.count)
        .key("cycle");
    // The other function's cycle: a line inside the entry's own cycle (or a recursive call) is
    // one gprof prints with its count alone.
    p.nodes[other].cycle ? out.value(p.nodes[other].cycle) : out.value(nullptr);
    out.field("index", p.nodes[other].index)
        .field("name", p.symbols[other].name)
        .field("of", of)
        .field("self_seconds", a.time / hz)
        .end_object();
}

void write_flat_row(JsonStream& out, const Profile& p, std::size_t s, double percent,
                    double cumulative) {
    const double hz = p.prof_rate;
    const ProfileNode& n = p.nodes[s];
    const ProfileSymbol& sym = p.symbols[s];
    out.begin_object().field("address", hex_address(sym.addr)).key("calls");
    n.ncalls ? out.value(n.ncalls) : out.value(nullptr);
    out.field("cumulative_seconds", cumulative / hz)
        .field("name", sym.name)
        .field("percent", percent)
        .field("samples", n.self_time)
        .key("self_ms_per_call");
    nullable_ratio(out, 1000 * n.self_time / hz, n.ncalls);
    // Sampling error: the share's interval, and the same fractions of the total seconds.
    const auto [low, high] = self_percent_interval(p, s);
    const double total_seconds = p.total_time / hz;
    out.key("self_percent_interval").begin_array().value(low).value(high).end_array();
    out.field("self_seconds", n.self_time / hz)
        .key("self_seconds_interval")
        .begin_array()
        .value(low / 100 * total_seconds)
        .value(high / 100 * total_seconds)
        .end_array();
    if (!sym.file.empty()) {
        out.key("source")
            .begin_object()
            .field("file", sym.file)
            .field("line", sym.line)
            .end_object();
    }
    out.key("total_ms_per_call");
    nullable_ratio(out, 1000 * (n.self_time + n.child_time) / hz, n.ncalls);
    // Inclusive time, as the function's call-graph entry has it (self + children).
    out.field("total_seconds", (n.prop_self + n.prop_child) / hz).end_object();
}

// Flat rows in gprof's order, less those without time or calls, trimmed by the options.
void write_flat(JsonStream& out, const Profile& p, const JsonReportOptions& options) {
    const double total = p.total_time > 0 ? p.total_time : 1.0;
    out.begin_array();
    double cumulative = 0;
    std::size_t rows = 0;
    for (std::size_t s : p.flat_order) {
        const ProfileNode& n = p.nodes[s];
        if (n.ncalls == 0 && n.self_time == 0) continue;
        cumulative += n.self_time;
        const double percent = 100 * n.self_time / total;
        if (percent < options.min_percent) continue;
        if (options.top && rows >= options.top) break;
        write_flat_row(out, p, s, percent, cumulative);
        ++rows;
    }
    out.end_array();
}

// In gprof's print order: parents ascending, children descending (sorted_arcs).
void write_arcs(JsonStream& out, const Profile& p, const std::vector<std::size_t>& arcs,
                bool parents) {
    const double hz = p.prof_rate;
    out.begin_array();
    for (std::size_t ai : sorted_arcs(p, arcs, parents)) {
        const ProfileArc& a = p.arcs[ai];
        write_arc(out, p, a, parents ? a.parent : a.child, hz);
    }
    out.end_array();
}

// A cycle's entry as gprof names it.
std::string cycle_name(std::size_t cycle) {
    return "<cycle " + std::to_string(cycle) + " as a whole>";
}

// The members shared by function and cycle entries sort around the ones that differ, so the
// entry is written in three calls: before "cycle", from "index" to "name", after "name".
void write_graph_entry(JsonStream& out, const Profile& p, std::size_t entry) {
    const double hz = p.prof_rate;
    const double print_time = p.print_time > 0 ? p.print_time : 1.0;
    const bool cycle = entry >= Profile::kCycleBase;
    const ProfileNode& n = cycle ? p.cycles[entry - Profile::kCycleBase] : p.nodes[entry];
    out.begin_object().field("called", n.ncalls);
    if (!cycle) write_arcs(out.key("children"), p, n.children, false);
    out.field("children_seconds", n.prop_child / hz).key("cycle");
    cycle || n.cycle ? out.value(n.cycle) : out.value(nullptr);
    out.field("index", n.index);
    if (cycle) {
        out.key("members").begin_array();
        for (std::size_t m : sorted_members(p, n.members)) {  // as gprof's cycle entry lists them
            const ProfileNode& member = p.nodes[m];
            out.begin_object()
                .field("called", member.ncalls)
                .field("children_seconds", member.prop_child / hz)
                .field("index", member.index)
                .field("name", p.symbols[m].name)
                .field("self_calls", member.self_calls)
                .field("self_seconds", member.prop_self / hz)
                .end_object();
        }
        out.end_array().field("name", cycle_name(n.cycle));
    } else {
        out.field("name", p.symbols[entry].name);
        write_arcs(out.key("parents"), p, n.parents, true);
    }
    out.field("percent", 100 * (n.prop_self + n.prop_child) / print_time)
        .field("self_calls", n.self_calls)
        .field("self_seconds", n.prop_self / hz);
    if (!cycle) out.field("spontaneous", n.parents.empty());
    out.end_object();
}

// Whether the entry is written with this name (graph_function's test).
bool entry_named(const Profile& p, std::size_t entry, const std::string& name) {
    if (entry < Profile::kCycleBase) return p.symbols[entry].name == name;
    return cycle_name(p.cycles[entry - Profile::kCycleBase].cycle) == name;
}

std::optional<std::size_t> graph_limit(const JsonReportOptions& options) {
    if (options.graph_top) return options.graph_top;
    if (options.top) return options.top;
    return std::nullopt;
}

void write_call_graph(JsonStream& out, const Profile& p, const JsonReportOptions& options) {
    out.begin_array();
    const auto limit = graph_limit(options);
    std::size_t entries = 0;
    for (std::size_t entry : p.graph_order) {
        if (limit && entries >= *limit) break;
        const bool cycle = entry >= Profile::kCycleBase;
        const ProfileNode& n = cycle ? p.cycles[entry - Profile::kCycleBase] : p.nodes[entry];
        if ((n.ncalls == 0 && n.self_calls == 0 && n.prop_self == 0 && n.prop_child == 0) ||
            !n.print_flag)
            continue;
        if (!options.graph_function.empty() && !entry_named(p, entry, options.graph_function))
            continue;
        write_graph_entry(out, p, entry);
        ++entries;
    }
    out.end_array();
}

// A little more than the object will take: per arc, two objects of six members at depth 4
// (some 200 bytes indented by 2) and the name; per symbol, its entry and flat row.
std::size_t expected_size(const Profile& p, int indent) {
    const std::size_t per_level = indent > 0 ? static_cast<std::size_t>(indent) : 0;
    std::size_t bytes = 4096;
    for (std::size_t s = 0; s < p.symbols.size(); ++s) {
        const std::size_t name = p.symbols[s].name.size() + p.symbols[s].file.size();
        const std::size_t arcs = p.nodes[s].parents.size() + p.nodes[s].children.size();
        bytes += arcs * (name + 140 + 30 * per_level) + 2 * (name + 400 + 40 * per_level);
    }
    return bytes;
}

}  // namespace

void write_profile_json(JsonStream& out, const Profile& p, const JsonReportOptions& options) {
    const double hz = p.prof_rate;
    // Only a whole call graph is worth its estimate (tens of MB at 10^6 arcs).
    if (!graph_limit(options) && options.graph_function.empty())
        out.reserve(expected_size(p, out.indent()));
    out.begin_object();
    write_call_graph(out.key("call_graph"), p, options);
    write_flat(out.key("flat"), p, options);
    out.field("granularity_bytes", p.bin_bytes)
        .field("prof_rate", p.prof_rate)
        .field("propagated_seconds", p.print_time / hz)
        .field("seconds_per_sample", p.seconds_per_sample())
        .field("total_samples", p.total_samples)
        .field("total_seconds", p.total_time / hz);
    if (options.more_fields) options.more_fields(out);
    out.end_object();
}

std::pair<double, double> self_percent_interval(const Profile& p, std::size_t symbol) {
    const auto [low, high] = wilson_interval_of_credit(p.nodes[symbol].self_time, p.total_time);
    return {100 * low, 100 * high};
}

nlohmann::json profile_json(const Profile& p, const JsonReportOptions& options) {
    // Names that are not UTF-8 become U+FFFD here: the parser would reject them.
    std::string text;
    JsonStream out(text, -1, 0, JsonStream::ErrorHandler::replace);
    write_profile_json(out, p, options);
    return nlohmann::json::parse(text);
}

}  // namespace rackprof::gmon
