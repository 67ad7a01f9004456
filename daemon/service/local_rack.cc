#include "daemon/service/local_rack.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <limits>
#include <set>
#include <thread>
#include <utility>

#include "daemon/capture/board.h"
#include "daemon/capture/capture_session.h"
#include "daemon/ingest/capture_import.h"
#include "daemon/ingest/import_formats.h"
#include "daemon/ingest/wire_settings.h"
#include "gmon/board_spread.h"
#include "gmon/calling_context.h"
#include "gmon/calling_context_export.h"
#include "gmon/function_index.h"
#include "gmon/gmon_reader.h"
#include "gmon/profile_diff.h"
#include "gmon/profile_pipeline.h"
#include "gmon/report.h"
#include "gmon/sync_check.h"
#include "protocol/wire_format.h"
#include "storage/counters_json.h"
#include "storage/retention.h"
#include "storage/session_pages.h"

namespace rackprof::daemon::service {

namespace {

using nlohmann::json;

[[noreturn]] void fail(Failure failure, const std::string& message) {
    throw ServiceError(failure, message);
}

// ---- JSON views -------------------------------------------------------------------------

// "storage_state": ok | storage_error, and what storage said ("storage_error", null when ok).
void add_storage_state(json& out, const std::string& storage_error) {
    out["storage_state"] = storage_error.empty() ? "ok" : "storage_error";
    out["storage_error"] = storage_error.empty() ? json(nullptr) : json(storage_error);
}

json board_json(const BoardStatus& b) {
    json out = {{"name", b.name},
                {"link", b.link},
                {"state", to_string(b.state)},
                {"last_error", b.last_error},
                {"reconnects", b.reconnects},
                {"session", b.session ? json(*b.session) : json(nullptr)},
                {"counters", b.session ? storage::counters_json(b.counters) : json(nullptr)}};
    add_storage_state(out, b.storage_error);
    return out;
}

// Where a session's data is missing; what each gap lost, or null where that is unknown.
json gaps_json(const std::vector<storage::Gap>& gaps) {
    const auto count = [](const std::optional<std::uint64_t>& n) {
        return n ? json(*n) : json(nullptr);
    };
    json out = json::array();
    for (const auto& g : gaps) {
        out.push_back({{"started_ns", g.started_ns},
                       {"ended_ns", g.ended_ns},
                       {"reason", g.reason},
                       {"records_lost", count(g.records_lost)},
                       {"bytes_lost", count(g.bytes_lost)}});
    }
    return out;
}

using gmon::exception_name;

// `storage_error`: what storage says while its commits fail and this session is capturing.
json session_json(const storage::SessionInfo& s, const std::string& storage_error) {
    json out = {{"id", s.id},
                {"board", s.spec.board},
                {"link", s.spec.link},
                {"protocol", s.spec.protocol},
                {"format", s.spec.format},
                {"addr_bytes", s.spec.addr_bytes},
                {"elf",
                 {{"path", s.spec.elf_path},
                  {"build_id", s.spec.elf_build_id},
                  {"sha256", s.spec.elf_sha256}}},
                {"target", s.target == storage::TargetInfo{}
                               ? json(nullptr)
                               : json{{"build_id", s.target.build_id},
                                      {"text_lo", gmon::hex_address(s.target.text_lo)},
                                      {"text_hi", gmon::hex_address(s.target.text_hi)}}},
                {"build_id", build_id_of(s).empty() ? json(nullptr) : json(build_id_of(s))},
                {"state", s.state},
                {"started_ns", s.spec.started_ns},
                {"ended_ns", s.ended_ns ? json(s.ended_ns) : json(nullptr)},
                {"counters", storage::counters_json(s.counters)}};
    add_storage_state(out, s.state == "capturing" ? storage_error : "");
    if (protocol::wire_format(s.spec.protocol).traits.swo) {
        // The SWO settings it was captured with, and its exception trace.
        const json swo = json::parse(s.spec.wire_options, nullptr, false);
        out["swo"] = swo.is_object() ? swo : json(nullptr);  // written by the daemon; never fatal
        json exceptions = json::array();
        for (const auto& e : s.exceptions) {
            exceptions.push_back({{"exception", e.number},
                                  {"name", exception_name(e.number)},
                                  {"entries", e.entries},
                                  {"cycles", e.cycles}});
        }
        out["exceptions"] = exceptions;
    }
    // Only where entry/exit events made one: the cct-* exports answer 422 without it.
    if (s.calling_context_nodes > 0) out["calling_context_nodes"] = s.calling_context_nodes;
    // Retention dropped its raw data (storage/retention.h): null while it has it.
    out["raw_pruned"] = s.raw_pruned ? json{{"at_ns", s.raw_pruned->at_ns},
                                            {"keep_raw_days", s.raw_pruned->keep_days},
                                            {"reason", storage::raw_pruned_reason(*s.raw_pruned)}}
                                     : json(nullptr);
    return out;
}

// ---- boards -----------------------------------------------------------------------------

using BoardChange = capture::CaptureService::BoardChange;

void fail_for(BoardChange change, const std::string& board) {
    if (change == BoardChange::kExists)
        fail(Failure::kConflict, "a board named '" + board + "' exists");
    if (change == BoardChange::kNotFound)
        fail(Failure::kNotFound, "no board named '" + board + "'");
    if (change == BoardChange::kFromFile) {
        fail(Failure::kConflict,
             "'" + board + "' comes from the configuration file: change it there (and reload)");
    }
}

// ---- firmware store ---------------------------------------------------------------------

// The id an uploaded image is stored under: its build-id, or its SHA-256 when it has none.
std::string firmware_id(const gmon::Symbolizer& elf, const std::string& sha256) {
    return elf.build_id().empty() ? sha256 : elf.build_id();
}

// Moves `from` to `to` with a rename; across file systems, by a copy beside `to` renamed into
// place, so `to` is never seen half written.
void place_file(const std::filesystem::path& from, const std::filesystem::path& to) {
    std::error_code ec;
    std::filesystem::rename(from, to, ec);
    if (!ec) return;
    static std::atomic<std::uint64_t> copies{0};  // a name no other copy in flight has
    const auto beside = to.parent_path() /
                        (".upload-" + std::to_string(::getpid()) + "-" + std::to_string(copies++));
    try {
        std::filesystem::copy_file(from, beside);
        std::filesystem::rename(beside, to);
    } catch (...) {
        std::filesystem::remove(beside, ec);
        throw;
    }
}

bool is_hex_id(const std::string& id) {
    return !id.empty() && id.size() <= 128 &&
           id.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// ---- import decoding --------------------------------------------------------------------

// An imported capture's wire from the query (protocol, addr_bytes and the itm keys, as a
// board's), checked by the same rules as a board's settings.
config::BoardConfig import_wire(const ImportParameters& query, const std::string& format) {
    json board = {{"name", "import"}, {"link", "file:///import"}, {"format", format}};
    if (query.count("protocol")) board["protocol"] = query.at("protocol");
    for (const char* key :
         {"addr_bytes", "tpiu_stream", "framed_port", "orbstat_port", "console_port"}) {
        if (query.count(key)) board[key] = parse_count<int>(query.at(key), key);
    }
    if (query.count("tpiu")) board["tpiu"] = query.at("tpiu") == "true" || query.at("tpiu") == "1";
    try {
        return config::board_from_json(board);
    } catch (const config::BoardFieldError& e) {
        fail(Failure::kBadRequest, e.key() + ": " + e.what());
    }
}

}  // namespace

// A stored session as the pipeline's source: its aggregate (whole, or the batches inside a
// window), its histogram shapes when it has its own, its target's text range, and its ELF
// while that still loads (else addresses only).
std::shared_ptr<gmon::ExportInput> LocalRack::session_input(const storage::SessionInfo& info,
                                                            const TimeWindow& window) {
    // A window is answered from the record batches: gone with the raw data.
    if (window.bounded() && info.raw_pruned)
        fail(Failure::kGone, "session " + std::to_string(info.id) +
                                 ": a time window (from/to) needs its records, but its " +
                                 storage::raw_pruned_reason(*info.raw_pruned));
    auto input = std::make_shared<gmon::ExportInput>();
    auto& source = input->source;
    if (!info.spec.elf_path.empty()) {
        try {
            source.elf = elves_.get(info.spec.elf_path);
        } catch (const std::exception&) {
            source.elf = nullptr;  // moved or deleted since: profile by address only
        }
    }
    source.aggregate = window.bounded() ? aggregate_between(info.id, window) : aggregate(info.id);
    source.announced_range = ingest::announced_range(info.target);
    source.histograms = info.spec.histograms;
    // A connection leased per page: a slow client holds none between pages.
    auto lease = [this] { return readers_.lease(); };
    input->raw = storage::raw_pages(lease, info.id);
    input->records = storage::record_pages(lease, info.id);
    input->summary = {{"session", info.id}, {"board", info.spec.board}};
    // The measured tree covers the whole session: a window gets none rather than a wrong one.
    if (!window.bounded()) {
        if (auto tree = readers_.lease()->calling_context(info.id); !tree.empty())
            input->calling_context =
                std::make_shared<const gmon::CallingContextTree>(std::move(tree));
    }
    return input;
}

std::vector<storage::SessionInfo> LocalRack::selected(const Selection& selection) {
    if (fleet_) return fleet_->select(selection);
    std::map<std::string, std::vector<std::string>> boards_by_tag;
    for (const auto& b : capture_.board_configs()) {
        for (const auto& tag : b.tags) boards_by_tag[tag].push_back(b.name);
    }
    return select_sessions(selection, readers_.lease()->sessions(), boards_by_tag);
}

std::shared_ptr<gmon::ExportInput> LocalRack::merged(
    const std::vector<storage::SessionInfo>& sessions, bool by_name,
    const std::function<std::shared_ptr<const gmon::Aggregate>(std::int64_t)>& aggregate_of) {
    return merged_input(
        sessions, aggregate_of, [this](const std::string& path) { return elves_.get(path); },
        by_name, firmware_dir() / "by-name");
}

std::shared_ptr<const LocalRack::MergedSelection> LocalRack::merged_selection(
    const Selection& selection) {
    const auto sessions = selected(selection);
    // What was merged, as far as it can change: finished sessions' merges are kept under it.
    std::string key = selection.by_name ? "by_name" : "by_build";
    bool finished = true;
    for (const auto& s : sessions) {
        finished = finished && s.state != "capturing";
        key += ";" + std::to_string(s.id) + ":" + std::to_string(s.counters.arcs) + ":" +
               std::to_string(s.counters.pc_samples) + ":" + s.spec.elf_path;
    }
    if (finished) {
        const std::lock_guard lock(selections_mutex_);
        for (auto it = selections_.begin(); it != selections_.end(); ++it) {
            if (it->first != key) continue;
            selections_.splice(selections_.begin(), selections_, it);
            return it->second;
        }
    }
    auto made = merge(sessions, selection.by_name);
    if (finished) {
        constexpr std::size_t kKept = 4;
        const std::lock_guard lock(selections_mutex_);
        selections_.emplace_front(std::move(key), made);
        if (selections_.size() > kKept) selections_.pop_back();
    }
    return made;
}

std::shared_ptr<const LocalRack::MergedSelection> LocalRack::merge(
    const std::vector<storage::SessionInfo>& sessions, bool by_name) {
    const auto stored = [this](std::int64_t id) {
        return fleet_ ? fleet_->sum({id}) : aggregate(id);
    };
    auto made = std::make_shared<MergedSelection>();
    if (fleet_ && !by_name) {
        // The whole selection summed by PostgreSQL (from its build sums), standing for the first
        // session. The boards' own sums are read for the spread when it is asked for, from the
        // board sums kept at push time (fleet_spread_boards): only the functions it shows.
        std::vector<std::int64_t> ids;
        for (const auto& s : sessions) ids.push_back(s.id);
        const auto total = fleet_->sum(ids);
        static const auto none = std::make_shared<const gmon::Aggregate>();
        const std::int64_t first = ids.front();
        auto input =
            merged(sessions, false, [&](std::int64_t id) { return id == first ? total : none; });
        for (const auto& [board, own] : sessions_by_board(sessions)) {
            gmon::BoardSamples b{board, {}, 0, 0, {}};
            for (const auto& s : own) b.sessions.push_back(s.id);
            made->boards.push_back(std::move(b));
        }
        if (input->source.elf)
            made->profile = std::make_shared<const gmon::Profile>(gmon::profile_of(input->source));
        made->input = std::move(input);
        made->fleet_boards = true;
        return made;
    }
    // Board by board, each session's aggregate loaded once: the boards' sums are the spread's,
    // and the fleet's is their sum.
    std::map<std::int64_t, std::shared_ptr<const gmon::Aggregate>> board_sum_at;  // first session
    for (const auto& [board, own] : sessions_by_board(sessions)) {
        const auto part = merged(own, by_name, stored);
        const auto& sum = part->source.aggregate;
        gmon::BoardSamples b{board, {}, sum->total_calls(), sum->total_samples(), {}};
        for (const auto& s : own) b.sessions.push_back(s.id);
        if (part->source.elf) b.function = gmon::samples_by_function(*sum, *part->source.elf);
        made->boards.push_back(std::move(b));
        board_sum_at[own.front().id] = sum;
    }
    std::shared_ptr<gmon::ExportInput> input;
    if (by_name) {
        input = merged(sessions, true, stored);  // builds are moved by name: per session
    } else {
        // Each board's sum stands for its first session; its other sessions are in it.
        static const auto nothing = std::make_shared<const gmon::Aggregate>();
        input = merged(sessions, false, [&](std::int64_t id) {
            const auto it = board_sum_at.find(id);
            return it == board_sum_at.end() ? nothing : it->second;
        });
    }
    input->calling_context = merged_calling_context(sessions, by_name);
    if (input->source.elf) {
        made->profile = std::make_shared<const gmon::Profile>(gmon::profile_of(input->source));
        // A board whose ELF is gone is counted with the fleet's (the same build).
        for (std::size_t i = 0; i < made->boards.size(); ++i) {
            auto& b = made->boards[i];
            if (b.function.empty() && b.samples > 0 && !by_name) {
                const auto& sum = board_sum_at.at(b.sessions.front());
                b.function = gmon::samples_by_function(*sum, *input->source.elf);
            }
        }
    }
    made->input = std::move(input);
    return made;
}

// The sessions' calling-context trees added by path. Paths are addresses, so only sessions of
// one build add up: a by-name merge of several builds gets none.
std::shared_ptr<const gmon::CallingContextTree> LocalRack::merged_calling_context(
    const std::vector<storage::SessionInfo>& sessions, bool by_name) {
    // The fleet store keeps no calling-context trees, and its ids are not this rack's.
    if (fleet_) return nullptr;
    std::set<std::string> builds;
    for (const auto& s : sessions) builds.insert(s.spec.elf_build_id + "|" + s.target.build_id);
    if (by_name && builds.size() > 1) return nullptr;
    auto merged = std::make_shared<gmon::CallingContextTree>();
    const auto store = readers_.lease();
    for (const auto& s : sessions) merged->merge(store->calling_context(s.id));
    if (merged->empty()) return nullptr;
    return merged;
}

const gmon::Profile& LocalRack::profile_of(const MergedSelection& merged) {
    if (!merged.profile) {
        fail(Failure::kNoElf,
             "no session of the selection has a usable ELF, so functions cannot be named");
    }
    return *merged.profile;
}

// The whole session's aggregate: from memory when cached, else loaded once and offered.
std::shared_ptr<const gmon::Aggregate> LocalRack::aggregate(std::int64_t id) {
    auto& cache = capture_.aggregates();
    if (auto hit = cache.find(id)) return hit;
    auto loaded = readers_.lease()->versioned_aggregate(id);
    if (!loaded) return std::make_shared<const gmon::Aggregate>();
    return cache.offer(id, loaded->version, std::move(loaded->aggregate));
}

std::shared_ptr<const gmon::Aggregate> LocalRack::aggregate_between(std::int64_t id,
                                                                    const TimeWindow& window) {
    return std::make_shared<const gmon::Aggregate>(readers_.lease()->aggregate_between(
        id, window.from_ns.value_or(0),
        window.to_ns.value_or(std::numeric_limits<std::int64_t>::max())));
}

namespace {

gmon::JsonReportOptions json_options_of(const ProfileOptions& options) {
    gmon::JsonReportOptions out;
    out.top = options.top;
    out.min_percent = options.min_percent;
    out.graph_top = options.graph_top;
    out.graph_function = options.graph_function;
    return out;
}

void require_elf(const gmon::ExportInput& input, std::int64_t id) {
    if (!input.source.elf) {
        fail(Failure::kNoElf,
             "session " + std::to_string(id) + " has no usable ELF, so functions cannot be named");
    }
}

}  // namespace

// ---- ProfileCache -----------------------------------------------------------------------

bool ProfileCache::Entry::serves(std::int64_t id, const gmon::ProfileSource& source) const {
    // Pointers compared only while alive: a freed aggregate's address may be reused.
    const auto a = aggregate.lock();
    const auto e = elf.lock();
    return session == id && a && a == source.aggregate && e && e == source.elf &&
           announced_range == source.announced_range && a->total_calls() == total_calls &&
           a->total_samples() == total_samples;
}

ProfileCache::Computed ProfileCache::compute(const gmon::ProfileSource& source) {
    Computed c{gmon::profile_of(source), {}};
    if (source.elf && source.aggregate) c.fit = gmon::check_elf_fit(*source.aggregate, *source.elf);
    return c;
}

std::shared_ptr<const ProfileCache::Computed> ProfileCache::get(std::int64_t session,
                                                                const gmon::ProfileSource& source) {
    {
        std::lock_guard lock(mutex_);
        for (auto it = entries_.begin(); it != entries_.end(); ++it) {
            if (!it->serves(session, source)) continue;
            std::rotate(entries_.begin(), it, it + 1);
            return entries_.front().profile;
        }
    }
    // Computed outside the lock: two requests may both compute it, none waits on the other.
    // The source's aggregate is held here, so no commit changes it in place meanwhile.
    const std::uint64_t computed_calls = source.aggregate ? source.aggregate->total_calls() : 0;
    const std::uint64_t computed_samples = source.aggregate ? source.aggregate->total_samples() : 0;
    auto profile = std::make_shared<const Computed>(compute(source));
    std::lock_guard lock(mutex_);
    // The session's older profile, and any whose aggregate is gone (evicted or replaced): they
    // can never be served again, and a large firmware's profile is tens of megabytes.
    std::erase_if(entries_, [&](const Entry& e) {
        return e.session == session || e.aggregate.expired() || e.elf.expired();
    });
    entries_.insert(entries_.begin(),
                    Entry{session, source.aggregate, source.elf, source.announced_range, profile,
                          computed_calls, computed_samples});
    if (entries_.size() > capacity_) entries_.pop_back();
    return profile;
}

// ---- SymbolizerCache --------------------------------------------------------------------

std::shared_ptr<const gmon::Symbolizer> SymbolizerCache::get(const std::string& path) {
    std::error_code ec;
    const auto modified = std::filesystem::last_write_time(path, ec);
    std::lock_guard lock(mutex_);
    const auto hit = std::find_if(entries_.begin(), entries_.end(),
                                  [&](const Entry& e) { return e.path == path; });
    if (hit != entries_.end()) {
        if (!ec && hit->modified == modified) {
            std::rotate(entries_.begin(), hit, hit + 1);
            return entries_.front().elf;
        }
        entries_.erase(hit);  // rewritten (or gone) since it was loaded
    }
    auto elf = gmon::Symbolizer::load(path);
    entries_.insert(entries_.begin(), Entry{path, modified, elf});
    if (entries_.size() > capacity_) entries_.resize(capacity_);
    return elf;
}

// ---- LocalRack --------------------------------------------------------------------------

LocalRack::LocalRack(capture::CaptureService& capture, std::filesystem::path storage_path,
                     std::size_t readers)
    : capture_(capture), storage_path_(std::move(storage_path)), readers_(storage_path_, readers) {}

std::filesystem::path LocalRack::firmware_dir() const {
    return storage_path_.parent_path() / "firmware";
}

storage::SessionInfo LocalRack::stored_session(std::int64_t id) {
    auto info = readers_.lease()->session(id);
    if (info) return std::move(*info);
    if (capture_.live_snapshot(id)) {
        // Started while storage fails: capturing, its row written once commits succeed again.
        if (const std::string error = storage_error(); !error.empty())
            fail(Failure::kNotReady, "session " + std::to_string(id) +
                                         " is capturing, but storage is failing (" + error +
                                         "): its row is written once commits succeed again");
        // Just started: its id is reserved and already on the board (and in the events), its
        // row comes with the writer's next commit. Wait for it rather than deny it exists.
        for (int i = 0; i < 300 && capture_.live_snapshot(id); ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
            if (auto later = readers_.lease()->session(id)) return std::move(*later);
        }
    }
    fail(Failure::kNotFound, "no session " + std::to_string(id));
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
        fail(Failure::kNotReady, "storage is not available");
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
    fail(Failure::kNotFound, "no board named '" + name + "'");
}

// A board's settings from an API body; `name` (when set) is the path's and wins. "firmware":
// an uploaded image's id stands for its stored ELF (no paths over HTTP).
config::BoardConfig LocalRack::board_from_body(json body, const std::string& name) {
    try {
        if (!name.empty() && body.is_object()) {
            if (body.contains("name") && body["name"] != name)
                fail(Failure::kInvalid, "name: the path names the board");
            body["name"] = name;
        }
        if (body.is_object() && body.contains("firmware")) {
            const std::string id =
                body["firmware"].is_string() ? body["firmware"].get<std::string>() : "";
            const auto path = firmware_dir() / (id + ".elf");
            if (!is_hex_id(id) || !std::filesystem::exists(path))
                fail(Failure::kInvalid, "firmware: no uploaded firmware with that id");
            body.erase("firmware");
            body["elf"] = path.string();
        }
        config::BoardConfig board = config::board_from_json(body);
        check_api_board(board);
        return board;
    } catch (const json::exception&) {
        fail(Failure::kBadRequest, "the body is not JSON");
    } catch (const config::BoardFieldError& e) {
        fail(Failure::kInvalid, e.key() + ": " + e.what());
    }
}

// What a board created over HTTP may open: a link the configuration allows and firmware from
// the store, never a path of the caller's choosing (the daemon would read it and serve it).
void LocalRack::check_api_board(const config::BoardConfig& board) const {
    try {
        config::LinkPolicy{capture_.config().api_links}.check(board.link);
    } catch (const std::invalid_argument& e) {
        fail(Failure::kForbidden, std::string("link: ") + e.what());
    }
    if (board.elf.empty()) return;
    std::error_code ec;
    const auto store = std::filesystem::weakly_canonical(firmware_dir(), ec);
    const auto elf = std::filesystem::weakly_canonical(board.elf, ec);
    if (ec || elf.parent_path() != store) {
        fail(Failure::kForbidden,
             "elf: over HTTP, firmware comes from the store: upload it (PUT /api/v1/firmware) "
             "and name its id as \"firmware\"");
    }
}

json LocalRack::add_board(const json& body) {
    const config::BoardConfig config = board_from_body(body, "");
    fail_for(capture_.add_board(config), config.name);
    return board(config.name);
}

json LocalRack::update_board(const std::string& name, const json& body) {
    const config::BoardConfig config = board_from_body(body, name);
    fail_for(capture_.update_board(config), config.name);
    return board(config.name);
}

void LocalRack::remove_board(const std::string& name) {
    fail_for(capture_.remove_board(name), name);
}

json LocalRack::start_session(const std::string& board_name) {
    board(board_name);  // 404 for a board that is not there
    const std::int64_t id = capture_.start_session(board_name);
    if (!id) fail(Failure::kConflict, "the session could not start");
    return session_json(stored_session(id), storage_error());
}

json LocalRack::stop_session(std::int64_t id) {
    const auto info = stored_session(id);
    if (info.state != "capturing" || !capture_.stop_stored_session(id))
        fail(Failure::kConflict, "session " + std::to_string(id) + " is not capturing");
    return session_json(stored_session(id), storage_error());
}

void LocalRack::delete_session(std::int64_t id) {
    const auto info = stored_session(id);
    if (info.state == "capturing" || !capture_.delete_stored_session(id))
        fail(Failure::kConflict, "session " + std::to_string(id) + " is capturing: stop it first");
}

json LocalRack::sessions(const SessionFilter& filter) {
    std::set<std::string> tagged;  // boards carrying the tag, as configured now
    if (filter.tag) {
        for (const auto& b : capture_.board_configs()) {
            if (std::find(b.tags.begin(), b.tags.end(), *filter.tag) != b.tags.end())
                tagged.insert(b.name);
        }
    }
    json list = json::array();
    const std::string failing = storage_error();
    for (const auto& s : readers_.lease()->sessions()) {
        if (filter.board && s.spec.board != *filter.board) continue;
        if (filter.tag && !tagged.count(s.spec.board)) continue;
        if (filter.state && s.state != *filter.state) continue;
        if (filter.started_from_ns && s.spec.started_ns < filter.started_from_ns) continue;
        if (filter.started_to_ns && s.spec.started_ns > filter.started_to_ns) continue;
        list.push_back(session_json(s, failing));
    }
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

std::string LocalRack::profile(std::int64_t id, const TimeWindow& window,
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
    const gmon::ElfFit& fit = computed->fit;
    const nlohmann::json sync_check =
        options.sync_reference ? sync_check_of(computed->profile, *options.sync_reference)
                               : nlohmann::json();
    gmon::JsonReportOptions json_options = json_options_of(options);
    // DWT samples taken while the core slept: a count beside the functions, never one of them
    // (the record batches do not carry them, so a window has none).
    json_options.more_fields = [&](gmon::JsonStream& out) {
        if (window.bounded()) {
            out.field("sleeping", nullptr);
        } else {
            out.field("sleeping", info.counters.sleep_samples);
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
                .field("warning", fit.evidence(input->source.elf->path().filename().string()) +
                                      ": wrong ELF for this capture?");
            out.end_object();
        }
    };
    std::string text;
    // Names that are not UTF-8 become U+FFFD: a view never fails to serialize.
    gmon::JsonStream out(text, -1, 0, gmon::JsonStream::ErrorHandler::replace);
    gmon::write_profile_json(out, computed->profile, json_options);
    return text;
}

// The synchronisation alarm against another session (the dithered run): its whole profile.
nlohmann::json LocalRack::sync_check_of(const gmon::Profile& fixed, std::int64_t reference) {
    const auto info = stored_session(reference);
    const auto input = session_input(info, {});
    require_elf(*input, reference);
    const auto computed = profiles_.get(reference, input->source);
    try {
        nlohmann::json check = gmon::sync_check_json(gmon::check_sync(fixed, computed->profile));
        check["reference"] = reference;
        return check;
    } catch (const std::invalid_argument& e) {
        fail(Failure::kInvalid, std::string("cannot check synchronisation: ") + e.what());
    }
}

std::string LocalRack::selection_profile(const Selection& selection,
                                         const ProfileOptions& options) {
    const auto merged = merged_selection(selection);
    const gmon::Profile& computed = profile_of(*merged);
    gmon::JsonReportOptions json_options = json_options_of(options);
    std::size_t omitted = 0;
    const auto functions = gmon::spread_functions(
        computed, json_options,
        options.spread_top.value_or(gmon::default_spread_limit(merged->boards.size())), &omitted);
    std::vector<gmon::BoardSamples> read;  // a fleet's, for these functions
    if (merged->fleet_boards) read = fleet_spread_boards(*merged, functions);
    const auto& boards = merged->fleet_boards ? read : merged->boards;
    json_options.more_fields = [&](gmon::JsonStream& out) {
        out.field("selection", merged->input->summary);
        out.key("spread");
        gmon::write_board_spread(out, functions, omitted, boards);
    };
    std::string text;
    gmon::JsonStream out(text, -1, 0, gmon::JsonStream::ErrorHandler::replace);
    // About what the spread takes (a row per board and function), so the answer is not copied
    // at each doubling.
    out.reserve((functions.size() + 1) * boards.size() * 160);
    gmon::write_profile_json(out, computed, json_options);
    return text;
}

// The fleet's boards for a spread over `functions`: each board's calls, samples and samples in
// those functions, from the fleet store's board sums (every function of that name: a static
// function's name may be on several).
std::vector<gmon::BoardSamples> LocalRack::fleet_spread_boards(
    const MergedSelection& merged, const std::vector<std::string>& functions) {
    const std::lock_guard lock(merged.spread_mutex);
    if (!merged.spread_functions.empty() && merged.spread_functions == functions)
        return merged.spread_boards;
    std::vector<gmon::BoardSamples> boards = merged.boards;
    const auto& elf = merged.input->source.elf;
    if (!elf) return boards;
    const gmon::FunctionIndex index(*elf);
    const std::set<std::string> wanted(functions.begin(), functions.end());
    std::map<std::uint64_t, const std::string*> name_at;
    std::vector<std::uint64_t> addresses;
    for (const auto& f : index.symbols()) {
        if (const auto it = wanted.find(f.name); it != wanted.end()) {
            name_at[f.addr] = &*it;
            addresses.push_back(f.addr);
        }
    }
    std::vector<std::int64_t> ids;
    for (const auto& b : boards) ids.insert(ids.end(), b.sessions.begin(), b.sessions.end());
    std::map<std::string, gmon::BoardSamples*> by_name;
    for (auto& b : boards) by_name[b.board] = &b;
    for (const auto& sum : fleet_->board_sums(ids, index, addresses)) {
        const auto it = by_name.find(sum.board);
        if (it == by_name.end()) continue;  // none: the sessions are the boards'
        auto& b = *it->second;
        b.calls = sum.calls;
        b.samples = sum.samples;
        for (const auto& [address, count] : sum.function_samples)
            b.function[*name_at.at(address)] += count;
    }
    merged.spread_functions = functions;
    merged.spread_boards = boards;
    return boards;
}

namespace {

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
        if (!f.paged) names.push_back(f.name);
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
gmon::ChunkStream open_format(const gmon::ExportFormat& exporter,
                              const std::shared_ptr<const gmon::ExportInput>& input) {
    try {
        return exporter.open(input);
    } catch (const gmon::ExportNeedsCallingContext& e) {
        fail(Failure::kInvalid, e.what());
    } catch (const std::invalid_argument& e) {
        // What the input lacks: the ELF to name functions (ExportNeedsElf), or records and
        // raw bytes (an imported gmon.out has neither).
        fail(input->source.elf ? Failure::kInvalid : Failure::kNoElf, e.what());
    }
}

}  // namespace

DiffResult LocalRack::diff(const Selection& a, const Selection& b, const DiffRequest& request) {
    gmon::DiffOptions options;
    options.alpha = request.alpha;
    if (!(options.alpha > 0 && options.alpha < 1))
        fail(Failure::kBadRequest, "alpha must be between 0 and 1");
    for (const auto& rule : request.fail_on) {
        try {
            options.gates.push_back(gmon::parse_gate_rule(rule));
        } catch (const std::invalid_argument& e) {
            fail(Failure::kBadRequest, e.what());
        }
    }
    const auto merged_a = merged_selection(a), merged_b = merged_selection(b);
    const auto& summary_a = merged_a->input->summary;
    const auto& summary_b = merged_b->input->summary;
    try {
        const gmon::ProfileDiff d =
            gmon::diff_profiles(profile_of(*merged_a), profile_of(*merged_b), options);
        return {gmon::diff_json(d, summary_a, summary_b),
                gmon::render_diff_text(d, selection_label(summary_a), selection_label(summary_b)),
                d.failed()};
    } catch (const std::invalid_argument& e) {
        fail(Failure::kInvalid, std::string("cannot compare: ") + e.what());
    }
}

Export LocalRack::open_selection_export(const Selection& selection, const std::string& format) {
    const auto* exporter = gmon::find_export_format(format);
    if (!exporter || exporter->paged)
        fail(Failure::kUnknownFormat, "a selection exports as " + selection_format_names() +
                                          ", not '" + format +
                                          "' (raw bytes and records belong to one session)");
    const auto input = merged_selection(selection)->input;
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
        fail(Failure::kUnknownFormat,
             "unknown format '" + format + "' (" + gmon::export_format_names() + ")");
    const auto info = stored_session(id);
    // The paged formats (raw, ndjson) are the raw data itself.
    if (exporter->paged && info.raw_pruned)
        fail(Failure::kGone, "session " + std::to_string(id) + ": the " + format +
                                 " export needs its raw data, but its " +
                                 storage::raw_pruned_reason(*info.raw_pruned));
    const auto input = session_input(info, window);
    return {std::string(exporter->content_type),
            info.spec.board + "-" + std::to_string(id) + std::string(exporter->file_suffix),
            !exporter->paged, open_format(*exporter, input)};
}

Stored LocalRack::put_firmware(const std::filesystem::path& upload) {
    std::shared_ptr<const gmon::Symbolizer> elf;
    std::size_t functions = 0;
    try {
        elf = gmon::Symbolizer::load(upload);
        functions = gmon::gprof_symbol_table(*elf).size();  // throws when it names none
    } catch (const std::exception&) {
        fail(Failure::kNotAnElf, "the body is not a usable ELF file (with symbols)");
    }
    const std::string sha256 = capture::file_sha256(upload);
    const std::string id = firmware_id(*elf, sha256);
    const auto dir = firmware_dir();
    std::filesystem::create_directories(dir);
    const auto stored = dir / (id + ".elf");
    const bool existed = std::filesystem::exists(stored);
    if (!existed) place_file(upload, stored);
    return {json{{"id", id},
                 {"build_id", elf->build_id()},
                 {"sha256", sha256},
                 {"functions", functions},
                 {"stored", !existed}},
            !existed};
}

json LocalRack::attach_firmware(std::int64_t session_id, const std::string& id) {
    stored_session(session_id);
    if (!is_hex_id(id)) fail(Failure::kBadFirmwareId, "\"id\" must be a firmware id");
    const auto path = firmware_dir() / (id + ".elf");
    if (!std::filesystem::exists(path))
        fail(Failure::kNotFound, "no firmware " + id + "; PUT it first");
    const auto elf = elves_.get(path.string());
    capture_.set_session_firmware(session_id, path.string(), elf->build_id(),
                                  capture::file_sha256(path));
    return session_json(stored_session(session_id), storage_error());
}

json LocalRack::import_session(const std::filesystem::path& file, const ImportParameters& query) {
    // Its records would be counted lost, not stored: refused, for the client to try again.
    if (const std::string error = storage_error(); !error.empty())
        fail(Failure::kNotReady, "storage is failing (" + error + "): import again later");
    const std::string format = query.count("format") ? query.at("format") : "bin";
    const ingest::ImportFormat* kind = ingest::find_import_format(format);
    if (!kind || !kind->uploadable)
        fail(Failure::kBadRequest, "format must be " + ingest::import_format_names(true));
    const bool histogram_file = kind->kind != ingest::InputKind::kCapture;
    const config::BoardConfig wire_settings = import_wire(query, histogram_file ? "bin" : format);
    std::shared_ptr<const gmon::Symbolizer> elf;
    storage::NewSession spec;
    spec.board = query.count("board") ? query.at("board") : "import";
    try {
        config::validate_board_name(spec.board);  // it reaches file names and log lines
    } catch (const config::BoardFieldError& e) {
        fail(Failure::kBadRequest, std::string("board: ") + e.what());
    }
    spec.link = "import";
    spec.protocol = wire_settings.protocol;
    spec.format = format;
    spec.addr_bytes = wire_settings.addr_bytes;
    spec.started_ns = capture::unix_now_ns();
    if (query.count("firmware")) {
        const std::string id = query.at("firmware");
        const auto path = firmware_dir() / (id + ".elf");
        if (!is_hex_id(id) || !std::filesystem::exists(path))
            fail(Failure::kNotFound, "no firmware " + id);
        elf = elves_.get(path.string());
        spec.elf_path = path.string();
        spec.elf_build_id = elf->build_id();
        spec.elf_sha256 = capture::file_sha256(path);
    }
    ingest::ImportSpec import;
    import.kind = kind->kind;
    import.wire = ingest::wire_spec_of(wire_settings);
    import.wire.code_range = ingest::decode_range_of(elf.get());
    import.layout = elf ? elf->layout() : gmon::TargetLayout{};
    if (import.kind == ingest::InputKind::kGmon) return import_gmon(file, import, spec);
    if (import.kind == ingest::InputKind::kTiva) return import_tiva(file, spec);
    return import_capture(file, import, spec);
}

namespace {

// An import's records and raw bytes handed to storage as they come, in pieces of about 1 MiB
// each (a chunk's raw bytes and records need not match: raw chunks are read back in order and
// records are counted wherever they are), so an import of any size holds about two pieces.
class ImportPieces : public protocol::RecordSink {
  public:
    explicit ImportPieces(capture::SessionImport& stored) : stored_(stored) {
        records_.reserve(kRecordsPerPiece);
    }
    void on_records(std::span<const protocol::Record> batch) override {
        for (const auto& r : batch) {
            records_.push_back(r);
            if (records_.size() == kRecordsPerPiece) append({});
        }
    }
    void on_raw(std::span<const std::uint8_t> bytes) {
        so_far_.bytes_in += bytes.size();
        append({bytes.begin(), bytes.end()});
    }
    // The last piece; a session with no records at all still gets one (empty) piece.
    void finish() {
        if (!records_.empty() || !appended_) append({});
    }

  private:
    static constexpr std::size_t kRecordsPerPiece = 64 * 1024;  // 1 MiB of records

    void append(std::vector<std::uint8_t> raw) {
        std::vector<protocol::Record> records;
        records.reserve(kRecordsPerPiece);
        records.swap(records_);
        stored_.append(std::move(raw), std::move(records), so_far_);
        appended_ = true;
    }

    capture::SessionImport& stored_;
    std::vector<protocol::Record> records_;
    storage::SessionCounters so_far_;  // what the session shows while the import goes on
    bool appended_ = false;
};

}  // namespace

// A gmon.out is mapped, not read whole: its histograms' shapes go with the session's row,
// then its records are stored in pieces as its bins are read (no raw bytes).
json LocalRack::import_gmon(const std::filesystem::path& file, const ingest::ImportSpec& import,
                            storage::NewSession spec) {
    const auto bad_gmon = [&](const gmon::GmonFormatError& e) {
        std::string why = e.what();  // without the upload's path, which is the daemon's business
        if (why.starts_with(file.string() + ": ")) why.erase(0, file.string().size() + 2);
        fail(Failure::kBadGmon, why);
    };
    std::optional<ingest::GmonFile> gmon_file;
    try {
        gmon_file.emplace(file, import.layout);
    } catch (const gmon::GmonFormatError& e) {
        bad_gmon(e);
    }
    spec.histograms = gmon_file->histograms();  // its own ranges and rate, exactly
    const auto stored = capture_.begin_import(spec);
    ImportPieces pieces(*stored);
    ingest::Imported imported;
    try {
        imported = gmon_file->emit(pieces);
    } catch (const gmon::GmonFormatError& e) {
        bad_gmon(e);
    }
    pieces.finish();
    storage::SessionCounters counters;
    storage::set_decoder_counters(counters, imported.stats);
    return session_json(stored_session(stored->complete(counters)), storage_error());
}

// A Tiva binned PC report becomes a session as a gmon.out does: its histogram's shape (512
// bins of 64 bytes, 100 Hz) with the session's row, its bins as PC-sample records.
json LocalRack::import_tiva(const std::filesystem::path& file, storage::NewSession spec) {
    std::optional<gmon::TivaReport> report;
    try {
        report = ingest::read_tiva_file(file);
    } catch (const gmon::TivaFormatError& e) {
        std::string why = e.what();  // without the upload's path, which is the daemon's business
        if (why.starts_with(file.string() + ": ")) why.erase(0, file.string().size() + 2);
        fail(Failure::kBadGmon, why);
    }
    spec.histograms = {report->shape};
    const auto stored = capture_.begin_import(spec);
    ImportPieces pieces(*stored);
    std::error_code ec;
    const auto bytes_in = std::filesystem::file_size(file, ec);
    const ingest::Imported imported = ingest::emit_tiva(*report, ec ? 0 : bytes_in, pieces);
    pieces.finish();
    storage::SessionCounters counters;
    storage::set_decoder_counters(counters, imported.stats);
    return session_json(stored_session(stored->complete(counters)), storage_error());
}

json LocalRack::import_capture(const std::filesystem::path& file, const ingest::ImportSpec& import,
                               storage::NewSession spec) {
    spec.wire_options = ingest::wire_options_json(import.wire);
    const auto stored = capture_.begin_import(spec);
    ImportPieces pieces(*stored);
    const ingest::Imported imported =
        ingest::import_file(file, import, pieces, {},
                            [&](std::span<const std::uint8_t> bytes) { pieces.on_raw(bytes); });
    if (imported.stats.records() == 0)
        fail(Failure::kNoRecords, "no records found: check format, protocol and addr_bytes");
    pieces.finish();
    storage::SessionCounters counters;
    storage::set_decoder_counters(counters, imported.stats);
    return session_json(stored_session(stored->complete(counters, imported.calling_context)),
                        storage_error());
}

std::optional<LiveView> LocalRack::live(std::int64_t id) {
    return live_views_.view_of(id, capture_.live_snapshot(id));
}

}  // namespace rackprof::daemon::service
