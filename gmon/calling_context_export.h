// Views of the measured calling-context tree (gmon/calling_context.h), beside the estimated
// stacks of gmon/stacks.h: the exports `cct-folded`, `cct-speedscope`, `cct-pprof` and
// `cct-json`, and the caller-attributed arcs of the JSON report. Time is in target cycles.
//
// Frames: a path's functions (named by the ELF's gprof symbols, else their address); a
// handler's paths start with its exception's frame ("[SysTick]", "[IRQ3]"); time a context
// spent outside every function is its root frame alone ("[Thread]" for thread mode). An
// incomplete node (calling_context.h says when) is named with " [incomplete]" in folded and
// speedscope frames and labelled incomplete=true in pprof, so no view shows it as exact.
//
// These formats never fall back to the estimate: without a tree they throw
// ExportNeedsCallingContext (the API answers 422 no_calling_context); `folded`, `speedscope`
// and `pprof` stay the estimate from gprof's call graph, so either can be asked for.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "gmon/calling_context.h"
#include "gmon/export.h"
#include "gmon/function_index.h"
#include "gmon/json_stream.h"

namespace rackprof::gmon {

class ExportNeedsCallingContext : public std::invalid_argument {
  public:
    using std::invalid_argument::invalid_argument;
};

// Names of a tree's frames: function names from the ELF (or hex addresses), root names.
class ContextFrameNames {
  public:
    explicit ContextFrameNames(const Symbolizer* elf);
    std::string function(std::uint64_t address) const;
    std::string of(const ContextNode& node) const;  // without the incomplete mark
    // The function's entry in DWARF's line table, where there is one.
    std::optional<SourceLocation> source(std::uint64_t address) const;

  private:
    const Symbolizer* elf_;
    std::optional<FunctionIndex> index_;
};

// One line per path with exclusive cycles ("f;g;h 123"), sorted; summing to the roots'
// inclusive cycles.
std::string cct_folded(const CallingContextTree& tree, const ContextFrameNames& names);
// speedscope's evented profiles synthesized from the tree, one per root (thread mode first):
// each path opened for its inclusive cycles, its children laid end to end in the order they
// were first seen, unit "none" (cycles; speedscope has no cycle unit).
std::string cct_speedscope(const CallingContextTree& tree, const ContextFrameNames& names,
                           const std::string& name);
// The measured view first, as text: each caller -> callee arc's share of its callee's cycles,
// measured and as gprof estimates it (in proportion to calls), the arcs the estimate misjudges
// most first (at most `rows`; a line says how many more). What `rackprof convert` prints
// before gprof's report when entry/exit events were captured.
std::string measured_arcs_text(const CallingContextTree& tree, const ContextFrameNames& names,
                               std::size_t rows = 20);

// The tree and its caller-attributed arcs as one JSON document (schema rackprof.cct/1).
std::string cct_json(const CallingContextTree& tree, const ContextFrameNames& names);
// The report's "calling_context" member: totals and the caller-attributed arcs.
void write_calling_context_json(JsonStream& out, const CallingContextTree& tree,
                                const ContextFrameNames& names);

ChunkStream open_cct_folded(const std::shared_ptr<const ExportInput>& input);
ChunkStream open_cct_speedscope(const std::shared_ptr<const ExportInput>& input);
ChunkStream open_cct_pprof(const std::shared_ptr<const ExportInput>& input);
ChunkStream open_cct_json(const std::shared_ptr<const ExportInput>& input);

}  // namespace rackprof::gmon
