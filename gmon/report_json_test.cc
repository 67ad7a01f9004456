// The streamed JSON report against the same report built as one nlohmann document: the same
// bytes, compact and indented, on a sizeable random profile with cycles, self-calls, sources and
// awkward names.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <random>

#include "gmon/json_stream.h"
#include "gmon/report.h"
#include "gmon/sampling_stats.h"
#include "gmon/synthetic_elf.h"

namespace rackprof::gmon {
namespace {

using nlohmann::json;

// The JSON report's "profile" object built as one document: the reference.
json reference_ratio(double numerator, std::uint64_t calls) {
    return calls ? json(numerator / static_cast<double>(calls)) : json(nullptr);
}

json reference_arc(const Profile& p, const ProfileArc& a, std::size_t other, double hz) {
    const ProfileNode& o = p.nodes[other];
    const ProfileNode& callee = p.nodes[a.child];
    const std::uint64_t of =
        callee.cycle_head == kNone ? callee.ncalls : p.cycles[callee.cycle_head].ncalls;
    return {{"name", p.symbols[other].name},
            {"index", o.index},
            {"self_seconds", a.time / hz},
            {"children_seconds", a.child_time / hz},
            {"count", a.count},
            {"of", of},
            {"cycle", o.cycle ? json(o.cycle) : json(nullptr)}};
}

json reference_flat(const Profile& p, const JsonReportOptions& options) {
    const double hz = p.prof_rate;
    const double total = p.total_time > 0 ? p.total_time : 1.0;
    json flat = json::array();
    double cumulative = 0;
    for (std::size_t s : p.flat_order) {
        const ProfileNode& n = p.nodes[s];
        if (n.ncalls == 0 && n.self_time == 0) continue;
        cumulative += n.self_time;
        const double percent = 100 * n.self_time / total;
        if (percent < options.min_percent) continue;
        if (options.top && flat.size() >= options.top) break;
        const ProfileSymbol& sym = p.symbols[s];
        json row = {{"name", sym.name},
                    {"address", hex_address(sym.addr)},
                    {"percent", percent},
                    {"cumulative_seconds", cumulative / hz},
                    {"self_seconds", n.self_time / hz},
                    {"samples", n.self_time},
                    {"calls", n.ncalls ? json(n.ncalls) : json(nullptr)},
                    {"self_ms_per_call", reference_ratio(1000 * n.self_time / hz, n.ncalls)},
                    {"total_ms_per_call",
                     reference_ratio(1000 * (n.self_time + n.child_time) / hz, n.ncalls)},
                    {"total_seconds", (n.prop_self + n.prop_child) / hz}};
        if (!sym.file.empty()) row["source"] = {{"file", sym.file}, {"line", sym.line}};
        const auto [low, high] = wilson_interval_of_credit(n.self_time, p.total_time);
        row["self_percent_interval"] = {100 * low, 100 * high};
        row["self_seconds_interval"] = {100 * low / 100 * (p.total_time / hz),
                                        100 * high / 100 * (p.total_time / hz)};
        flat.push_back(std::move(row));
    }
    return flat;
}

json reference_graph_entry(const Profile& p, std::size_t entry) {
    const double hz = p.prof_rate;
    const double print_time = p.print_time > 0 ? p.print_time : 1.0;
    const bool cycle = entry >= Profile::kCycleBase;
    const ProfileNode& n = cycle ? p.cycles[entry - Profile::kCycleBase] : p.nodes[entry];
    json e = {{"index", n.index},
              {"percent", 100 * (n.prop_self + n.prop_child) / print_time},
              {"self_seconds", n.prop_self / hz},
              {"children_seconds", n.prop_child / hz},
              {"called", n.ncalls},
              {"self_calls", n.self_calls}};
    if (cycle) {
        e["name"] = "<cycle " + std::to_string(n.cycle) + " as a whole>";
        e["cycle"] = n.cycle;
        json members = json::array();
        for (std::size_t m : sorted_members(p, n.members))
            members.push_back({{"name", p.symbols[m].name},
                               {"index", p.nodes[m].index},
                               {"called", p.nodes[m].ncalls},
                               {"self_calls", p.nodes[m].self_calls},
                               {"self_seconds", p.nodes[m].prop_self / hz},
                               {"children_seconds", p.nodes[m].prop_child / hz}});
        e["members"] = members;
        return e;
    }
    e["name"] = p.symbols[entry].name;
    e["cycle"] = n.cycle ? json(n.cycle) : json(nullptr);
    e["spontaneous"] = n.parents.empty();
    json parents = json::array();
    for (std::size_t ai : sorted_arcs(p, n.parents, true))
        parents.push_back(reference_arc(p, p.arcs[ai], p.arcs[ai].parent, hz));
    json children = json::array();
    for (std::size_t ai : sorted_arcs(p, n.children, false))
        children.push_back(reference_arc(p, p.arcs[ai], p.arcs[ai].child, hz));
    e["parents"] = parents;
    e["children"] = children;
    return e;
}

json reference_profile_json(const Profile& p, const JsonReportOptions& options) {
    const double hz = p.prof_rate;
    json graph = json::array();
    for (std::size_t entry : p.graph_order) {
        const bool cycle = entry >= Profile::kCycleBase;
        const ProfileNode& n = cycle ? p.cycles[entry - Profile::kCycleBase] : p.nodes[entry];
        if ((n.ncalls == 0 && n.self_calls == 0 && n.prop_self == 0 && n.prop_child == 0) ||
            !n.print_flag)
            continue;
        // top trims the graph too, unless graph_top says otherwise (0: no entries)
        const std::size_t limit = options.graph_top.value_or(options.top);
        if ((options.graph_top || options.top) && graph.size() >= limit) break;
        json e = reference_graph_entry(p, entry);
        if (!options.graph_function.empty() && e["name"] != options.graph_function) continue;
        graph.push_back(std::move(e));
    }
    return {{"seconds_per_sample", p.seconds_per_sample()}, {"prof_rate", p.prof_rate},
            {"total_seconds", p.total_time / hz},           {"total_samples", p.total_samples},
            {"propagated_seconds", p.print_time / hz},      {"granularity_bytes", p.bin_bytes},
            {"flat", reference_flat(p, options)},           {"call_graph", graph}};
}

// 300 functions (some static, some labels), 6000 call sites among them (cycles and
// self-recursion arise), samples everywhere; then sources and names JSON must escape.
Profile random_profile(std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<SyntheticFunction> functions;
    std::uint32_t addr = 0x1000;
    for (int i = 0; i < 300; ++i) {
        const auto size = 2 * static_cast<std::uint32_t>(4 + rng() % 60);
        functions.push_back(
            {"fn_" + std::to_string(i), addr, size, rng() % 4 != 0, rng() % 20 != 0});
        addr += size;
    }
    const auto path = std::filesystem::temp_directory_path() /
                      ("rackprof-report-json-test-" + std::to_string(::getpid()) + ".elf");
    write_synthetic_elf(path, functions, 0x1000, addr);
    const auto elf = Symbolizer::load(path);
    std::filesystem::remove(path);
    Aggregate aggregate;
    for (int i = 0; i < 6000; ++i) {
        const auto& from = functions[rng() % functions.size()];
        const auto& to = functions[rng() % 40];  // a few popular callees: big parent lists
        aggregate.add_arc((from.addr + 2 * static_cast<std::uint32_t>(rng() % (from.size / 2))) | 1,
                          to.addr | 1, 1 + rng() % (rng() % 8 == 0 ? 5'000'000'000ull : 300));
    }
    for (int i = 0; i < 3000; ++i)
        aggregate.add_pc(0x1000 + 2 * (rng() % ((addr - 0x1000) / 2)), 1 + rng() % 70);
    Profile p =
        compute_profile(to_gmon_data(aggregate, {0x1000, addr, 2, 997}, elf->layout()).data, *elf);
    static const char* kNames[] = {"quote\"d",          "back\\slash",   "tab\there",
                                   "ctl\x01\x1f\x7f",   "caf\xc3\xa9",   "\xe2\x82\xac_euro",
                                   "bad\xff\xfe utf-8", "_ZN3foo3barEv", "<cycle 1 as a whole>"};
    for (std::size_t i = 0; i < std::size(kNames); ++i) p.symbols[1 + 7 * i].name = kNames[i];
    for (std::size_t i = 0; i < p.symbols.size(); i += 3) {
        p.symbols[i].file = i % 2 ? "src/main.c" : "/abs/dir/\xc3\xbc.c";
        p.symbols[i].line = static_cast<int>(i % 5) - 1;  // 0 and -1 as well
    }
    return p;
}

TEST_CASE("the streamed JSON report equals the document it replaced, byte for byte") {
    const auto replace = JsonStream::ErrorHandler::replace;
    for (std::uint64_t seed : {1, 2, 3}) {
        CAPTURE(seed);
        const Profile p = random_profile(seed);
        REQUIRE(p.arcs.size() > 3000);
        CHECK_FALSE(p.cycles.empty());
        const JsonReportOptions kOptions[] = {
            {}, {10, 0.0, {}, {}, {}}, {0, 0.5, {}, {}, {}}, {3, 0.2, {}, {}, {}}};
        for (const JsonReportOptions& options : kOptions) {
            CAPTURE(options.top);
            CAPTURE(options.min_percent);
            const json reference = reference_profile_json(p, options);
            for (int indent : {-1, 0, 2, 4}) {
                CAPTURE(indent);
                std::string text;
                JsonStream out(text, indent, 0, replace);
                write_profile_json(out, p, options);
                CHECK(text == reference.dump(indent, ' ', false, replace));
            }
            CHECK(profile_json(p, options).dump() == reference.dump(-1, ' ', false, replace));
            if (options.top) CHECK(reference["call_graph"].size() == options.top);
        }
    }
}

TEST_CASE("graph_top and graph_function trim the call graph alone, as gprof -q<name> does") {
    const auto replace = JsonStream::ErrorHandler::replace;
    const Profile p = random_profile(4);
    // As a client reads it: names that are not UTF-8 replaced.
    const json whole = json::parse(reference_profile_json(p, {}).dump(-1, ' ', false, replace));
    REQUIRE(whole["call_graph"].size() > 40);
    std::size_t at = 17;  // a plain name, past the first few
    while (!whole["call_graph"][at]["name"].get<std::string>().starts_with("fn_")) ++at;
    const std::string named = whole["call_graph"][at]["name"];
    std::string cycle;
    for (const auto& e : whole["call_graph"])
        if (e.contains("members")) cycle = e["name"];
    REQUIRE_FALSE(cycle.empty());
    const auto with = [](std::size_t top, std::optional<std::size_t> graph_top,
                         std::string function) {
        JsonReportOptions o;
        o.top = top;
        o.graph_top = graph_top;
        o.graph_function = std::move(function);
        return o;
    };
    const JsonReportOptions kOptions[] = {with(0, 40, ""),
                                          with(0, 0, ""),
                                          with(3, 40, ""),
                                          with(0, std::nullopt, named),
                                          with(1, {}, cycle),
                                          with(0, 0, named),
                                          with(0, {}, "none of them")};
    for (const JsonReportOptions& options : kOptions) {
        CAPTURE(options.top);
        CAPTURE(options.graph_function);
        const json reference = reference_profile_json(p, options);
        std::string text;
        JsonStream out(text, -1, 0, replace);
        write_profile_json(out, p, options);
        CHECK(text == reference.dump(-1, ' ', false, replace));
        // The flat rows are top's alone.
        CHECK(reference["flat"] == reference_profile_json(p, with(options.top, {}, ""))["flat"]);
    }
    // What each trims to, spelled out (the reference could share a mistake with the stream).
    const auto graph_of = [&](const JsonReportOptions& o) {
        std::string text;
        JsonStream out(text, -1, 0, replace);
        write_profile_json(out, p, o);
        return json::parse(text)["call_graph"];
    };
    CHECK(graph_of(with(0, 40, "")).size() == 40);
    CHECK(graph_of(with(0, 40, ""))[39] == whole["call_graph"][39]);
    CHECK(graph_of(with(3, 40, "")).size() == 40);
    CHECK(graph_of(with(0, 0, "")).empty());
    CHECK(graph_of(with(0, {}, named)) == json::array({whole["call_graph"][at]}));
    const json cycles = graph_of(with(0, {}, cycle));
    CHECK_FALSE(cycles.empty());  // a symbol may be named like a cycle too (random_profile's)
    CHECK(std::any_of(cycles.begin(), cycles.end(),
                      [](const json& e) { return e.contains("members"); }));
    CHECK(graph_of(with(0, {}, "none of them")).empty());
}

TEST_CASE("the profile's JSON in pieces is the same text, each piece about the size asked") {
    const auto replace = JsonStream::ErrorHandler::replace;
    for (std::uint64_t seed : {1, 2}) {
        CAPTURE(seed);
        const auto p = std::make_shared<const Profile>(random_profile(seed));
        JsonReportOptions top;
        top.graph_top = 40;
        for (const JsonReportOptions& options : {JsonReportOptions{}, top}) {
            const std::string whole =
                reference_profile_json(*p, options).dump(-1, ' ', false, replace);
            for (std::size_t piece_bytes :
                 {std::size_t{1}, std::size_t{4096}, std::size_t{1} << 20}) {
                CAPTURE(piece_bytes);
                ProfileJsonPieces pieces(p, options, piece_bytes);
                CHECK(pieces.bounded() == options.graph_top.has_value());
                std::vector<std::string> got;
                while (auto piece = pieces.next()) got.push_back(std::move(*piece));
                CHECK_FALSE(pieces.next());
                std::string joined;
                for (const auto& piece : got) joined += piece;
                CHECK(joined == whole);
                // A piece stops at the first entry that takes it past the size: never far past.
                for (std::size_t i = 0; i + 1 < got.size(); ++i) {
                    CHECK(got[i].size() >= piece_bytes);
                    CHECK(got[i].size() < piece_bytes + 64 * 1024);
                }
                if (piece_bytes == 4096 && !options.graph_top) CHECK(got.size() > 10);
            }
        }
    }
}

TEST_CASE("names that are not UTF-8 stop a strict stream, as they stopped dump()") {
    std::string text;
    JsonStream out(text);
    CHECK_THROWS_AS(out.value(std::string_view("bad\xff")), json::type_error);
}

// Writes a document through the stream, member by member.
void stream(JsonStream& out, const json& j) {
    if (j.is_object()) {
        out.begin_object();
        for (const auto& [k, v] : j.items()) stream(out.key(k), v);
        out.end_object();
    } else if (j.is_array()) {
        out.begin_array();
        for (const auto& v : j) stream(out, v);
        out.end_array();
    } else if (j.is_string()) {
        out.value(j.get_ref<const std::string&>());
    } else if (j.is_number_float()) {
        out.value(j.get<double>());
    } else if (j.is_number_unsigned()) {
        out.value(j.get<std::uint64_t>());
    } else if (j.is_number_integer()) {
        out.value(j.get<std::int64_t>());
    } else if (j.is_boolean()) {
        out.value(j.get<bool>());
    } else {
        out.value(nullptr);
    }
}

TEST_CASE("the stream prints every kind of value as dump() does, at any depth") {
    const json doc = {
        {"empty_object", json::object()},
        {"empty_array", json::array()},
        {"numbers",
         {0.0, -0.0, 1.0, 0.1, 1e-5, 1e21, 123456789.125, -2.5e-300, 3.0e15, 1e16,
          std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
          std::uint64_t{18446744073709551615u}, std::int64_t{-9223372036854775807 - 1}, 0, -1}},
        {"strings", {"", "plain", "a\"b\\c\n\t\b\f\r\x01", "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"}},
        {"nested", {{"a", {{"b", json::array({json::object(), json::array({1, 2})})}}}}},
        {"flags", {true, false, nullptr}}};
    for (int indent : {-1, 0, 1, 2, 4}) {
        CAPTURE(indent);
        std::string text;
        JsonStream out(text, indent);
        stream(out, doc);
        CHECK(text == doc.dump(indent));

        // A document dumped in place, inside a streamed one.
        std::string mixed;
        JsonStream around(mixed, indent);
        around.begin_object().field("inner", doc).key("list").begin_array().value(doc);
        around.end_array().end_object();
        CHECK(mixed == json({{"inner", doc}, {"list", {doc}}}).dump(indent));

        // A stream continuing a document at depth 2.
        std::string deep;
        JsonStream nested(deep, indent, 2);
        stream(nested, doc);
        const std::string whole = json({{"x", {doc}}}).dump(indent);
        CHECK(whole.find(deep) != std::string::npos);
    }
}

}  // namespace
}  // namespace rackprof::gmon
