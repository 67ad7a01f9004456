// A selection: a set of stored sessions named by what they are (ids, boards, tags, the
// firmware's build-id, when they started). One syntax everywhere: the API's query string and
// the CLI's `--select` take the same key=value pairs joined by '&', e.g.
//   build_id=3f2a…&tag=bench-a&from=1700000000000000000
// A key's comma-separated values are alternatives; different keys must all hold.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gmon/export.h"
#include "storage/session_store.h"

namespace rackprof::daemon::service {

struct Selection {
    std::vector<std::int64_t> sessions;  // session=1,2
    std::vector<std::string> boards;     // board=a,b
    std::vector<std::string> tags;       // tag=x,y: boards carrying one of them, as configured now
    std::vector<std::string> build_ids;  // build_id=…: the session's build_id (see build_id_of)
    std::vector<std::string> benches;    // bench=: the fleet store's benches (needs [fleet] url)
    std::int64_t from_ns = 0;            // from=: started at or after (Unix ns); 0: no bound
    std::int64_t to_ns = 0;              // to=: started at or before; 0: no bound
    // merge=by_name: sessions of different builds are merged with functions matched by name
    // (gmon/name_layout.h); without it they are refused.
    bool by_name = false;
    // task=NAME: of each session, only what ran in these tasks (an RTOS's, by name as
    // gmon::task_label gives it): the session's raw bytes decoded again and split by task.
    std::vector<std::string> tasks;
};

// The keys a selection takes, in the order the API documents them.
inline constexpr const char* kSelectionKeys[] = {"session", "board", "tag",   "build_id", "bench",
                                                 "from",    "to",    "merge", "task"};
// More sessions than this in one selection is refused (a request must stay bounded).
inline constexpr std::size_t kMaxSelectedSessions = 10000;

// From parameters by name; other names are left to the caller. Throws ServiceError
// (kBadRequest) for a malformed value or a selection naming nothing at all.
Selection parse_selection(const std::map<std::string, std::string>& parameters);
// "a=1&b=x%20y" -> {a: 1, b: "x y"}; the CLI's --select. Throws ServiceError (kBadRequest).
std::map<std::string, std::string> parse_query_string(std::string_view text);

// What fleets are keyed on: the ELF's GNU build-id, else the ELF file's SHA-256 (as the
// firmware store names uploads), else the build-id the target announced; "" when none is known.
std::string build_id_of(const storage::SessionInfo& session);

// The sessions of `all` that `selection` names, in id order. `tagged`: the boards carrying each
// of the selection's tags. Throws ServiceError: kNotFound for an id that does not exist or an
// empty result, kBadRequest above kMaxSelectedSessions, or for bench= (a bench's own sessions
// are not labelled by bench: bench= selects from the fleet store).
std::vector<storage::SessionInfo> select_sessions(
    const Selection& selection, std::vector<storage::SessionInfo> all,
    const std::map<std::string, std::vector<std::string>>& boards_by_tag);

// What `tasks` (task= names) ran in one stored session: its raw bytes decoded again and split
// by task, the named tasks' records added, and their calling-context trees (thread mode's paths
// in those tasks; empty without entry/exit events). Throws ServiceError: kGone when its raw
// data is gone (retention), kNotFound when it has no task of those names.
struct TaskSlice {
    std::shared_ptr<const gmon::Aggregate> aggregate;
    std::shared_ptr<const gmon::CallingContextTree> tree;
};
TaskSlice task_slice(storage::SessionStore& store, const storage::SessionInfo& session,
                     const std::vector<std::string>& tasks);

// The sessions grouped by board (boards in name order, sessions as given): a fleet's per-board
// spread merges each group.
std::map<std::string, std::vector<storage::SessionInfo>> sessions_by_board(
    const std::vector<storage::SessionInfo>& sessions);

// The selected sessions' one build-id. Throws ServiceError (kConflict) naming the builds when
// they differ: sessions of different builds are never merged silently.
std::string common_build_id(const std::vector<storage::SessionInfo>& sessions);

// The build a profile input's summary names ("" when unknown or several): its ELF's build-id
// for a file, the sessions' common build for a selection.
std::string build_id_in(const nlohmann::json& summary);

// Two profiles are compared function by function only within one build, unless asked to match
// functions by name (merge=by_name): a function of the same name in another build may be other
// code, and every function would differ for reasons of its own. Throws ServiceError
// (kConflict) naming both build-ids when `a` and `b` (summaries) are different builds.
void require_one_build(const nlohmann::json& a, const nlohmann::json& b, bool by_name,
                       const std::string& what_a, const std::string& what_b);

// The selected sessions as one profile input: their aggregates added (nothing is decoded
// again), the first loadable ELF, the first session's target range and histogram shapes, and a
// summary naming the sessions, boards and build-id. No raw bytes, no records (they belong to
// one session). `aggregate_of` gives a session's whole aggregate, `elf_of` loads an ELF by path
// (and may throw: a moved file is skipped). Throws ServiceError: kConflict for different builds
// or different imported histogram shapes.
// With `by_name`, sessions of different builds are merged with functions matched by name: each
// build's aggregate moved into one layout of all builds' functions, whose ELF is written to
// `scratch` (kNoElf when a build has no loadable ELF); the summary lists the builds and what
// fell outside every function.
std::shared_ptr<gmon::ExportInput> merged_input(
    const std::vector<storage::SessionInfo>& sessions,
    const std::function<std::shared_ptr<const gmon::Aggregate>(std::int64_t)>& aggregate_of,
    const std::function<std::shared_ptr<const gmon::Symbolizer>(const std::string&)>& elf_of,
    bool by_name = false, const std::filesystem::path& scratch = {});

}  // namespace rackprof::daemon::service
