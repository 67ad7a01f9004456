#include "gmon/dot_export.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <vector>

#include <nlohmann/json.hpp>

#include "gmon/single_chunk.h"
#include "gmon/svg_render.h"

namespace rackprof::gmon {

namespace {

// gprof2dot's Theme for TEMPERATURE_COLORMAP: HSL from dark blue (2/3, 0.80, 0.25) to
// saturated red (0, 1, 0.5), gamma 1; pens from 0.5 to 4.0 points.
constexpr double kMinHsl[3] = {2.0 / 3.0, 0.80, 0.25};
constexpr double kMaxHsl[3] = {0.0, 1.0, 0.5};
constexpr double kMinPenWidth = 0.5;
constexpr double kMaxPenWidth = 4.0;
constexpr double kFontSize = 10.0;

double hue_to_rgb(double m1, double m2, double h) {
    if (h < 0.0) {
        h += 1.0;
    } else if (h > 1.0) {
        h -= 1.0;
    }
    if (h * 6 < 1.0) return m1 + (m2 - m1) * h * 6.0;
    if (h * 2 < 1.0) return m2;
    if (h * 3 < 2.0) return m1 + (m2 - m1) * (2.0 / 3.0 - h) * 6.0;
    return m1;
}

int byte_of(double f) {
    if (f <= 0) return 0;
    if (f >= 1) return 255;
    return static_cast<int>(255.0 * f + 0.5);
}

std::string fixed(double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%.2f", value);
    return text;
}

// A DOT string's contents: quotes and backslashes escaped, bytes that are not UTF-8 replaced
// (JSON's escaping is DOT's for these; the name is never a DOT escape like \N).
std::string dot_escaped(std::string_view text) {
    const std::string quoted = nlohmann::json(std::string(text))
                                   .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return quoted.substr(1, quoted.size() - 2);
}

double pen_width(double weight) {
    return std::max(weight * kMaxPenWidth, kMinPenWidth);
}

std::string edge_attributes(double weight, const std::string& label, bool dashed) {
    const std::string colour = temperature_colour(weight);
    const double pen = pen_width(weight);
    std::string out = "[arrowsize=\"" + fixed(0.5 * std::sqrt(pen)) + "\", color=\"" + colour +
                      "\", fontcolor=\"" + colour + "\", fontsize=\"" + fixed(kFontSize) +
                      "\", label=\"" + label + "\", labeldistance=\"" + fixed(pen) +
                      "\", penwidth=\"" + fixed(pen) + "\"";
    if (dashed) out += ", style=dashed";
    return out + "]";
}

std::string calls_text(std::uint64_t calls) {
    return std::to_string(calls) + "\xC3\x97";  // U+00D7, gprof2dot's multiplication sign
}

}  // namespace

std::string temperature_colour(double weight) {
    weight = std::clamp(weight, 0.0, 1.0);
    double hsl[3];
    for (int i = 0; i < 3; ++i) hsl[i] = kMinHsl[i] + weight * (kMaxHsl[i] - kMinHsl[i]);
    const double h = std::fmod(hsl[0], 1.0);
    const double s = std::clamp(hsl[1], 0.0, 1.0);
    const double l = std::clamp(hsl[2], 0.0, 1.0);
    const double m2 = l <= 0.5 ? l * (s + 1.0) : l + s - l * s;
    const double m1 = l * 2.0 - m2;
    const int rgb[3] = {byte_of(hue_to_rgb(m1, m2, h + 1.0 / 3.0)), byte_of(hue_to_rgb(m1, m2, h)),
                        byte_of(hue_to_rgb(m1, m2, h - 1.0 / 3.0))};
    char text[8];
    std::snprintf(text, sizeof text, "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
    return text;
}

std::string call_graph_dot(const Profile& profile, const DotOptions& options) {
    // Percentages of the time gprof's call graph holds (its "% time" column). Without samples
    // there is no time: every function with an arc is drawn, every arc too.
    const double total = profile.print_time;
    const bool timed = total > 0;
    const auto percent = [&](double samples) { return timed ? 100.0 * samples / total : 0.0; };
    const std::size_t n = profile.symbols.size();
    std::vector<bool> kept(n, false);
    for (std::size_t s = 0; s < n; ++s) {
        const ProfileNode& node = profile.nodes[s];
        kept[s] = timed ? percent(node.prop_self + node.prop_child) >= options.node_threshold
                        : !node.parents.empty() || !node.children.empty();
    }

    std::string out =
        "digraph \"call graph\" {\n"
        "\tgraph [fontname=Arial, nodesep=0.125, ranksep=0.25];\n"
        "\tnode [fontcolor=white, fontname=Arial, height=0, shape=box, style=filled, width=0];\n"
        "\tedge [fontname=Arial];\n";
    std::vector<std::size_t> order;
    for (const std::size_t entry : profile.graph_order) {
        if (entry < n && kept[entry]) order.push_back(entry);
    }
    for (const std::size_t s : order) {
        const ProfileNode& node = profile.nodes[s];
        const ProfileSymbol& symbol = profile.symbols[s];
        const double total_percent = percent(node.prop_self + node.prop_child);
        std::string label = dot_escaped(symbol.name) + "\\n" + fixed(total_percent) + "%\\n(" +
                            fixed(percent(node.prop_self)) + "%)";
        if (node.ncalls > 0) label += "\\n" + calls_text(node.ncalls);
        std::string tooltip = symbol.name;
        if (!symbol.file.empty())
            tooltip = symbol.file + (symbol.line > 0 ? ":" + std::to_string(symbol.line) : "");
        out += "\tf" + std::to_string(s) + " [color=\"" + temperature_colour(total_percent / 100) +
               "\", fontcolor=\"#ffffff\", fontsize=\"" + fixed(kFontSize) + "\", label=\"" +
               label + "\", tooltip=\"" + dot_escaped(tooltip) + "\"];\n";
    }
    for (const std::size_t s : order) {
        for (const std::size_t arc : profile.nodes[s].children) {
            const ProfileArc& a = profile.arcs[arc];
            if (!kept[a.child]) continue;
            // Self-calls and calls inside a cycle: gprof charges no time along them.
            const bool untimed = a.child == a.parent ||
                                 (profile.nodes[a.parent].cycle != 0 &&
                                  profile.nodes[a.parent].cycle == profile.nodes[a.child].cycle);
            const double arc_percent = percent(a.time + a.child_time);
            if (timed && !untimed && arc_percent < options.edge_threshold) continue;
            const std::string label = timed && !untimed
                                          ? fixed(arc_percent) + "%\\n" + calls_text(a.count)
                                          : calls_text(a.count);
            out += "\tf" + std::to_string(a.parent) + " -> f" + std::to_string(a.child) + " " +
                   edge_attributes(arc_percent / 100, label, untimed) + ";\n";
        }
    }
    return out + "}\n";
}

ChunkStream open_dot(const std::shared_ptr<const ExportInput>& input) {
    if (!input->source.elf)
        throw std::invalid_argument("a call graph needs the ELF (function names)");
    return single_chunk(
        [input] { return call_graph_dot(profile_of(input->source, input->profile_options)); });
}

ChunkStream open_svg(const std::shared_ptr<const ExportInput>& input) {
    if (!input->source.elf)
        throw std::invalid_argument("a call graph needs the ELF (function names)");
    return single_chunk([input] {
        return render_svg(call_graph_dot(profile_of(input->source, input->profile_options)));
    });
}

}  // namespace rackprof::gmon
