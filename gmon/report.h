// Views of a Profile: gprof's text layout and rackprof's JSON schema (docs: gmon/README.md).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "gmon/json_stream.h"
#include "gmon/profile.h"

namespace rackprof::gmon {

struct TextReportOptions {
    // After the flat profile, a table of each function's 95 % interval of its share and its
    // self seconds (sampling error); off, the report is byte for byte `gprof -b`'s.
    bool intervals = false;
};

// The flat profile, call graph and index laid out exactly as `gprof -b` prints them.
std::string render_gprof_text(const Profile& profile, const TextReportOptions& options = {});

// The 95 % Wilson score interval of a symbol's self share of the profile's time, in percent
// (the flat profile's "% time" column and its sampling error): its credited samples of
// Profile::total_time. Wilson because most functions hold few samples and small shares,
// where the normal approximation's interval is too narrow and leaves [0, 100].
std::pair<double, double> self_percent_interval(const Profile& profile, std::size_t symbol);

struct JsonReportOptions {
    // At most this many flat rows and call-graph entries (the graph's are its first, by total
    // time); 0: all. A large firmware's whole call graph is tens of megabytes of JSON.
    std::size_t top = 0;
    double min_percent = 0.0;  // leave out flat rows below this % time
    // Writes further members into the profile object (the service's counters beside it).
    std::function<void(JsonStream&)> more_fields;
    // The call graph alone: at most this many entries, whatever `top` says of the flat rows
    // (0: none; unset: as `top`). A dashboard draws the busiest few and needs every flat row.
    std::optional<std::size_t> graph_top;
    // The call graph alone: only the entries of the functions (or the cycle) of this name, as
    // `gprof -q<name>` prints (a static function's name may be on several); empty: every entry.
    std::string graph_function;
};

// The "profile" object of the JSON report, written as it is made (what --report json prints).
void write_profile_json(JsonStream& out, const Profile& profile,
                        const JsonReportOptions& options = {});
// Where a call graph being written stands: the next of Profile::graph_order to look at, and
// the entries written so far.
struct ProfileGraphAt {
    std::size_t order = 0;
    std::size_t entries = 0;
};

// Each symbol as an arc line names it: `,"cycle":C,"index":I,"name":"NAME"` (C null outside a
// cycle; the name quoted and escaped). A call graph writes each thousands of times.
using ArcLineNames = std::vector<std::string>;
ArcLineNames arc_line_names(const Profile& profile, JsonStream::ErrorHandler on_bad_utf8);

// write_profile_json's text (compact, names not UTF-8 as U+FFFD) in pieces of about
// `piece_bytes`, each written when asked for: a whole call graph at 10^6 arcs is some 200 MB of
// JSON, which is then never held whole, nor its pages faulted in at once.
class ProfileJsonPieces {
  public:
    ProfileJsonPieces(std::shared_ptr<const Profile> profile, JsonReportOptions options,
                      std::size_t piece_bytes = std::size_t{1} << 20);
    ProfileJsonPieces(const ProfileJsonPieces&) = delete;  // out_ writes to text_
    ProfileJsonPieces& operator=(const ProfileJsonPieces&) = delete;
    // The next piece; nothing once the document is done.
    std::optional<std::string> next();
    // The call graph is cut to a few entries (graph_top, top, graph_function): a small text.
    bool bounded() const;

  private:
    std::shared_ptr<const Profile> profile_;
    JsonReportOptions options_;
    std::size_t piece_bytes_;
    std::string text_;
    JsonStream out_;
    ArcLineNames names_;
    ProfileGraphAt at_;
    bool done_ = false;
};

// The same object as a document, for callers that add to it or pick from it.
nlohmann::json profile_json(const Profile& profile, const JsonReportOptions& options = {});

std::string hex_address(std::uint64_t addr);

// gprof's print order of a function's parents (ascending) or children (descending), as indices
// into Profile::arcs (cg_print.c's cmp_arc: self calls, then calls within a cycle, then time
// and count), and of a cycle's members: the text and JSON reports list them so.
std::vector<std::size_t> sorted_arcs(const Profile& p, const std::vector<std::size_t>& arcs,
                                     bool ascending);
std::vector<std::size_t> sorted_members(const Profile& p, const std::vector<std::size_t>& members);
// Fills Profile::printed_parents / printed_children (compute_profile's last step).
void keep_printed_order(Profile& p);
// A symbol's parents (ascending) or children (descending) in print order: the profile's kept
// order, or sorted into `scratch` when it has none.
const std::vector<std::size_t>& printed_arcs(const Profile& p, std::size_t symbol, bool parents,
                                             std::vector<std::size_t>& scratch);

}  // namespace rackprof::gmon
