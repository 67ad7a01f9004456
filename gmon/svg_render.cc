#include "gmon/svg_render.h"

#include <gvc.h>

#include <mutex>
#include <stdexcept>
#include <string>

namespace rackprof::gmon {

namespace {

// One context for the process, made at the first render (loading the plugins once).
GVC_t* graphviz_context() {
    static GVC_t* const context = gvContext();
    return context;
}

std::mutex graphviz_mutex;
std::string graphviz_messages;  // what Graphviz said during the render (under the mutex)

int collect_message(char* message) {
    graphviz_messages += message;
    return 0;
}

}  // namespace

std::string render_svg(std::string_view dot) {
    const std::lock_guard lock(graphviz_mutex);
    // Graphviz's messages go into the exception, not to the daemon's stderr.
    graphviz_messages.clear();
    agseterrf(collect_message);
    GVC_t* const gvc = graphviz_context();
    if (!gvc) throw std::runtime_error("graphviz: no context");
    const std::string text(dot);
    Agraph_t* const graph = agmemread(text.c_str());
    if (!graph)
        throw std::runtime_error("graphviz: the DOT graph does not parse: " + graphviz_messages);
    if (gvLayout(gvc, graph, "dot") != 0) {
        agclose(graph);
        throw std::runtime_error("graphviz: dot could not lay the graph out: " + graphviz_messages);
    }
    char* data = nullptr;
    unsigned int length = 0;
    const int rendered = gvRenderData(gvc, graph, "svg", &data, &length);
    std::string svg = rendered == 0 && data ? std::string(data, length) : std::string();
    if (data) gvFreeRenderData(data);
    gvFreeLayout(gvc, graph);
    agclose(graph);
    if (rendered != 0) throw std::runtime_error("graphviz: SVG rendering failed");
    return svg;
}

}  // namespace rackprof::gmon

#if defined(__SANITIZE_ADDRESS__)
#define RACKPROF_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RACKPROF_LSAN 1
#endif
#endif
#ifdef RACKPROF_LSAN
// Graphviz measures text with pango, whose fontconfig caches are never freed: not ours to
// fix, and LeakSanitizer would fail every process that rendered an SVG.
extern "C" const char* __lsan_default_suppressions() {
    return "leak:libfontconfig.so\n";
}
#endif
