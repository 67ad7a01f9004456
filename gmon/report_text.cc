// gprof's text layout (hist.c hist_print, cg_print.c cg_print and cg_print_index, in the
// brief form of `gprof -b`), column for column, so the output can be diffed against gprof.
#include <cxxabi.h>

#include <algorithm>
#include <charconv>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gmon/large_buffer.h"
#include "gmon/report.h"

namespace rackprof::gmon {

namespace {

constexpr int kOutputWidth = 80;

class Printer {
  public:
    void printf(const char* format, ...) __attribute__((format(printf, 2, 3))) {
        char buffer[1024];
        va_list args;
        va_start(args, format);
        const int n = std::vsnprintf(buffer, sizeof buffer, format, args);
        va_end(args);
        if (n < 0) return;
        if (static_cast<std::size_t>(n) < sizeof buffer) {
            out_.append(buffer, static_cast<std::size_t>(n));
            return;
        }
        std::string big(static_cast<std::size_t>(n) + 1, '\0');
        va_start(args, format);
        std::vsnprintf(big.data(), big.size(), format, args);
        va_end(args);
        big.pop_back();
        out_ += big;
    }
    void put(std::string_view s) { out_ += s; }
    void spaces(std::size_t n) { out_.append(n, ' '); }

    // The call graph's arc lines are most of a large report; these print their fields as the
    // printf conversions named, without parsing a format per field. (std::to_chars formats
    // as printf does in the C locale.)
    void fixed(double x, int width) {  // "%*.2f"
        char buffer[400];              // any double, fixed with two decimals, fits
        const char* end =
            std::to_chars(buffer, buffer + sizeof buffer, x, std::chars_format::fixed, 2).ptr;
        right({buffer, static_cast<std::size_t>(end - buffer)}, width);
    }
    void right(std::uint64_t n, int width) { right(decimal(n), width); }  // "%*llu"
    void left(std::uint64_t n, int width) {                               // "%-*llu"
        const DecimalText text = decimal(n);
        out_ += std::string_view(text);
        pad(text.size(), width);
    }
    // " [N]" when printed, " (N)" when not.
    void index(std::size_t n, bool printed) {
        out_ += printed ? " [" : " (";
        out_ += std::string_view(decimal(n));
        out_ += printed ? ']' : ')';
    }
    void reserve(std::size_t bytes) { reserve_large(out_, bytes); }
    std::string take() { return std::move(out_); }

  private:
    struct DecimalText {
        char digits[24];
        std::size_t length;
        std::size_t size() const { return length; }
        operator std::string_view() const { return {digits, length}; }
    };
    static DecimalText decimal(std::uint64_t n) {
        DecimalText text;
        text.length = static_cast<std::size_t>(
            std::to_chars(text.digits, text.digits + sizeof text.digits, n).ptr - text.digits);
        return text;
    }
    void right(std::string_view text, int width) {
        pad(text.size(), width);
        out_ += text;
    }
    void pad(std::size_t length, int width) {
        if (length < static_cast<std::size_t>(width))
            out_.append(static_cast<std::size_t>(width) - length, ' ');
    }

    std::string out_;
};

// C++ names are shown demangled, as gprof does by default.
std::string display_name(const std::string& name) {
    if (name.rfind("_Z", 0) != 0) return name;
    int status = 0;
    std::unique_ptr<char, decltype(&std::free)> d(
        abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), &std::free);
    return status == 0 && d ? std::string(d.get()) : name;
}

// print_name_only(): in line mode a symbol with a source file names it, its line and address.
std::string shown_name(const Profile& p, const ProfileSymbol& sym) {
    std::string name = display_name(sym.name);
    if (!p.lines || sym.file.empty()) return name;
    char where[48];
    std::snprintf(where, sizeof where, ":%d @ %llx)", sym.line,
                  static_cast<unsigned long long>(sym.addr));
    return name + " (" + source_file_name(sym.file) + where;
}

struct View {
    const Profile& p;
    double hz;
    double print_time;
    std::vector<std::string> shown;  // display_name of each symbol: demangled once, not per line

    bool is_cycle(std::size_t entry) const { return entry >= Profile::kCycleBase; }
    const ProfileNode& node(std::size_t entry) const {
        return is_cycle(entry) ? p.cycles[entry - Profile::kCycleBase] : p.nodes[entry];
    }
    // The node whose ncalls an arc into `sym` is divided by: the cycle when sym is on one.
    const ProfileNode& head_of(std::size_t sym) const {
        const ProfileNode& n = p.nodes[sym];
        return n.cycle_head == kNone ? n : p.cycles[n.cycle_head];
    }

