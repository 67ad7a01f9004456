// The JSON view of a profile: the schema `rackprof convert --report json` prints and the REST
// API serves. Times are in seconds; addresses are hex strings. Documented in gmon/README.md.
//
// Written straight to text (a report with 10^5 arcs as a DOM costs more than the profile
// itself), members in nlohmann's key order so the text equals what dump() printed of the DOM.
#include <algorithm>
#include <cstring>

#include "gmon/report.h"
#include "gmon/sampling_stats.h"

namespace rackprof::gmon {

ArcLineNames arc_line_names(const Profile& p, JsonStream::ErrorHandler on_bad_utf8) {
    ArcLineNames names;
    names.reserve(p.symbols.size());
    for (std::size_t s = 0; s < p.symbols.size(); ++s) {
        std::string& part = names.emplace_back(R"(,"cycle":)");
        if (p.nodes[s].cycle) {
            JsonStream::append_number(part, std::uint64_t{p.nodes[s].cycle});
        } else {
            part += "null";
        }
        part += R"(,"index":)";
        JsonStream::append_number(part, std::uint64_t{p.nodes[s].index});
        part += R"(,"name":)";
        JsonStream(part, -1, 0, on_bad_utf8).value(p.symbols[s].name);
    }
    return names;
}

namespace {

// The most characters an arc line takes besides its other function's part: its fixed text and
// four numbers.
constexpr std::size_t kArcLineChars = 64 + 4 * JsonStream::kMaxNumberChars;

JsonStream& nullable_ratio(JsonStream& out, double numerator, std::uint64_t calls) {
    return calls ? out.value(numerator / static_cast<double>(calls)) : out.value(nullptr);
}

template <std::size_t N>
char* put(char* at, const char (&text)[N]) {
    std::memcpy(at, text, N - 1);
    return at + N - 1;
}

char* put(char* at, const std::string& text) {
    std::memcpy(at, text.data(), text.size());
    return at + text.size();
}

// write_arc's object, compact, written in one pass into room for the longest line: a whole
// call graph writes two per arc, and appending each part on its own checked the room each time.
void write_arc_compact(JsonStream& out, const ArcLineNames& names, const ProfileArc& a,
                       std::size_t other, double hz, std::uint64_t of) {
    std::string& text = out.value_text();
    const std::string& name = names[other];
    const std::size_t start = text.size();
    text.resize(start + kArcLineChars + name.size());
    char* at = text.data() + start;
    at = put(at, R"({"children_seconds":)");
    at = JsonStream::write_number(at, a.child_time / hz);
    at = put(at, R"(,"count":)");
    at = JsonStream::write_number(at, std::uint64_t{a.count});
    at = put(at, name);
    at = put(at, R"(,"of":)");
    at = JsonStream::write_number(at, of);
    at = put(at, R"(,"self_seconds":)");
    at = JsonStream::write_number(at, a.time / hz);
    *at++ = '}';
    text.resize(static_cast<std::size_t>(at - text.data()));
}

// An arc as a parent or child line; `of` is the callee's (or its cycle's) calls from outside.
void write_arc(JsonStream& out, const Profile& p, const ArcLineNames& names, const ProfileArc& a,
               std::size_t other, double hz) {
    const ProfileNode& callee = p.nodes[a.child];
    const std::uint64_t of =
        callee.cycle_head == kNone ? callee.ncalls : p.cycles[callee.cycle_head].ncalls;
    if (out.indent() < 0) return write_arc_compact(out, names, a, other, hz, of);
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
void write_arcs(JsonStream& out, const Profile& p, const ArcLineNames& names, std::size_t symbol,
                bool parents) {
    const double hz = p.prof_rate;
    out.begin_array();
    std::vector<std::size_t> scratch;
    const std::vector<std::size_t>& order = printed_arcs(p, symbol, parents, scratch);
    // Print order is not storage order: at 10^6 arcs each line's arc would be a cache miss
    // that costs more than writing the line, so the arcs a few lines ahead are fetched early.
    constexpr std::size_t kAhead = 8;
    for (std::size_t i = 0; i < order.size(); ++i) {
        if (i + kAhead < order.size()) {
            const auto* ahead = reinterpret_cast<const char*>(&p.arcs[order[i + kAhead]]);
            __builtin_prefetch(ahead);
            __builtin_prefetch(ahead + sizeof(ProfileArc) - 1);
        }
        const ProfileArc& a = p.arcs[order[i]];
        write_arc(out, p, names, a, parents ? a.parent : a.child, hz);
    }
    out.end_array();
}

// A cycle's entry as gprof names it.
std::string cycle_name(std::size_t cycle) {
    return "<cycle " + std::to_string(cycle) + " as a whole>";
}

// The members shared by function and cycle entries sort around the ones that differ, so the
// entry is written in three calls: before "cycle", from "index" to "name", after "name".
void write_graph_entry(JsonStream& out, const Profile& p, const ArcLineNames& names,
                       std::size_t entry) {
    const double hz = p.prof_rate;
    const double print_time = p.print_time > 0 ? p.print_time : 1.0;
    const bool cycle = entry >= Profile::kCycleBase;
    const ProfileNode& n = cycle ? p.cycles[entry - Profile::kCycleBase] : p.nodes[entry];
    out.begin_object().field("called", n.ncalls);
    if (!cycle) write_arcs(out.key("children"), p, names, entry, false);
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
        write_arcs(out.key("parents"), p, names, entry, true);
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

// Call-graph entries from `at` on, until the graph is done (returns true) or `text` (what
// `out` writes to) holds `until` bytes.
bool write_graph_entries(JsonStream& out, const Profile& p, const ArcLineNames& names,
                         const JsonReportOptions& options, ProfileGraphAt& at,
                         const std::string& text, std::size_t until) {
    const auto limit = graph_limit(options);
    for (; at.order < p.graph_order.size(); ++at.order) {
        if (limit && at.entries >= *limit) return true;
        if (text.size() >= until) return false;
        const std::size_t entry = p.graph_order[at.order];
        const bool cycle = entry >= Profile::kCycleBase;
        const ProfileNode& n = cycle ? p.cycles[entry - Profile::kCycleBase] : p.nodes[entry];
        if ((n.ncalls == 0 && n.self_calls == 0 && n.prop_self == 0 && n.prop_child == 0) ||
            !n.print_flag)
            continue;
        if (!options.graph_function.empty() && !entry_named(p, entry, options.graph_function))
            continue;
        write_graph_entry(out, p, names, entry);
        ++at.entries;
    }
    return true;
}

void write_profile_head(JsonStream& out) {
    out.begin_object().key("call_graph").begin_array();
}

// Everything after the call graph's entries.
void write_profile_tail(JsonStream& out, const Profile& p, const JsonReportOptions& options) {
    const double hz = p.prof_rate;
    out.end_array();
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
    // Only a whole call graph is worth its estimate (tens of MB at 10^6 arcs).
    if (!graph_limit(options) && options.graph_function.empty())
        out.reserve(expected_size(p, out.indent()));
    write_profile_head(out);
    ProfileGraphAt at;
    static const std::string unused;
    write_graph_entries(out, p, arc_line_names(p, out.on_bad_utf8()), options, at, unused,
                        std::string::npos);
    write_profile_tail(out, p, options);
}

ProfileJsonPieces::ProfileJsonPieces(std::shared_ptr<const Profile> profile,
                                     JsonReportOptions options, std::size_t piece_bytes)
    : profile_(std::move(profile)),
      options_(std::move(options)),
      piece_bytes_(std::max<std::size_t>(piece_bytes, 1)),
      out_(text_, -1, 0, JsonStream::ErrorHandler::replace),
      names_(arc_line_names(*profile_, JsonStream::ErrorHandler::replace)) {
    write_profile_head(out_);
}

bool ProfileJsonPieces::bounded() const {
    // A limit of a few entries, as the dashboard asks; graph_top=10^6 is the whole graph again.
    constexpr std::size_t kFewEntries = 1000;
    const auto limit = graph_limit(options_);
    return (limit && *limit <= kFewEntries) || !options_.graph_function.empty();
}

std::optional<std::string> ProfileJsonPieces::next() {
    if (done_) return std::nullopt;
    // An entry is written whole, so a piece may pass piece_bytes by one entry.
    text_.reserve(piece_bytes_ + piece_bytes_ / 4);
    const bool graph_done =
        write_graph_entries(out_, *profile_, names_, options_, at_, text_, piece_bytes_);
    if (graph_done) {
        write_profile_tail(out_, *profile_, options_);
        done_ = true;
    }
    std::string piece;
    piece.swap(text_);  // out_ keeps writing to text_, now empty
    return piece;
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
