// The call graph as Graphviz DOT, drawn as gprof2dot draws a gprof profile: a box per function
// with its total and self time (% of the time gprof's call graph holds) and calls, coloured by
// total time on gprof2dot's temperature map (dark blue, green, yellow, red); an edge per arc
// with the time gprof charges along it (%) and its calls, pen width by that time. Functions
// and arcs below the thresholds are left out, as gprof2dot's --node-thres and --edge-thres do.
// The export "svg" is this graph laid out by Graphviz's dot (gmon/svg_render.h).
#pragma once

#include <memory>
#include <string>

#include "gmon/export.h"
#include "gmon/profile.h"

namespace rackprof::gmon {

struct DotOptions {
    double node_threshold = 0.5;  // % total time: functions below are left out
    double edge_threshold = 0.1;  // % time along the arc: arcs below are left out (arcs
                                  // inside a cycle and self-calls carry none: kept when both
                                  // ends are, drawn dashed)
};

// A colour of gprof2dot's temperature map for a weight in [0, 1], as "#rrggbb".
std::string temperature_colour(double weight);

std::string call_graph_dot(const Profile& profile, const DotOptions& options = {});

// The exports "dot" and "svg"; they throw std::invalid_argument without an ELF.
ChunkStream open_dot(const std::shared_ptr<const ExportInput>& input);
ChunkStream open_svg(const std::shared_ptr<const ExportInput>& input);

}  // namespace rackprof::gmon
