#include "daemon/service/local_rack.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>
#include <utility>

#include "daemon/capture/board.h"
#include "daemon/service/board_from_body.h"
#include "daemon/service/session_views.h"
#include "daemon/service/stored_session_input.h"
#include "gmon/annotate.h"
#include "gmon/board_spread.h"
#include "gmon/calling_context_export.h"
#include "gmon/profile_diff.h"
#include "gmon/profile_pipeline.h"
#include "gmon/report.h"
#include "gmon/sync_check.h"
#include "gmon/task_views.h"
#include "storage/retention.h"

namespace rackprof::daemon::service {

namespace {

using nlohmann::json;

using BoardChange = capture::CaptureService::BoardChange;

void fail_for(BoardChange change, const std::string& board) {
    if (change == BoardChange::kExists)
        throw ServiceError(Failure::kConflict, "a board named '" + board + "' exists");
    if (change == BoardChange::kNotFound)
        throw ServiceError(Failure::kNotFound, "no board named '" + board + "'");
    if (change == BoardChange::kFromFile) {
        throw ServiceError(
            Failure::kConflict,
            "'" + board + "' comes from the configuration file: change it there (and reload)");
    }
}

gmon::JsonReportOptions json_options_of(const ProfileOptions& options) {
    gmon::JsonReportOptions out;
    out.top = options.top;
    out.min_percent = options.min_percent;
    out.graph_top = options.graph_top;
    out.graph_function = options.graph_function;
    return out;
}

// A profile's JSON pulled a piece at a time as the client reads; a call graph cut to a few
// entries is small enough to go whole, with its length.
Export json_pieces(std::shared_ptr<const gmon::Profile> profile, gmon::JsonReportOptions options) {
    auto pieces = std::make_shared<gmon::ProfileJsonPieces>(std::move(profile), std::move(options));
    const bool whole = pieces->bounded();
    return Export{"application/json", "", whole, [pieces] { return pieces->next(); }};
}

void require_elf(const gmon::ExportInput& input, std::int64_t id) {
    if (!input.source.elf) {
        throw ServiceError(Failure::kNoElf, "session " + std::to_string(id) +
                                                " has no usable ELF, so functions cannot be named");
    }
}

// "sessions 1, 2 (boards a, b; build 3f2a…)": a diff side's label in the text report.
std::string selection_label(const nlohmann::json& summary) {
    const auto list = [](const nlohmann::json& values) {
        std::string out;
        for (const auto& v : values) {
            if (!out.empty()) out += ", ";
            out += v.is_string() ? v.get<std::string>() : v.dump();
        }
        return out;
    };
    std::string label = "sessions " + list(summary.value("sessions", nlohmann::json::array())) +
                        " (boards " + list(summary.value("boards", nlohmann::json::array()));
    if (summary.contains("build_id") && summary["build_id"].is_string())
        label += "; build " + summary["build_id"].get<std::string>();
    return label + ")";
}

// The formats a merged selection exports: every one made whole from the profile source (raw
// bytes and records belong to one session).
std::string selection_format_names() {
    std::vector<std::string_view> names;
    for (const auto& f : gmon::export_formats()) {
        if (f.for_selections()) names.push_back(f.name);
    }
    std::string out;
    for (std::size_t i = 0; i < names.size(); ++i)
        out += std::string(i == 0                  ? ""
                           : i + 1 == names.size() ? " or "
                                                   : ", ") +
               std::string(names[i]);
    return out;
}

// Opens a format, a missing ELF answered as the profile views answer it.
// A timeline's events in one answer, at most (about 50 MB of JSON): more are counted as left
// out; a narrower window shows them.
constexpr std::size_t kMaxTimelineEvents = 200'000;

gmon::ChunkStream open_format(const gmon::ExportFormat& exporter,
                              const std::shared_ptr<const gmon::ExportInput>& input) {
    try {
        return exporter.open(input);
    } catch (const gmon::ExportNeedsCallingContext& e) {
        throw ServiceError(Failure::kInvalid, e.what());
    } catch (const gmon::ExportNeedsRaw& e) {
        throw ServiceError(Failure::kInvalid, e.what());  // no raw bytes: an imported gmon.out
    } catch (const std::invalid_argument& e) {
        // What the input lacks: the ELF to name functions (ExportNeedsElf), or records and
        // raw bytes (an imported gmon.out has neither).
        throw ServiceError(input->source.elf ? Failure::kInvalid : Failure::kNoElf, e.what());
    }
}

}  // namespace

LocalRack::LocalRack(capture::CaptureService& capture, std::filesystem::path storage_path,
                     std::size_t readers)
    : capture_(capture),
      storage_path_(std::move(storage_path)),
      readers_(storage_path_, readers),
      firmware_(storage_path_.parent_path() / "firmware"),
      aggregates_(capture_.aggregates(), readers_),
      selections_(capture_, readers_, aggregates_, elves_, firmware_.dir() / "by-name"),
      imports_(capture_, firmware_, elves_) {}

storage::SessionInfo LocalRack::stored_session(std::int64_t id) {
    auto info = readers_.lease()->session(id);
    if (info) return std::move(*info);
    if (capture_.live_snapshot(id)) {
        // Started while storage fails: capturing, its row written once commits succeed again.
        if (const std::string error = storage_error(); !error.empty())
            throw ServiceError(Failure::kNotReady,
                               "session " + std::to_string(id) +
                                   " is capturing, but storage is failing (" + error +
                                   "): its row is written once commits succeed again");
        // Just started: its id is reserved and already on the board (and in the events), its
        // row comes with the writer's next commit. Wait for it rather than deny it exists.
        for (int i = 0; i < 300 && capture_.live_snapshot(id); ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
            if (auto later = readers_.lease()->session(id)) return std::move(*later);
        }
    }
    throw ServiceError(Failure::kNotFound, "no session " + std::to_string(id));
}

std::string LocalRack::storage_error() {
    const storage::StorageHealth health = capture_.storage_health();
    return health.failing ? health.error : "";
}

json LocalRack::readiness() {
    try {
        // A fresh connection, not a pooled one: the probe is whether storage opens now.
        storage::SessionStore probe(storage_path_, storage::Database::Mode::kReadOnly);
    } catch (const std::exception&) {
        throw ServiceError(Failure::kNotReady, "storage is not available");
    }
    json out = {{"status", "ready"}, {"boards", capture_.boards().size()}};
    add_storage_state(out, storage_error());
    // The push to the fleet store: pending, pushed, last error, next attempt.
    if (fleet_status_) out["fleet"] = fleet_status_();
    return out;
}

json LocalRack::boards() {
    json list = json::array();
    for (const auto& b : capture_.boards()) list.push_back(board_json(b));
    return list;
}

RackMetrics LocalRack::metrics() {
    RackMetrics m;
    for (const auto& b : capture_.boards()) {
        m.boards.push_back({b.name, b.state, b.session.has_value(), b.reconnects, b.counters});
    }
    m.writer = capture_.writer_stats();
    return m;
}

json LocalRack::board(const std::string& name) {
    for (const auto& b : capture_.boards()) {
        if (b.name == name) return board_json(b);
    }
    throw ServiceError(Failure::kNotFound, "no board named '" + name + "'");
}

json LocalRack::add_board(const json& body) {
    const config::BoardConfig config =
        board_from_body(body, "", firmware_, {capture_.config().api_links});
    fail_for(capture_.add_board(config), config.name);
    return board(config.name);
}

json LocalRack::update_board(const std::string& name, const json& body) {
    const config::BoardConfig config =
        board_from_body(body, name, firmware_, {capture_.config().api_links});
    fail_for(capture_.update_board(config), config.name);
    return board(config.name);
}

void LocalRack::remove_board(const std::string& name) {
    fail_for(capture_.remove_board(name), name);
}

json LocalRack::start_session(const std::string& board_name) {
    board(board_name);  // 404 for a board that is not there
    const std::int64_t id = capture_.start_session(board_name);
    if (!id) throw ServiceError(Failure::kConflict, "the session could not start");
    return session_json(stored_session(id), storage_error());
}

json LocalRack::stop_session(std::int64_t id) {
    const auto info = stored_session(id);
    if (info.state != "capturing" || !capture_.stop_stored_session(id))
        throw ServiceError(Failure::kConflict,
                           "session " + std::to_string(id) + " is not capturing");
    return session_json(stored_session(id), storage_error());
}

void LocalRack::delete_session(std::int64_t id) {
    const auto info = stored_session(id);
    if (info.state == "capturing" || !capture_.delete_stored_session(id))
        throw ServiceError(Failure::kConflict,
                           "session " + std::to_string(id) + " is capturing: stop it first");
}

json LocalRack::sessions(const SessionFilter& filter) {
    std::set<std::string> tagged;  // boards carrying the tag, as configured now
    if (filter.tag) {
        for (const auto& b : capture_.board_configs()) {
            if (std::find(b.tags.begin(), b.tags.end(), *filter.tag) != b.tags.end())
                tagged.insert(b.name);
        }
    }
    const auto wanted = [&](const storage::SessionInfo& s) {
        return (!filter.board || s.spec.board == *filter.board) &&
               (!filter.tag || tagged.count(s.spec.board)) &&
               (!filter.state || s.state == *filter.state) &&
               (!filter.started_from_ns || s.spec.started_ns >= filter.started_from_ns) &&
               (!filter.started_to_ns || s.spec.started_ns <= filter.started_to_ns);
    };
    // A page, newest first from the store, listed in id order: a bench of 10^5 sessions made
    // every listing a gigabyte of JSON.
    const auto page = readers_.lease()->sessions_before(filter.before_id, filter.limit, wanted);
    json list = json::array();
    const std::string failing = storage_error();
    for (auto s = page.rbegin(); s != page.rend(); ++s) list.push_back(session_json(*s, failing));
    return list;
}

json LocalRack::session(std::int64_t id) {
    json out = session_json(stored_session(id), storage_error());
    out["gaps"] = gaps_json(readers_.lease()->gaps(id));
    return out;
}

std::string LocalRack::console(std::int64_t id, int tail) {
    stored_session(id);
    std::string text;
    for (const auto& line : readers_.lease()->console(id, tail)) text += line.text;
    return text;
}

Export LocalRack::profile(std::int64_t id, const TimeWindow& window,
                          const ProfileOptions& options) {
    const auto info = stored_session(id);
    const auto input = session_input(info, window);
    require_elf(*input, id);
    const auto computed =
        window.bounded()
            ? std::make_shared<const ProfileCache::Computed>(ProfileCache::compute(input->source))
            : profiles_.get(id, input->source);
    // Unless the target named this ELF by its build-id, does the capture fit its code? The
    // daemon captures whatever the board sends; a misfit is reported here, never refused.
    const bool named = !info.target.build_id.empty() && input->source.elf &&
                       info.target.build_id == input->source.elf->build_id();
    nlohmann::json sync_check =
        options.sync_reference ? sync_check_of(computed->profile, info, *options.sync_reference)
                               : nlohmann::json();
    gmon::JsonReportOptions json_options = json_options_of(options);
    // DWT samples taken while the core slept: a count beside the functions, never one of them
    // (the record batches do not carry them, so a window has none).
    // Written after the call graph, as the client reads: what it uses is kept by value.
    const std::optional<std::uint64_t> sleeping =
        window.bounded() ? std::nullopt : std::optional(info.counters.sleep_samples);
    const std::string elf_name =
        input->source.elf ? input->source.elf->path().filename().string() : std::string();
    json_options.more_fields = [sleeping, sync_check = std::move(sync_check), named, computed,
                                elf_name](gmon::JsonStream& out) {
        const gmon::ElfFit& fit = computed->fit;
        if (sleeping) {
            out.field("sleeping", *sleeping);
        } else {
            out.field("sleeping", nullptr);
        }
        // With ?sync_reference=ID: the synchronisation alarm against that session.
        if (!sync_check.is_null()) out.field("sync_check", sync_check);
        // null, or {"warning": evidence, counts}: the capture does not fit the ELF's code.
        out.key("wrong_elf");
        if (named || !fit.suspicious()) {
            out.value(nullptr);
        } else {
            out.begin_object()
                .field("pcs", fit.pcs)
                .field("pcs_off_code", fit.pcs_off_code)
                .field("targets", fit.targets)
                .field("targets_off_entry", fit.targets_off_entry)
                .field("warning", fit.evidence(elf_name) + ": wrong ELF for this capture?");
            out.end_object();
        }
    };
    return json_pieces(std::shared_ptr<const gmon::Profile>(computed, &computed->profile),
                       std::move(json_options));
}

// The synchronisation alarm against another session (the dithered run): its whole profile.
nlohmann::json LocalRack::sync_check_of(const gmon::Profile& fixed,
                                        const storage::SessionInfo& fixed_info,
                                        std::int64_t reference) {
    const auto info = stored_session(reference);
    // Another build's shares differ for reasons of its own: every function would be flagged.
    const std::string& a = build_id_of(fixed_info);
    const std::string& b = build_id_of(info);
    if (!a.empty() && !b.empty() && a != b)
        throw ServiceError(Failure::kConflict,
                           "cannot check synchronisation against session " +
                               std::to_string(reference) + ": it is another build (" + b +
                               ", this session " + a +
                               "); the check compares two captures of one build, one sampled "
                               "with a fixed period and one with a dithered period");
    const auto input = session_input(info, {});
    require_elf(*input, reference);
    const auto computed = profiles_.get(reference, input->source);
    try {
        nlohmann::json check = gmon::sync_check_json(gmon::check_sync(fixed, computed->profile));
        check["reference"] = reference;
        return check;
    } catch (const std::invalid_argument& e) {
        throw ServiceError(Failure::kInvalid,
                           std::string("cannot check synchronisation: ") + e.what());
    }
}

Export LocalRack::selection_profile(const Selection& selection, const ProfileOptions& options) {
    const auto merged = selections_.merged(selection);
    const gmon::Profile& computed = SelectionMerges::profile_of(*merged);
    gmon::JsonReportOptions json_options = json_options_of(options);
    std::size_t omitted = 0;
    const auto functions = gmon::spread_functions(
        computed, json_options,
        options.spread_top.value_or(gmon::default_spread_limit(merged->boards.size())), &omitted);
    const auto boards = selections_.spread_boards(*merged, functions);
    json_options.more_fields = [merged, functions, omitted, boards](gmon::JsonStream& out) {
        out.field("selection", merged->input->summary);
        out.key("spread");
        gmon::write_board_spread(out, functions, omitted, boards);
    };
    return json_pieces(std::shared_ptr<const gmon::Profile>(merged, &computed),
                       std::move(json_options));
}

DiffResult LocalRack::diff(const Selection& a, const Selection& b, const DiffRequest& request) {
    gmon::DiffOptions options;
    options.alpha = request.alpha;
    if (!(options.alpha > 0 && options.alpha < 1))
        throw ServiceError(Failure::kBadRequest, "alpha must be between 0 and 1");
    for (const auto& rule : request.fail_on) {
        try {
            options.gates.push_back(gmon::parse_gate_rule(rule));
        } catch (const std::invalid_argument& e) {
            throw ServiceError(Failure::kBadRequest, e.what());
        }
    }
    const auto merged_a = selections_.merged(a), merged_b = selections_.merged(b);
    const auto& summary_a = merged_a->input->summary;
    const auto& summary_b = merged_b->input->summary;
    require_one_build(summary_a, summary_b, request.by_name || a.by_name || b.by_name,
                      "A (" + selection_label(summary_a) + ")",
                      "B (" + selection_label(summary_b) + ")");
    try {
        // By line, each side's profile is made for the request (the cached ones are by
        // function).
        const gmon::ProfileDiff d =
            request.lines
                ? gmon::diff_profiles(gmon::profile_of(merged_a->input->source, {0, true}),
                                      gmon::profile_of(merged_b->input->source, {0, true}), options)
                : gmon::diff_profiles(SelectionMerges::profile_of(*merged_a),
                                      SelectionMerges::profile_of(*merged_b), options);
        return {gmon::diff_json(d, summary_a, summary_b),
                gmon::render_diff_text(d, selection_label(summary_a), selection_label(summary_b)),
                d.failed()};
    } catch (const std::invalid_argument& e) {
        throw ServiceError(Failure::kInvalid, std::string("cannot compare: ") + e.what());
    }
}

Export LocalRack::open_selection_export(const Selection& selection, const std::string& format) {
    const auto* exporter = gmon::find_export_format(format);
    if (!exporter || !exporter->for_selections())
        throw ServiceError(Failure::kUnknownFormat,
                           "a selection exports as " + selection_format_names() + ", not '" +
                               format + "' (raw bytes and records belong to one session)");
    const auto input = selections_.merged(selection)->input;
    const std::string build_id = input->summary["build_id"].is_string()
                                     ? input->summary["build_id"].get<std::string>()
                                     : "unknown";
    return {std::string(exporter->content_type),
            "selection-" + build_id.substr(0, 12) + std::string(exporter->file_suffix), true,
            open_format(*exporter, input)};
}

Export LocalRack::open_export(std::int64_t id, const std::string& format,
                              const TimeWindow& window) {
    const auto* exporter = gmon::find_export_format(format);
    if (!exporter)
        throw ServiceError(Failure::kUnknownFormat,
                           "unknown format '" + format + "' (" + gmon::export_format_names() + ")");
    const auto info = stored_session(id);
    // The paged formats (raw, ndjson) are the raw data itself.
    if (exporter->paged && info.raw_pruned)
        throw ServiceError(Failure::kGone, "session " + std::to_string(id) + ": the " + format +
                                               " export needs its raw data, but its " +
                                               storage::raw_pruned_reason(*info.raw_pruned));
    const auto input = session_input(info, window);
    return {std::string(exporter->content_type),
            info.spec.board + "-" + std::to_string(id) + std::string(exporter->file_suffix),
            !exporter->paged, open_format(*exporter, input)};
}

// The annotation of an input's aggregate, source text from the configured roots (else the
// ELF's compilation directories).
json LocalRack::annotation_of(const gmon::ExportInput& input, const AnnotateRequest& request) {
    if (!input.source.elf)
        throw ServiceError(Failure::kNoElf, "annotating needs the firmware's ELF");
    const gmon::Symbolizer& elf = *input.source.elf;
    const gmon::SourceRoots roots =
        source_roots_.empty() ? gmon::SourceRoots::of_elf(elf) : gmon::SourceRoots(source_roots_);
    gmon::AnnotateOptions options;
    options.function = request.function;
    options.instructions = request.instructions;
    try {
        return gmon::annotation_json(gmon::annotate(*input.source.aggregate, elf, roots, options));
    } catch (const std::invalid_argument& e) {
        throw ServiceError(Failure::kNotFound, e.what());
    }
}

json LocalRack::time_view(std::int64_t id, const std::string& view, const TimeWindow& window) {
    if (view != "tasks" && view != "interrupts" && view != "timeline")
        throw ServiceError(Failure::kNotFound, "no view " + view);
    const auto info = stored_session(id);
    if (info.raw_pruned)
        throw ServiceError(Failure::kGone, "session " + std::to_string(id) + ": " + view +
                                               " are decoded from its raw data, but its " +
                                               storage::raw_pruned_reason(*info.raw_pruned));
    const auto input = session_input(info, {});
    if (!input->wire)
        throw ServiceError(Failure::kInvalid, "session " + std::to_string(id) + ": " + view +
                                                  " are decoded from a capture's raw bytes, and "
                                                  "this session was imported from a " +
                                                  info.spec.format + " file");
    gmon::TaskSplitOptions options;
    options.timeline = view == "timeline";
    if (window.from_ns) options.timeline_from_ns = static_cast<std::uint64_t>(*window.from_ns);
    if (window.to_ns) options.timeline_to_ns = static_cast<std::uint64_t>(*window.to_ns);
    options.max_timeline_events = kMaxTimelineEvents;
    const gmon::TaskSplit split = gmon::split_tasks(*input, options);
    if (view == "tasks") return gmon::tasks_json(split);
    if (view == "interrupts") return gmon::interrupts_json(split);
    json out =
        json::parse(gmon::trace_document(split, gmon::ContextFrameNames(input->source.elf.get()),
                                         info.spec.board + " session " + std::to_string(id)));
    out["otherData"]["from_ns"] = options.timeline_from_ns;
    if (window.to_ns) out["otherData"]["to_ns"] = options.timeline_to_ns;
    return out;
}

json LocalRack::annotate(std::int64_t id, const AnnotateRequest& request,
                         const TimeWindow& window) {
    return annotation_of(*session_input(stored_session(id), window), request);
}

json LocalRack::selection_annotate(const Selection& selection, const AnnotateRequest& request) {
    return annotation_of(*selections_.merged(selection)->input, request);
}

Stored LocalRack::put_firmware(const std::filesystem::path& upload) {
    return firmware_.put(upload);
}

json LocalRack::attach_firmware(std::int64_t session_id, const std::string& id) {
    stored_session(session_id);
    if (!FirmwareStore::is_id(id))
        throw ServiceError(Failure::kBadFirmwareId, "\"id\" must be a firmware id");
    const auto path = firmware_.find(id);
    if (!path) throw ServiceError(Failure::kNotFound, "no firmware " + id + "; PUT it first");
    const auto elf = elves_.get(path->string());
    capture_.set_session_firmware(session_id, path->string(), elf->build_id(),
                                  capture::file_sha256(*path));
    return session_json(stored_session(session_id), storage_error());
}

// The first session made, and every one's id ("imported": a Tiva file makes one per report).
json LocalRack::import_session(const std::filesystem::path& file, const ImportParameters& query) {
    const std::vector<std::int64_t> ids = imports_.import(file, query);
    json out = session_json(stored_session(ids.front()), storage_error());
    out["imported"] = ids;
    return out;
}

// A stored session as the pipeline's input (stored_session_input.h): its aggregate, whole or
// the batches inside a window, and its ELF while that still loads (else addresses only).
std::shared_ptr<gmon::ExportInput> LocalRack::session_input(const storage::SessionInfo& info,
                                                            const TimeWindow& window) {
    // A window is answered from the record batches: gone with the raw data.
    if (window.bounded() && info.raw_pruned)
        throw ServiceError(Failure::kGone,
                           "session " + std::to_string(info.id) +
                               ": a time window (from/to) needs its records, but its " +
                               storage::raw_pruned_reason(*info.raw_pruned));
    StoredSessionData data;
    if (!info.spec.elf_path.empty()) {
        try {
            data.elf = elves_.get(info.spec.elf_path);
        } catch (const std::exception&) {
            data.elf = nullptr;  // moved or deleted since: profile by address only
        }
    }
    data.aggregate = window.bounded() ? aggregates_.between(info.id, window.from_ns, window.to_ns)
                                      : aggregates_.whole(info.id);
    // The measured tree covers the whole session: a window gets none rather than a wrong one.
    if (!window.bounded()) {
        if (auto tree = readers_.lease()->calling_context(info.id); !tree.empty())
            data.calling_context =
                std::make_shared<const gmon::CallingContextTree>(std::move(tree));
    }
    // A connection leased per page: a slow client holds none between pages.
    return stored_session_input(info, std::move(data), [this] { return readers_.lease(); });
}

std::optional<LiveView> LocalRack::live(std::int64_t id) {
    return live_views_.view_of(id, capture_.live_snapshot(id));
}

}  // namespace rackprof::daemon::service
