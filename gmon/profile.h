// The profile engine: GNU gprof's flat profile and call graph, computed from gmon data and
// the firmware's symbols with gprof's own semantics, so its numbers equal gprof's output:
//  - a histogram bin is shared among the symbols it overlaps, in proportion to the overlap,
//    and a symbol's range ends where the next symbol starts;
//  - call counts come from arcs; self-recursive calls are set aside;
//  - strongly connected components collapse into <cycle N>;
//  - a callee's self and child time is charged to each caller in proportion to that caller's
//    share of the calls; functions without recorded callers are <spontaneous>.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gmon/gmon_data.h"
#include "gmon/symbolizer.h"

namespace rackprof::gmon {

inline constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();

// A function as gprof's symbol table holds it.
struct ProfileSymbol {
    std::string name;
    std::uint64_t addr = 0;
    std::uint64_t end_addr = 0;  // inclusive
    bool is_static = false;
    bool is_func = true;
    int line = 0;
    std::string file;  // source file of the function's entry, where DWARF tells
};

// A source path's last component, as gprof prints it ("../src/WAIT1.c" -> "WAIT1.c").
inline std::string source_file_name(const std::string& path) {
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

struct ProfileArc {
    std::size_t parent = 0;  // index into Profile::symbols
    std::size_t child = 0;
    std::uint64_t count = 0;
    double time = 0;        // the child's self time charged to this arc, in samples
    double child_time = 0;  // the child's descendants' time charged to this arc, in samples
};

// Per symbol (and per cycle) results, in samples unless named otherwise.
struct ProfileNode {
    double self_time = 0;          // gprof's hist.time: samples credited from the histogram
    std::uint64_t ncalls = 0;      // calls from other functions
    std::uint64_t self_calls = 0;  // self-recursive calls
    double child_time = 0;         // time propagated from descendants
    double prop_self = 0;          // cg.prop.self: self time that reaches the call graph's roots
    double prop_child = 0;
    double prop_fract = 0;
    bool print_flag = false;
    std::size_t cycle = 0;           // 1-based cycle number; 0: not on a cycle
    std::size_t cycle_head = kNone;  // a symbol's cycle node index into Profile::cycles, or kNone
    std::size_t index = 0;           // call-graph index number ([N]); 0: not printed
    int top_order = 0;
    std::vector<std::size_t> parents;   // indices into Profile::arcs, in gprof's order
    std::vector<std::size_t> children;  // indices into Profile::arcs, in gprof's order
    std::vector<std::size_t> members;   // cycles: member symbol indices
};

struct Profile {
    std::vector<ProfileSymbol> symbols;
    std::vector<ProfileNode> nodes;   // parallel to symbols
    std::vector<ProfileNode> cycles;  // cycles[k] is <cycle k+1>
    std::vector<ProfileArc> arcs;

    double total_time = 0;  // samples in the histogram less excluded symbols' (gprof's total_time)
    double print_time = 0;  // time that reaches the call graph (gprof's print_time)
    std::uint64_t total_samples = 0;  // samples in the histogram, whatever they were credited to
    std::uint32_t prof_rate = 0;      // samples per second
    std::string dimension = "seconds";
    char dimension_abbrev = 's';
    double bin_bytes = 0;  // bytes covered by one histogram bin ("granularity")
    bool has_histogram = false;
    bool has_arcs = false;
    bool lines = false;  // line mode: symbols are source lines (ProfileOptions::lines)

    // Rows of the flat profile in gprof's order (symbol indices).
    std::vector<std::size_t> flat_order;
    // Entries of the call graph in index order: symbol index, or cycles are encoded as
    // kCycleBase + cycle index.
    std::vector<std::size_t> graph_order;
    static constexpr std::size_t kCycleBase = std::size_t{1} << 40;
    // Each symbol's parents and children (indices into arcs) in the order gprof prints them
    // (report.h's sorted_arcs), made once by compute_profile: a whole call graph's report
    // would sort every arc again each time. Empty for a profile put together otherwise; the
    // reports sort then.
    std::vector<std::vector<std::size_t>> printed_parents;
    std::vector<std::vector<std::size_t>> printed_children;

    double seconds_per_sample() const { return prof_rate ? 1.0 / prof_rate : 0.0; }
};

struct ProfileOptions {
    std::uint32_t prof_rate_override = 0;  // 0: the histogram's rate
    // gprof's line mode (`gprof -l`): a symbol per source line (gprof_line_symbol_table).
    bool lines = false;
};

// The symbol table gprof builds from an ELF (its selection, de-duplication and ranges).
// Throws std::invalid_argument when the ELF has no .text section or names no function.
// `shrunk` (optional) tells whether de-duplication removed entries: gprof then reads the last
// symbol's histogram end from a left-over, zeroed slot past its table, and the last symbol
// gets no samples (without removals the read goes past the allocation; see profile.cc).
std::vector<ProfileSymbol> gprof_symbol_table(const Symbolizer& elf, bool* shrunk = nullptr);
// gprof -l's table: a symbol wherever the source file, function or line changes (not
// functions: is_func false), with the function symbols (their file and line set), finalized
// together; from DWARF as BFD reads it (gprof_lines.h). Without DWARF, the function table.
std::vector<ProfileSymbol> gprof_line_symbol_table(const Symbolizer& elf, bool* shrunk = nullptr);

// Throws std::invalid_argument when the data cannot be profiled (e.g. no symbols).
Profile compute_profile(const GmonData& data, const Symbolizer& elf,
                        const ProfileOptions& options = {});

}  // namespace rackprof::gmon