    // print_name(): name, its cycle, its index ([N] when printed, (N) when not).
    void name(Printer& out, std::size_t sym) const {
        const ProfileNode& n = p.nodes[sym];
        out.put(shown[sym]);
        if (n.cycle) {
            out.put(" <cycle ");
            out.right(n.cycle, 0);
            out.put(">");
        }
        if (n.index) out.index(n.index, n.print_flag);
    }
};

void print_flat(Printer& out, const View& v) {
    const Profile& p = v.p;
    const double hz = v.hz;
    out.put("Flat profile:\n");
    // The ms/call columns are scaled to the largest time per call.
    static const struct {
        char prefix;
        double scale;
    } kSi[] = {{'T', 1e-12}, {'G', 1e-09}, {'M', 1e-06}, {'K', 1e-03}, {' ', 1e-00}, {'m', 1e+03},
               {'u', 1e+06}, {'n', 1e+09}, {'p', 1e+12}, {'f', 1e+15}, {'a', 1e+18}};
    std::size_t log_scale = 0;
    double top_time = 0.0;
    bool top_found = false;
    for (std::size_t s : p.flat_order) {
        const ProfileNode& n = p.nodes[s];
        if (n.ncalls == 0) continue;
        const double call_time = (n.self_time + n.child_time) / static_cast<double>(n.ncalls);
        if (call_time > top_time) {
            top_time = call_time;
            top_found = true;
        }
    }
    if (top_found && top_time > 0.0) {
        top_time /= hz;
        for (log_scale = 0; log_scale < std::size(kSi); ++log_scale) {
            const double scaled = kSi[log_scale].scale * top_time;
            if (scaled >= 1.0 && scaled < 1000.0) break;
        }
    }
    const double scale = kSi[std::min(log_scale, std::size(kSi) - 1)].scale;
    const char prefix = log_scale < std::size(kSi) ? kSi[log_scale].prefix : '\0';

    char unit[64];
    std::snprintf(unit, sizeof unit, "%c%c/call", prefix, p.dimension_abbrev);
    out.printf("\nEach sample counts as %g %s.\n", 1.0 / hz, p.dimension.c_str());
    double total_time = p.total_time;
    if (total_time <= 0.0) {
        out.put(" no time accumulated\n\n");
        total_time = 1.0;
    }
    out.printf("%5.5s %10.10s %8.8s %8.8s %8.8s %8.8s  %-8.8s\n", "%  ", "cumulative", "self  ", "",
               "self  ", "total ", "");
    out.printf("%5.5s %9.9s  %8.8s %8.8s %8.8s %8.8s  %-8.8s\n", "time", p.dimension.c_str(),
               p.dimension.c_str(), "calls", unit, unit, "name");

    double accum_time = 0.0;
    for (std::size_t s : p.flat_order) {
        const ProfileNode& n = p.nodes[s];
        if (n.ncalls == 0 && n.self_time == 0) continue;
        accum_time += n.self_time;
        out.printf("%6.2f %9.2f %8.2f", total_time > 0.0 ? 100 * n.self_time / total_time : 0.0,
                   accum_time / hz, n.self_time / hz);
        if (n.ncalls != 0) {
            const auto calls = static_cast<double>(n.ncalls);
            out.printf(" %8llu %8.2f %8.2f  ", static_cast<unsigned long long>(n.ncalls),
                       scale * n.self_time / hz / calls,
                       scale * (n.self_time + n.child_time) / hz / calls);
        } else {
            out.printf(" %8.8s %8.8s %8.8s  ", "", "", "");
        }
        out.put(v.shown[s]);
        out.put("\n");
    }
}

// Sampling error of the flat profile's rows (rackprof's, not gprof's): each share's 95 %
// Wilson score interval and the self seconds it spans, in the flat profile's row order.
void print_flat_intervals(Printer& out, const View& v) {
    const Profile& p = v.p;
    const double total_seconds = p.total_time / v.hz;
    out.printf("\nSampling error: 95%% Wilson score intervals of each share of the %.0f samples\n",
               p.total_time);
    out.printf("%6.6s %17.17s %9.9s %21.21s  %s\n", "%time", "95% interval", "self", "95% interval",
               "name");
    for (std::size_t s : p.flat_order) {
        const ProfileNode& n = p.nodes[s];
        if (n.ncalls == 0 && n.self_time == 0) continue;
        const auto [low, high] = self_percent_interval(p, s);
        const double percent = p.total_time > 0.0 ? 100 * n.self_time / p.total_time : 0.0;
        out.printf("%6.2f  [%6.2f, %6.2f] %9.2f  [%8.2f, %8.2f]  ", percent, low, high,
                   n.self_time / v.hz, low / 100 * total_seconds, high / 100 * total_seconds);
        out.put(v.shown[s]);
        out.put("\n");
    }
}

void print_arc_line(Printer& out, const View& v, const ProfileArc& a, std::size_t other,
                    std::uint64_t of, bool within) {
    // As gprof's "%6.6s %5.5s %7.7s %7.7s %7llu %7.7s     " and, outside a cycle,
    // "%6.6s %5.5s %7.2f %7.2f %7llu/%-7llu     " with empty strings for the %s.
    out.spaces(13);
    if (within) {
        out.spaces(16);
        out.right(a.count, 7);
        out.spaces(13);
    } else {
        out.fixed(a.time / v.hz, 7);
        out.spaces(1);
        out.fixed(a.child_time / v.hz, 7);
        out.spaces(1);
        out.right(a.count, 7);
        out.put("/");
        out.left(of, 7);
        out.spaces(5);
    }
    v.name(out, other);
    out.put("\n");
}

void print_function_entry(Printer& out, const View& v, std::size_t sym) {
    const Profile& p = v.p;
    const ProfileNode& n = p.nodes[sym];
    if (n.parents.empty()) {
        out.printf("%6.6s %5.5s %7.7s %7.7s %7.7s %7.7s     <spontaneous>\n", "", "", "", "", "",
                   "");
    } else {
        std::vector<std::size_t> scratch;
        for (std::size_t ai : printed_arcs(p, sym, true, scratch)) {
            const ProfileArc& a = p.arcs[ai];
            const bool within =
                a.parent == sym || (n.cycle != 0 && p.nodes[a.parent].cycle == n.cycle);
            print_arc_line(out, v, a, a.parent, v.head_of(sym).ncalls, within);
        }
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "[%zu]", n.index);
    out.printf("%-6.6s %5.1f %7.2f %7.2f", buf, 100 * (n.prop_self + n.prop_child) / v.print_time,
               n.prop_self / v.hz, n.prop_child / v.hz);
    if (n.ncalls + n.self_calls != 0) {
        out.printf(" %7llu", static_cast<unsigned long long>(n.ncalls));
        if (n.self_calls != 0) {
            out.printf("+%-7llu ", static_cast<unsigned long long>(n.self_calls));
        } else {
            out.printf(" %7.7s ", "");
        }
    } else {
        out.printf(" %7.7s %7.7s ", "", "");
    }
    v.name(out, sym);
    out.put("\n");
    std::vector<std::size_t> scratch;
    for (std::size_t ai : printed_arcs(p, sym, false, scratch)) {
        const ProfileArc& a = p.arcs[ai];
        const bool within =
            a.child == sym || (p.nodes[a.child].cycle != 0 && p.nodes[a.child].cycle == n.cycle);
        print_arc_line(out, v, a, a.child, v.head_of(a.child).ncalls, within);
    }
}

void print_cycle_entry(Printer& out, const View& v, std::size_t cycle_index) {
    const Profile& p = v.p;
    const ProfileNode& c = p.cycles[cycle_index];
    char buf[32];
    std::snprintf(buf, sizeof buf, "[%zu]", c.index);
    out.printf("%-6.6s %5.1f %7.2f %7.2f %7llu", buf,
               100 * (c.prop_self + c.prop_child) / v.print_time, c.prop_self / v.hz,
               c.prop_child / v.hz, static_cast<unsigned long long>(c.ncalls));
    if (c.self_calls != 0) {
        out.printf("+%-7llu", static_cast<unsigned long long>(c.self_calls));
    } else {
        out.printf(" %7.7s", "");
    }
    out.printf(" <cycle %zu as a whole> [%zu]\n", c.cycle, c.index);

    for (std::size_t m : sorted_members(p, c.members)) {
        const ProfileNode& mn = p.nodes[m];
        out.printf("%6.6s %5.5s %7.2f %7.2f %7llu", "", "", mn.prop_self / v.hz,
                   mn.prop_child / v.hz, static_cast<unsigned long long>(mn.ncalls));
        if (mn.self_calls != 0) {
            out.printf("+%-7llu", static_cast<unsigned long long>(mn.self_calls));
        } else {
            out.printf(" %7.7s", "");
        }
        out.put("     ");
        v.name(out, m);
        out.put("\n");
    }
}

void print_call_graph(Printer& out, const View& v) {
    const Profile& p = v.p;
    out.put("\t\t\tCall graph\n\n");
    out.printf("\ngranularity: each sample hit covers %ld byte(s)",
               static_cast<long>(p.bin_bytes / 2) * 2L);
    if (p.print_time > 0.0) {
        out.printf(" for %.2f%% of %.2f seconds\n\n", 100.0 / p.print_time, p.print_time / v.hz);
    } else {
        out.put(" no time propagated\n\n");
    }
    out.put("index % time    self  children    called     name\n");
    for (std::size_t entry : p.graph_order) {
        const ProfileNode& n = v.node(entry);
        if ((n.ncalls == 0 && n.self_calls == 0 && n.prop_self == 0 && n.prop_child == 0) ||
            !n.print_flag)
            continue;
        // Line mode prints entries of functions only (cycles' headers are not functions).
        if (p.lines && (v.is_cycle(entry) || !p.symbols[entry].is_func)) continue;
        if (v.is_cycle(entry)) {
            print_cycle_entry(out, v, entry - Profile::kCycleBase);
        } else {
            print_function_entry(out, v, entry);
        }
        out.put("-----------------------------------------------\n");
    }
}

void print_index(Printer& out, const View& v) {
    const Profile& p = v.p;
    std::vector<std::size_t> names;
    for (std::size_t s = 0; s < p.symbols.size(); ++s) {
        if (p.nodes[s].ncalls == 0 && p.nodes[s].self_time == 0) continue;
        names.push_back(s);
    }
    std::stable_sort(names.begin(), names.end(), [&](std::size_t l, std::size_t r) {
        return std::strcmp(p.symbols[l].name.c_str(), p.symbols[r].name.c_str()) < 0;
    });
    const std::size_t nnames = names.size();
    for (std::size_t c = 0; c < p.cycles.size(); ++c) names.push_back(Profile::kCycleBase + c);

    out.put("\f\nIndex by function name\n\n");
    const std::size_t todo = names.size();
    const std::size_t rows = (todo + 2) / 3;
    const int column_width = (kOutputWidth - 1) / 3;
    for (std::size_t i = 0; i < rows; ++i) {
        int col = 0;
        int starting_col = 0;
        for (std::size_t j = i; j < todo; j += rows) {
            const std::size_t entry = names[j];
            const ProfileNode& n = v.node(entry);
            char buf[32];
            std::snprintf(buf, sizeof buf, n.print_flag ? "[%zu]" : "(%zu)", n.index);
            col += static_cast<int>(std::strlen(buf));
            for (; col < starting_col + 5; ++col) out.put(" ");
            out.printf(" %s ", buf);
            if (j < nnames) {
                const ProfileSymbol& sym = p.symbols[entry];
                const std::string& shown = v.shown[entry];
                out.put(shown);
                col += static_cast<int>(shown.size());
                if (!p.lines && sym.is_static && !sym.file.empty()) {
                    const std::string file = source_file_name(sym.file);
                    out.printf(" (%s)", file.c_str());
                    col += static_cast<int>(file.size()) + 3;
                }
            } else {
                char cycle[32];
                std::snprintf(cycle, sizeof cycle, "<cycle %zu>", n.cycle);
                out.put(cycle);
                col += static_cast<int>(std::strlen(cycle));
            }
            starting_col += column_width;
        }
        out.put("\n");
    }
}

// A little more than the report will take, so that a report of megabytes is not copied
// (and its pages faulted in) again at each doubling: a line per flat row, per arc at each
// end, per entry and per index column, each some 70 columns and the name.
std::size_t expected_size(const Profile& p) {
    std::size_t bytes = 4096;
    for (std::size_t s = 0; s < p.symbols.size(); ++s) {
        const std::size_t lines = p.nodes[s].parents.size() + p.nodes[s].children.size() + 4;
        bytes += lines * (p.symbols[s].name.size() + 72);
    }
    return bytes + p.cycles.size() * 160;
}

}  // namespace

