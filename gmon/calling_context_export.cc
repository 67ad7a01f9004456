#include "gmon/calling_context_export.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <vector>

#include <nlohmann/json.hpp>

#include "gmon/pprof_export.h"
#include "gmon/report.h"
#include "gmon/single_chunk.h"
#include "pprof/profile.pb.h"

namespace rackprof::gmon {

namespace {

constexpr const char* kIncomplete = " [incomplete]";

// Children of each node, in the order the tree added them (the order first seen).
std::vector<std::vector<std::uint32_t>> children_of(const CallingContextTree& tree) {
    std::vector<std::vector<std::uint32_t>> kids(tree.nodes().size());
    for (std::size_t i = 0; i < tree.nodes().size(); ++i) {
        const auto parent = tree.nodes()[i].parent;
        if (parent != kNoParent) kids[parent].push_back(static_cast<std::uint32_t>(i));
    }
    return kids;
}

// A node's path of nodes from its root's first frame (thread mode's root left out unless the
// node is that root itself), root first.
std::vector<std::uint32_t> path_of(const CallingContextTree& tree, std::uint32_t node) {
    std::vector<std::uint32_t> path;
    for (std::uint32_t at = node; at != kNoParent; at = tree.nodes()[at].parent) {
        const ContextNode& n = tree.nodes()[at];
        if (n.parent == kNoParent && n.exception == 0 && at != node) break;
        path.insert(path.begin(), at);
    }
    return path;
}

const CallingContextTree& tree_of(const ExportInput& input) {
    if (!input.calling_context || input.calling_context->empty())
        throw ExportNeedsCallingContext(
            "this source has no calling-context tree (no function entry/exit events were "
            "captured, or a time window was asked for: a tree covers whole sessions); the "
            "estimated stacks are the folded, speedscope and pprof exports");
    return *input.calling_context;
}

std::string frame_label(const ContextFrameNames& names, const ContextNode& n) {
    return names.of(n) + (n.incomplete ? kIncomplete : "");
}

// pprof's profile.proto of the tree: a sample per path with [cycles, calls], leaf first.
class CctPprofBuilder {
  public:
    CctPprofBuilder(const ExportInput& input, const CallingContextTree& tree)
        : input_(input), tree_(tree), names_(input.source.elf.get()) {
        profile_.add_string_table("");
    }

    std::string build() {
        const std::string unit(unit_name(tree_.unit()));
        for (const std::string& type : {unit, std::string("calls")}) {
            auto* t = profile_.add_sample_type();
            t->set_type(str(type));
            t->set_unit(str("count"));
        }
        profile_.set_default_sample_type(str(unit));
        profile_.add_comment(str(tree_.unit() == ContextUnit::kSamples
                                     ? "rackprof: stacks sampled through a debug probe, unwound "
                                       "on the host (samples/count per path; calls/count 0: a "
                                       "sample sees no call)"
                                     : "rackprof: calling-context tree measured from function "
                                       "entry/exit events (cycles/count exclusive per path, "
                                       "calls/count)"));
        auto* m = profile_.add_mapping();
        m->set_id(1);
        if (input_.source.elf) {
            m->set_filename(str(input_.source.elf->path().string()));
            m->set_build_id(str(input_.source.elf->build_id()));
            m->set_has_functions(true);
        }
        for (std::uint32_t i = 0; i < tree_.nodes().size(); ++i) {
            const ContextNode& n = tree_.nodes()[i];
            if (n.exclusive == 0 && n.calls == 0) continue;
            auto* s = profile_.add_sample();
            const auto path = path_of(tree_, i);
            for (auto it = path.rbegin(); it != path.rend(); ++it)
                s->add_location_id(location(*it));
            s->add_value(static_cast<std::int64_t>(n.exclusive));
            s->add_value(static_cast<std::int64_t>(n.calls));
            if (n.incomplete) {
                auto* label = s->add_label();
                label->set_key(str("incomplete"));
                label->set_str(str("true"));
            }
        }
        std::string bytes;
        if (!profile_.SerializeToString(&bytes))
            throw std::runtime_error("pprof: the profile could not be serialized");
        return gzip(bytes);
    }

  private:
    std::int64_t str(const std::string& s) {
        const auto [it, added] =
            strings_.try_emplace(s, static_cast<std::int64_t>(strings_.size() + 1));
        if (added) profile_.add_string_table(s);
        return it->second;
    }

