// What web/ asks of the rack, for every read and every write, in the rack's own terms: boards,
// sessions, firmware, profiles, exports, the live view. No Asio, no Beast, no HTTP: the API and
// the feeds are thin transports over this, and tests drive them with a fake.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>

#include "daemon/service/rack_types.h"
#include "daemon/service/selection.h"
#include "gmon/decimal_text.h"

namespace rackprof::daemon::service {

// Why the service refused: web/api maps each to one HTTP status and error code.
enum class Failure {
    kBadRequest,     // the request itself is malformed (a parameter, a body that is not JSON)
    kInvalid,        // well-formed but breaks a rule (a board's settings)
    kForbidden,      // allowed to the operator's configuration, not over the API (a link, a path)
    kNotFound,       // no such board, session or firmware
    kConflict,       // the state forbids it now (capturing, from the config file, exists)
    kNoElf,          // the session has no usable ELF, so functions cannot be named
    kNotAnElf,       // an upload that is not a usable ELF
    kBadFirmwareId,  // a firmware id that cannot be one
    kBadGmon,        // an import that is not a gmon.out
    kNoRecords,      // an import that decodes to nothing
    kNotReady,       // storage is not available
    kUnknownFormat,  // no such export format
    kGone,           // retention dropped what it needs (a session's raw data)
    kBadUpstream,    // the fleet store, reached, answered what rackprof cannot use
};

class ServiceError : public std::runtime_error {
  public:
    ServiceError(Failure failure, const std::string& message)
        : std::runtime_error(message), failure_(failure) {}
    Failure failure() const { return failure_; }

  private:
    Failure failure_;
};

// A parameter as a non-negative number ("3", "0.5"), the rule for every numeric parameter of
// the API and of an import (gmon/decimal_text.h); kBadRequest naming `what` otherwise.
inline double parse_non_negative(const std::string& text, const char* what) {
    double v = 0;
    if (gmon::is_plain_decimal(text)) {
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (ec == std::errc() && end == text.data() + text.size() && std::isfinite(v)) return v;
        if (ec == std::errc::result_out_of_range) {  // past double's range, either way
            const std::string whole = text.substr(0, text.find('.'));
            const bool huge = whole.find_first_not_of('0') != std::string::npos;
            return huge ? std::numeric_limits<double>::max() : 0.0;
        }
    }
    throw ServiceError(Failure::kBadRequest, std::string(what) + " must be a non-negative number");
}

// The same as a whole number of type Int: the fraction dropped, values past Int's range
// become its maximum (casting such a double is undefined behaviour).
template <typename Int>
Int parse_count(const std::string& text, const char* what) {
    const double v = parse_non_negative(text, what);
    constexpr auto max = std::numeric_limits<Int>::max();
    return v >= static_cast<double>(max) ? max : static_cast<Int>(v);
}

// GET /sessions' filters; unset ones match everything.
struct SessionFilter {
    std::optional<std::string> board;
    std::optional<std::string> tag;  // boards carrying the tag, as configured now
    std::optional<std::string> state;
    std::int64_t started_from_ns = 0;  // 0: no bound
    std::int64_t started_to_ns = 0;    // 0: no bound
    // One page: the newest `limit` of those older than `before_id` (0: from the newest).
    std::int64_t before_id = 0;
    std::size_t limit = kSessionPage;
    static constexpr std::size_t kSessionPage = 1000;
    static constexpr std::size_t kMaxSessionPage = 10000;
};

// Receive times (Unix ns) bounding the record batches a profile sums; none: the whole session.
// What an annotation (gmon/annotate.h) covers: one function (empty: the busiest), and with
// `instructions` each instruction beside the source lines.
struct AnnotateRequest {
    std::string function;
    bool instructions = false;
};

struct TimeWindow {
    std::optional<std::int64_t> from_ns;
    std::optional<std::int64_t> to_ns;
    bool bounded() const { return from_ns || to_ns; }
};

struct ProfileOptions {
    std::size_t top = 0;       // at most this many flat rows and call-graph entries; 0: all
    double min_percent = 0.0;  // leave out flat rows below this % time
    // The call graph alone (gmon::JsonReportOptions): at most this many entries (0: none), and
    // only the entries of this function.
    std::optional<std::size_t> graph_top;
    std::string graph_function;
    // A selection's profile only: the per-board spread covers this many of the reported
    // functions (the busiest); unset: gmon::default_spread_limit of the boards.
    std::optional<std::size_t> spread_top;
    // A session's profile only: another session of the same program sampled with the other
    // sampling-period setting (one fixed, one dithered); the profile then carries
    // "sync_check" (gmon/sync_check.h) with a warning when the shares differ beyond sampling
    // error. The session asked for is taken as the fixed one.
    std::optional<std::int64_t> sync_reference;
};

// GET /diff's settings: the family-wise significance level and the CI gate's rules
// ("self>+5%", see gmon/profile_diff.h).
struct DiffRequest {
    double alpha = 0.01;
    std::vector<std::string> fail_on;
    // merge=by_name: two builds compared with functions matched by name (else refused, 409).
    bool by_name = false;
    // lines=1: compared by source line (gprof -l's symbols), not by function.
    bool lines = false;
};

// A diff as JSON (schema rackprof.diff/1) and as the text report; `failed`: a gate tripped.
struct DiffResult {
    nlohmann::json view;
    std::string text;
    bool failed = false;
};

// A view that is either new or was there already (201 or 200 over HTTP).
struct Stored {
    nlohmann::json view;
    bool created = false;
};

// A session's data in one format, pulled a chunk at a time; `next` returns nothing at the end.
struct Export {
    std::string content_type;
    std::string filename;
    bool whole = false;  // one small chunk: send it with a length rather than chunked
    std::function<std::optional<std::string>()> next;
};

// An import's settings by name, as a board's (format, protocol, addr_bytes, tpiu, tpiu_stream,
// framed_port, orbstat_port, console_port, board, firmware).
using ImportParameters = std::map<std::string, std::string>;

// Every call is thread-safe. Views are the API's JSON; failures throw ServiceError, anything
// else is an internal error.
class RackService {
  public:
    virtual ~RackService() = default;