// An arc's place among a function's parents or children (cg_print.c cmp_arc): self calls
// first, then calls within a cycle by count, then by time and count. A function has at most
// one self arc, so this is a total preorder. Each arc's key is taken once, so a sort compares
// keys in hand instead of chasing arcs and nodes at every comparison.
namespace {

struct PrintKey {
    int rank = 0;     // 0: the self arc, 1: within a cycle, 2: any other
    double time = 0;  // rank 2: the time along the arc (self and children)
    std::uint64_t count = 0;
    std::size_t arc = 0;
};

PrintKey print_key_of(const Profile& p, std::size_t ai) {
    const ProfileArc& a = p.arcs[ai];
    const std::size_t from = p.nodes[a.parent].cycle, to = p.nodes[a.child].cycle;
    if (a.parent == a.child) return {0, 0, a.count, ai};
    if (from != 0 && from == to) return {1, 0, a.count, ai};
    return {2, a.time + a.child_time, a.count, ai};
}

bool print_key_less(const PrintKey& l, const PrintKey& r) {
    if (l.rank != r.rank) return l.rank < r.rank;
    if (l.time != r.time) return l.time < r.time;
    return l.count < r.count;
}

}  // namespace

// gprof insertion-sorts its prepend-ordered lists (newest arc first), each arc going before
// the first one it does not follow: equal arcs end up in the order `arcs` holds them. That is
// a stable sort of `arcs`, in O(n log n) rather than gprof's O(n^2) (10^6 arcs among 2000
// functions: some 450 callers and callees each). Descending is the same keys the other way
// round: the self arc last, arcs within a cycle after the others.
std::vector<std::size_t> sorted_arcs(const Profile& p, const std::vector<std::size_t>& arcs,
                                     bool ascending) {
    std::vector<PrintKey> keys;
    keys.reserve(arcs.size());
    for (const std::size_t ai : arcs) keys.push_back(print_key_of(p, ai));
    if (ascending) {
        std::stable_sort(keys.begin(), keys.end(), print_key_less);
    } else {
        std::stable_sort(keys.begin(), keys.end(),
                         [](const PrintKey& l, const PrintKey& r) { return print_key_less(r, l); });
    }
    std::vector<std::size_t> sorted;
    sorted.reserve(keys.size());
    for (const PrintKey& k : keys) sorted.push_back(k.arc);
    return sorted;
}