    // One location per function address, one per root (address 0).
    std::uint64_t location(std::uint32_t node) {
        const ContextNode& n = tree_.nodes()[node];
        const std::string name = names_.of(n);
        const auto key = std::make_pair(
            n.parent == kNoParent, n.parent == kNoParent ? std::uint64_t{n.exception} : n.function);
        const auto [it, added] = locations_.try_emplace(key, locations_.size() + 1);
        if (!added) return it->second;
        auto* f = profile_.add_function();
        f->set_id(it->second);
        f->set_name(str(name));
        f->set_system_name(str(name));
        auto* l = profile_.add_location();
        l->set_id(it->second);
        l->set_mapping_id(1);
        if (n.parent != kNoParent) {
            l->set_address(n.function);
            if (const auto source = names_.source(n.function)) {
                f->set_filename(str(source->file));
                f->set_start_line(source->line);
            }
        }
        l->add_line()->set_function_id(it->second);
        return it->second;
    }

    const ExportInput& input_;
    const CallingContextTree& tree_;
    ContextFrameNames names_;
    perftools::profiles::Profile profile_;
    std::map<std::string, std::int64_t> strings_;
    std::map<std::pair<bool, std::uint64_t>, std::uint64_t> locations_;
};

std::string elf_name(const ExportInput& input) {
    return input.source.elf ? input.source.elf->path().filename().string() + ": " : "";
}

}  // namespace

ContextFrameNames::ContextFrameNames(const Symbolizer* elf) : elf_(elf) {
    if (elf_) index_.emplace(*elf_);
}

std::string ContextFrameNames::function(std::uint64_t address) const {
    if (index_) {
        if (const auto* f = index_->holding(address)) return f->name;
    }
    return hex_address(address);
}

std::string ContextFrameNames::of(const ContextNode& node) const {
    if (node.parent == kNoParent) return "[" + exception_name(node.exception) + "]";
    return function(node.function);
}

std::optional<SourceLocation> ContextFrameNames::source(std::uint64_t address) const {
    if (!elf_) return std::nullopt;
    return elf_->source_of(address);
}

std::string cct_folded(const CallingContextTree& tree, const ContextFrameNames& names) {
    std::map<std::string, std::uint64_t> lines;
    for (std::uint32_t i = 0; i < tree.nodes().size(); ++i) {
        if (tree.nodes()[i].exclusive == 0) continue;
        std::string stack;
        for (const auto at : path_of(tree, i))
            stack += (stack.empty() ? "" : ";") + frame_label(names, tree.nodes()[at]);
        lines[stack] += tree.nodes()[i].exclusive;
    }
    std::string out;
    for (const auto& [stack, cycles] : lines) out += stack + " " + std::to_string(cycles) + "\n";
    return out;
}

namespace {

// speedscope's shared frames: one per distinct label, with its source line when known.
class SpeedscopeFrames {
  public:
    SpeedscopeFrames(const CallingContextTree& tree, const ContextFrameNames& names)
        : tree_(tree), names_(names) {}

    std::size_t index_of(std::uint32_t node) {
        const ContextNode& n = tree_.nodes()[node];
        const std::string label = frame_label(names_, n);
        const auto [it, fresh] = index_.try_emplace(label, frames_.size());
        if (fresh) {
            nlohmann::json f = {{"name", label}};
            if (n.parent != kNoParent) {
                if (const auto source = names_.source(n.function)) {
                    if (!source->file.empty()) f["file"] = source->file;
                    if (source->line > 0) f["line"] = source->line;
                }
            }
            frames_.push_back(std::move(f));
        }
        return it->second;
    }
    nlohmann::json take() { return std::move(frames_); }

