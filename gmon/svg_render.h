// Graphviz (libgvc) behind one function, so its C API and headers stay in one file and one
// small library (rackprof_svg_render).
#pragma once

#include <string>
#include <string_view>

namespace rackprof::gmon {

// The DOT graph laid out by dot and rendered as SVG. Throws std::runtime_error when Graphviz
// refuses the graph. Calls are serialized: Graphviz is not thread-safe.
std::string render_svg(std::string_view dot);

}  // namespace rackprof::gmon