void keep_printed_order(Profile& p) {
    p.printed_parents.resize(p.nodes.size());
    p.printed_children.resize(p.nodes.size());
    for (std::size_t s = 0; s < p.nodes.size(); ++s) {
        p.printed_parents[s] = sorted_arcs(p, p.nodes[s].parents, true);
        p.printed_children[s] = sorted_arcs(p, p.nodes[s].children, false);
    }
}

const std::vector<std::size_t>& printed_arcs(const Profile& p, std::size_t symbol, bool parents,
                                             std::vector<std::size_t>& scratch) {
    const auto& kept = parents ? p.printed_parents : p.printed_children;
    if (kept.size() == p.nodes.size()) return kept[symbol];
    const ProfileNode& n = p.nodes[symbol];
    scratch = sorted_arcs(p, parents ? n.parents : n.children, parents);
    return scratch;
}

// Members by total time, then calls. gprof insertion-sorts them, each going before the first
// one it exceeds, so equal members keep their order: a stable sort.
std::vector<std::size_t> sorted_members(const Profile& p, const std::vector<std::size_t>& members) {
    std::vector<std::size_t> sorted = members;
    std::stable_sort(sorted.begin(), sorted.end(), [&](std::size_t l, std::size_t r) {
        const ProfileNode& ln = p.nodes[l];
        const ProfileNode& rn = p.nodes[r];
        const double lt = ln.prop_self + ln.prop_child;
        const double rt = rn.prop_self + rn.prop_child;
        return lt > rt || (lt == rt && ln.ncalls + ln.self_calls > rn.ncalls + rn.self_calls);
    });
    return sorted;
}

std::string render_gprof_text(const Profile& profile, const TextReportOptions& options) {
    Printer out;
    out.reserve(expected_size(profile));
    View view{profile,
              static_cast<double>(profile.prof_rate),
              profile.print_time > 0.0 ? profile.print_time : 1.0,
              {}};
    view.shown.reserve(profile.symbols.size());
    for (const ProfileSymbol& sym : profile.symbols) view.shown.push_back(shown_name(profile, sym));
    bool first = true;
    if (profile.has_histogram) {
        print_flat(out, view);
        if (options.intervals) print_flat_intervals(out, view);
        first = false;
    }
    if (profile.has_arcs) {
        if (!first) out.put("\f\n");
        print_call_graph(out, view);
        print_index(out, view);
    }
    return out.take();
}

std::string hex_address(std::uint64_t addr) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(addr));
    return buf;
}

}  // namespace rackprof::gmon