  private:
    const CallingContextTree& tree_;
    const ContextFrameNames& names_;
    nlohmann::json frames_ = nlohmann::json::array();
    std::map<std::string, std::size_t> index_;
};

// The open and close events of the subtree under `root`, laid end to end by inclusive cycles.
nlohmann::json evented_walk(const CallingContextTree& tree,
                            const std::vector<std::vector<std::uint32_t>>& kids, std::uint32_t root,
                            SpeedscopeFrames& frames) {
    nlohmann::json events = nlohmann::json::array();
    // Iterative depth-first walk: each node opens at `at`, its children follow it end to
    // end, and it closes after its inclusive cycles.
    struct Step {
        std::uint32_t node;
        std::size_t next_kid;
        std::uint64_t opened;
        std::uint64_t cursor;
    };
    std::vector<Step> stack{{root, 0, 0, 0}};
    while (!stack.empty()) {
        Step& top = stack.back();
        if (top.next_kid < kids[top.node].size()) {
            const std::uint32_t kid = kids[top.node][top.next_kid++];
            const std::uint64_t start = top.cursor;
            top.cursor += tree.nodes()[kid].inclusive;
            if (tree.nodes()[kid].inclusive == 0) continue;
            events.push_back({{"type", "O"}, {"frame", frames.index_of(kid)}, {"at", start}});
            stack.push_back({kid, 0, start, start});
            continue;
        }
        if (top.node != root) {
            events.push_back({{"type", "C"},
                              {"frame", frames.index_of(top.node)},
                              {"at", top.opened + tree.nodes()[top.node].inclusive}});
        }
        stack.pop_back();
    }
    return events;
}

}  // namespace

std::string cct_speedscope(const CallingContextTree& tree, const ContextFrameNames& names,
                           const std::string& name) {
    using nlohmann::json;
    const auto kids = children_of(tree);
    SpeedscopeFrames frames(tree, names);
    json profiles = json::array();
    std::map<std::uint16_t, std::uint32_t> roots;  // thread mode (0) first
    for (std::uint32_t i = 0; i < tree.nodes().size(); ++i) {
        if (tree.nodes()[i].parent == kNoParent) roots[tree.nodes()[i].exception] = i;
    }
    for (const auto& [exception, root] : roots) {
        const ContextNode& r = tree.nodes()[root];
        profiles.push_back(
            {{"type", "evented"},
             {"name", name + " " + names.of(r) + " (" + std::string(unit_name(tree.unit())) + ")"},
             {"unit", "none"},
             {"startValue", 0},
             {"endValue", r.inclusive},
             {"events", evented_walk(tree, kids, root, frames)}});
    }
    const json document = {
        {"$schema", "https://www.speedscope.app/file-format-schema.json"},
        {"exporter", "rackprof"},
        {"name", name},
        {"activeProfileIndex", 0},
        {"shared", {{"frames", frames.take()}}},
        {"profiles", std::move(profiles)},
    };
    return document.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

void write_calling_context_json(JsonStream& out, const CallingContextTree& tree,
                                const ContextFrameNames& names) {
    std::uint64_t total = 0;
    for (const auto& n : tree.nodes()) {
        if (n.parent == kNoParent) total += n.inclusive;
    }
    const auto share = [](double part, std::uint64_t whole) {
        return whole ? part / static_cast<double>(whole) : 0.0;
    };
    const std::string u(unit_name(tree.unit()));
    out.begin_object().key("arcs").begin_array();
    for (const auto& a : attributed_arcs(tree)) {
        const double measured = static_cast<double>(a.measured);
        out.begin_object()
            .field("callee", names.function(a.callee))
            .field("callee_address", hex_address(a.callee))
            .field("callee_calls", a.callee_calls)
            .field("callee_total_" + u, a.callee_total)
            .field("caller", names.function(a.caller))
            .field("caller_address", hex_address(a.caller))
            .field("calls", a.calls)
            .field("difference_" + u, measured - a.estimated)
            .field("estimated_" + u, a.estimated)
            .field("estimated_share", share(a.estimated, a.callee_total))
            .field("incomplete", a.incomplete)
            .field("measured_" + u, a.measured)
            .field("measured_share", share(measured, a.callee_total))
            .end_object();
    }
    out.end_array()
        .field("incomplete_nodes", std::uint64_t{tree.incomplete_nodes()})
        .field("nodes", std::uint64_t{tree.nodes().size()})
        .field("total_" + u, total)
        .field("unit", u)
        .end_object();
}

std::string cct_json(const CallingContextTree& tree, const ContextFrameNames& names) {
    std::string text;
    JsonStream out(text, -1, 0, JsonStream::ErrorHandler::replace);
    const std::string u(unit_name(tree.unit()));
    out.begin_object().key("calling_context");
    write_calling_context_json(out, tree, names);
    out.key("nodes").begin_array();
    for (std::uint32_t i = 0; i < tree.nodes().size(); ++i) {
        const ContextNode& n = tree.nodes()[i];
        out.begin_object()
            .field("address", n.parent == kNoParent ? std::string() : hex_address(n.function))
            .field("calls", n.calls)
            .field("exception", std::uint64_t{n.exception})
            .field("exclusive_" + u, n.exclusive)
            .field("id", std::uint64_t{i})
            .field("incomplete", n.incomplete)
            .field("inclusive_" + u, n.inclusive)
            .field("name", names.of(n))
            .key("parent");
        if (n.parent == kNoParent) {
            out.value(nullptr);
        } else {
            out.value(std::uint64_t{n.parent});
        }
        out.end_object();
    }
    out.end_array().field("schema", "rackprof.cct/1").end_object();
    return text + "\n";
}

ChunkStream open_cct_folded(const std::shared_ptr<const ExportInput>& input) {
    tree_of(*input);
    return single_chunk([input] {
        return cct_folded(tree_of(*input), ContextFrameNames(input->source.elf.get()));
    });
}

namespace {

// "caller -> callee", and " *" where a path it sums is incomplete: a line's end in both texts.
std::string arc_label(const AttributedArc& a, const ContextFrameNames& names) {
    return names.function(a.caller) + " -> " + names.function(a.callee) +
           (a.incomplete ? " *" : "") + "\n";
}

// Sampled stacks carry no calls, so no estimate to set beside: each edge's share of its
// callee's samples, most sampled first.
std::string sampled_arcs_text(const CallingContextTree& tree, const ContextFrameNames& names,
                              std::size_t rows) {
    std::vector<AttributedArc> arcs;
    for (const AttributedArc& a : attributed_arcs(tree))
        if (a.caller != a.callee && a.measured > 0) arcs.push_back(a);
    std::stable_sort(arcs.begin(), arcs.end(),
                     [](const auto& l, const auto& r) { return l.measured > r.measured; });
    std::string out =
        "Sampled calling contexts (stacks unwound from a debug probe's samples)\n\n"
        "Each caller -> callee edge's share of its callee's samples. Sampled: no call counts.\n"
        "* a stack cut short. All of it: --export cct-json, cct-speedscope, cct-folded, "
        "cct-pprof.\n\n"
        "   share      samples  caller -> callee\n";
    char line[64];
    for (std::size_t i = 0; i < arcs.size() && i < rows; ++i) {
        const AttributedArc& a = arcs[i];
        std::snprintf(line, sizeof line, "%7.1f%% %12llu  ",
                      100.0 * static_cast<double>(a.measured) /
                          static_cast<double>(std::max<std::uint64_t>(a.callee_total, 1)),
                      static_cast<unsigned long long>(a.measured));
        out += line + arc_label(a, names);
    }
    if (arcs.size() > rows)
        out += "... " + std::to_string(arcs.size() - rows) + " more edges (--export cct-json)\n";
    return out + "\n\f\n";
}

}  // namespace

std::string measured_arcs_text(const CallingContextTree& tree, const ContextFrameNames& names,
                               std::size_t rows) {
    if (tree.unit() == ContextUnit::kSamples) return sampled_arcs_text(tree, names, rows);
    std::vector<AttributedArc> arcs;
    for (const AttributedArc& a : attributed_arcs(tree))
        if (a.caller != a.callee && a.callee_total > 0) arcs.push_back(a);
    const auto share = [](double part, const AttributedArc& a) {
        return 100 * part / static_cast<double>(a.callee_total);
    };
    const auto misjudged = [&](const AttributedArc& a) {
        return std::abs(share(static_cast<double>(a.measured), a) - share(a.estimated, a));
    };
    std::stable_sort(arcs.begin(), arcs.end(),
                     [&](const auto& l, const auto& r) { return misjudged(l) > misjudged(r); });
    std::string out =
        "Measured calling contexts (function entry/exit events; cycles of the target)\n\n"
        "Each call arc's share of its callee's time: measured, and as gprof's call graph below\n"
        "estimates it (in proportion to calls, as if every call cost the same). * a path with\n"
        "events lost. All of it: --export cct-json, cct-speedscope, cct-folded, cct-pprof.\n\n"
        "measured estimate        calls       cycles  caller -> callee\n";
    char line[96];
    for (std::size_t i = 0; i < arcs.size() && i < rows; ++i) {
        const AttributedArc& a = arcs[i];
        std::snprintf(line, sizeof line, "%7.1f%% %7.1f%% %12llu %12llu  ",
                      share(static_cast<double>(a.measured), a), share(a.estimated, a),
                      static_cast<unsigned long long>(a.calls),
                      static_cast<unsigned long long>(a.measured));
        out += line + arc_label(a, names);
    }
    if (arcs.size() > rows)
        out += "... " + std::to_string(arcs.size() - rows) + " more arcs (--export cct-json)\n";
    return out + "\n\f\n";
}

ChunkStream open_cct_speedscope(const std::shared_ptr<const ExportInput>& input) {
    tree_of(*input);
    return single_chunk([input] {
        const auto& tree = tree_of(*input);
        return cct_speedscope(tree, ContextFrameNames(input->source.elf.get()),
                              elf_name(*input) + (tree.unit() == ContextUnit::kSamples
                                                      ? "stacks sampled through a debug probe"
                                                      : "calling-context tree measured from "
                                                        "entry/exit events"));
    });
}

ChunkStream open_cct_pprof(const std::shared_ptr<const ExportInput>& input) {
    tree_of(*input);
    return single_chunk([input] { return CctPprofBuilder(*input, tree_of(*input)).build(); });
}

ChunkStream open_cct_json(const std::shared_ptr<const ExportInput>& input) {
    tree_of(*input);
    return single_chunk(
        [input] { return cct_json(tree_of(*input), ContextFrameNames(input->source.elf.get())); });
}

}  // namespace rackprof::gmon