    // {"status":"ready","boards":N}; kNotReady when storage cannot be opened.
    virtual nlohmann::json readiness() = 0;
    // Boards and storage as /metrics reports them.
    virtual RackMetrics metrics() = 0;

    virtual nlohmann::json boards() = 0;
    virtual nlohmann::json board(const std::string& name) = 0;
    // Boards managed through the API, from a JSON body (validated as a configured board's).
    virtual nlohmann::json add_board(const nlohmann::json& body) = 0;
    virtual nlohmann::json update_board(const std::string& name, const nlohmann::json& body) = 0;
    virtual void remove_board(const std::string& name) = 0;

    // Starts a session on the board; returns the stored session's view.
    virtual nlohmann::json start_session(const std::string& board) = 0;
    virtual nlohmann::json stop_session(std::int64_t id) = 0;
    virtual void delete_session(std::int64_t id) = 0;
    virtual nlohmann::json sessions(const SessionFilter& filter) = 0;
    virtual nlohmann::json session(std::int64_t id) = 0;
    // The console text the target printed, lines as received; the newest `tail` only (0: all).
    virtual std::string console(std::int64_t id, int tail) = 0;
    // The profile as JSON text, written a piece at a time as it is pulled (a whole call graph
    // at 10^6 arcs is some 200 MB: neither a document nor the whole text is ever held).
    virtual Export profile(std::int64_t id, const TimeWindow& window,
                           const ProfileOptions& options) = 0;
    // `format`: a registered export format (gmon/export.h); kUnknownFormat otherwise; kNoElf
    // for a format that names functions when the session has no ELF. The window applies to
    // the profile formats (all but csv, ndjson and raw).
    virtual Export open_export(std::int64_t id, const std::string& format,
                               const TimeWindow& window) = 0;

    // A session's raw bytes decoded again and split by its RTOS's tasks (gmon/task_views.h):
    // "tasks" (each task's share with its interval, cycles, calls), "interrupts" (the handler
    // table) or "timeline" (the Trace Event document of the events whose target time, in ns
    // from the first stamp, is in [from_ns, to_ns)). kGone when retention dropped its raw data.
    virtual nlohmann::json time_view(std::int64_t id, const std::string& view,
                                     const TimeWindow& window) = 0;

    // Samples and calls per source line (and instruction) of a session's function, within the
    // window: kNoElf without an ELF; kNotFound when the ELF has no function of that name.
    virtual nlohmann::json annotate(std::int64_t id, const AnnotateRequest& request,
                                    const TimeWindow& window) = 0;
    // The same for a selection's sessions merged.
    virtual nlohmann::json selection_annotate(const Selection& selection,
                                              const AnnotateRequest& request) = 0;

    // A selection's sessions merged (their aggregates added; see selection.h): the profile as
    // JSON text, with the selection's sessions, boards and build-id. kConflict when the sessions
    // are of different builds.
    virtual Export selection_profile(const Selection& selection, const ProfileOptions& options) = 0;
    // The same merged profile in a profile format (every registered format that is not
    // paged); kUnknownFormat for the others (raw bytes and records belong to one session).
    virtual Export open_selection_export(const Selection& selection, const std::string& format) = 0;
    // Two selections compared function by function (gmon/profile_diff.h): kBadRequest for a
    // malformed gate rule, kInvalid when the two cannot be compared (no samples and no calls on
    // a side), and each selection's own failures (kConflict for mixed builds within one side).
    // The sides may be of different builds: functions are matched by name.
    virtual DiffResult diff(const Selection& a, const Selection& b, const DiffRequest& request) = 0;
    // An ELF image in a file (an upload's), stored once under its build-id; the file may be
    // moved into the store.
    virtual Stored put_firmware(const std::filesystem::path& elf) = 0;
    // The uploaded images, newest first: [{id, bytes, stored_ns}].
    virtual nlohmann::json firmware() = 0;
    virtual nlohmann::json attach_firmware(std::int64_t session,
                                           const std::string& firmware_id) = 0;
    // A capture (bin, hex) or a gmon.out in a file (an upload's), stored as a completed
    // session; returns its view. Read a piece at a time: never whole in memory.
    virtual nlohmann::json import_session(const std::filesystem::path& file,
                                          const ImportParameters& parameters) = 0;

    // The board capturing this stored session, now; nothing if none is.
    virtual std::optional<LiveView> live(std::int64_t id) = 0;
};

}  // namespace rackprof::daemon::service
