#include "daemon/service/local_rack.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <set>

#include "daemon/capture/board.h"
#include "daemon/capture/capture_session.h"
#include "daemon/ingest/capture_import.h"
#include "daemon/ingest/wire_settings.h"
#include "gmon/gmon_reader.h"
#include "gmon/profile_pipeline.h"
#include "gmon/report.h"
#include "protocol/wire_format.h"
#include "storage/counters_json.h"
#include "storage/session_pages.h"

namespace rackprof::service {

namespace {

using nlohmann::json;

[[noreturn]] void fail(Failure failure, const std::string& message) {
    throw ServiceError(failure, message);
}

// ---- JSON views -------------------------------------------------------------------------

json board_json(const BoardStatus& b) {
    return {{"name", b.name},
            {"link", b.link},
            {"state", to_string(b.state)},
            {"last_error", b.last_error},
            {"reconnects", b.reconnects},
            {"session", b.session_id ? json(b.session_id) : json(nullptr)},
            {"counters", b.session ? storage::counters_json(b.counters) : json(nullptr)}};
}

// ARMv7-M's exception numbers (B1.5.2); 16 and up are external interrupts.
std::string exception_name(std::uint16_t number) {
    static const char* const kNames[16] = {"Thread",       "Reset",      "NMI",        "HardFault",
                                           "MemManage",    "BusFault",   "UsageFault", "Reserved7",
                                           "Reserved8",    "Reserved9",  "Reserved10", "SVCall",
                                           "DebugMonitor", "Reserved13", "PendSV",     "SysTick"};
    return number < 16 ? kNames[number] : "IRQ" + std::to_string(number - 16);
}

json session_json(const storage::SessionInfo& s) {
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
                {"state", s.state},
                {"started_ns", s.spec.started_ns},
                {"ended_ns", s.ended_ns ? json(s.ended_ns) : json(nullptr)},
                {"counters", storage::counters_json(s.counters)}};
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
    return out;
}

// ---- boards -----------------------------------------------------------------------------

using BoardChange = daemon::CaptureService::BoardChange;

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

bool is_hex_id(const std::string& id) {
    return !id.empty() && id.size() <= 128 &&
           id.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// ---- import decoding --------------------------------------------------------------------

// An imported capture's wire from the query (protocol, addr_bytes and the itm keys, as a
// board's), checked by the same rules as a board's settings.
daemon::BoardConfig import_wire(const ImportParameters& query, const std::string& format) {
    json board = {{"name", "import"}, {"link", "file:///import"}, {"format", format}};
    if (query.count("protocol")) board["protocol"] = query.at("protocol");
    for (const char* key :
         {"addr_bytes", "tpiu_stream", "framed_port", "orbstat_port", "console_port"}) {
        if (query.count(key)) board[key] = parse_count<int>(query.at(key), key);
    }
    if (query.count("tpiu")) board["tpiu"] = query.at("tpiu") == "true" || query.at("tpiu") == "1";
    try {
        return daemon::board_from_json(board);
    } catch (const daemon::BoardFieldError& e) {
        fail(Failure::kBadRequest, e.key() + ": " + e.what());
    }
}

}  // namespace

// A stored session as the pipeline's source: its aggregate (whole, or the batches inside a
// window), its histogram shapes when it has its own, its target's text range, and its ELF
// while that still loads (else addresses only).
std::shared_ptr<gmon::ExportInput> LocalRack::session_input(const storage::SessionInfo& info,
                                                            const TimeWindow& window) {
    auto input = std::make_shared<gmon::ExportInput>();
    auto& source = input->source;
    if (!info.spec.elf_path.empty()) {
        try {
            source.elf = elves_.get(info.spec.elf_path);
        } catch (const std::exception&) {
            source.elf = nullptr;  // moved or deleted since: profile by address only
        }
    }
    auto store = readers_.lease();
    source.aggregate = std::make_shared<const gmon::Aggregate>(
        window.bounded() ? store->aggregate_between(
                               info.id, window.from_ns.value_or(0),
                               window.to_ns.value_or(std::numeric_limits<std::int64_t>::max()))
                         : store->aggregate(info.id));
    source.announced_range = ingest::announced_range(info.target);
    source.histograms = info.spec.histograms;
    // A connection leased per page: a slow client holds none between pages.
    auto lease = [this] { return readers_.lease(); };
    input->raw = storage::raw_pages(lease, info.id);
    input->records = storage::record_pages(lease, info.id);
    input->summary = {{"session", info.id}, {"board", info.spec.board}};
    return input;
}

namespace {

void require_elf(const gmon::ExportInput& input, std::int64_t id) {
    if (!input.source.elf) {
        fail(Failure::kNoElf,
             "session " + std::to_string(id) + " has no usable ELF, so functions cannot be named");
    }
}

}  // namespace

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

LocalRack::LocalRack(daemon::CaptureService& capture, std::filesystem::path storage_path,
                     std::size_t readers)
    : capture_(capture), storage_path_(std::move(storage_path)), readers_(storage_path_, readers) {}

std::filesystem::path LocalRack::firmware_dir() const {
    return storage_path_.parent_path() / "firmware";
}

storage::SessionInfo LocalRack::stored_session(std::int64_t id) {
    auto info = readers_.lease()->session(id);
    if (!info) fail(Failure::kNotFound, "no session " + std::to_string(id));
    return std::move(*info);
}

json LocalRack::readiness() {
    try {
        // A fresh connection, not a pooled one: the probe is whether storage opens now.
        storage::SessionStore probe(storage_path_, storage::Database::Mode::kReadOnly);
    } catch (const std::exception&) {
        fail(Failure::kNotReady, "storage is not available");
    }
    return {{"status", "ready"}, {"boards", capture_.boards().size()}};
}

json LocalRack::boards() {
    json list = json::array();
    for (const auto& b : capture_.boards()) list.push_back(board_json(b));
    return list;
}

json LocalRack::board(const std::string& name) {
    for (const auto& b : capture_.boards()) {
        if (b.name == name) return board_json(b);
    }
    fail(Failure::kNotFound, "no board named '" + name + "'");
}

// A board's settings from an API body; `name` (when set) is the path's and wins. "firmware":
// an uploaded image's id stands for its stored ELF (no paths over HTTP).
daemon::BoardConfig LocalRack::board_from_body(json body, const std::string& name) {
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
        return daemon::board_from_json(body);
    } catch (const json::exception&) {
        fail(Failure::kBadRequest, "the body is not JSON");
    } catch (const daemon::BoardFieldError& e) {
        fail(Failure::kInvalid, e.key() + ": " + e.what());
    }
}

json LocalRack::add_board(const json& body) {
    const daemon::BoardConfig config = board_from_body(body, "");
    fail_for(capture_.add_board(config), config.name);
    return board(config.name);
}

json LocalRack::update_board(const std::string& name, const json& body) {
    const daemon::BoardConfig config = board_from_body(body, name);
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
    return session_json(stored_session(id));
}

json LocalRack::stop_session(std::int64_t id) {
    const auto info = stored_session(id);
    if (info.state != "capturing" || !capture_.stop_stored_session(id))
        fail(Failure::kConflict, "session " + std::to_string(id) + " is not capturing");
    return session_json(stored_session(id));
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
    for (const auto& s : readers_.lease()->sessions()) {
        if (filter.board && s.spec.board != *filter.board) continue;
        if (filter.tag && !tagged.count(s.spec.board)) continue;
        if (filter.state && s.state != *filter.state) continue;
        if (filter.started_from_ns && s.spec.started_ns < filter.started_from_ns) continue;
        if (filter.started_to_ns && s.spec.started_ns > filter.started_to_ns) continue;
        list.push_back(session_json(s));
    }
    return list;
}

json LocalRack::session(std::int64_t id) {
    return session_json(stored_session(id));
}

std::string LocalRack::console(std::int64_t id, int tail) {
    stored_session(id);
    std::string text;
    for (const auto& line : readers_.lease()->console(id, tail)) text += line.text;
    return text;
}

json LocalRack::profile(std::int64_t id, const TimeWindow& window, const ProfileOptions& options) {
    const auto info = stored_session(id);
    const auto input = session_input(info, window);
    require_elf(*input, id);
    json profile =
        gmon::profile_json(gmon::profile_of(input->source), {options.top, options.min_percent});
    // DWT samples taken while the core slept: a count beside the functions, never one of them
    // (the record batches do not carry them, so a window has none).
    profile["sleeping"] = window.bounded() ? json(nullptr) : json(info.counters.sleep_samples);
    return profile;
}

Export LocalRack::open_export(std::int64_t id, const std::string& format,
                              const TimeWindow& window) {
    const auto* exporter = gmon::find_export_format(format);
    if (!exporter)
        fail(Failure::kUnknownFormat,
             "unknown format '" + format + "' (" + gmon::export_format_names() + ")");
    const auto info = stored_session(id);
    const auto input = session_input(info, window);
    return {std::string(exporter->content_type),
            info.spec.board + "-" + std::to_string(id) + std::string(exporter->file_suffix),
            !exporter->paged, exporter->open(input)};
}

Stored LocalRack::put_firmware(std::string_view bytes) {
    const auto dir = firmware_dir();
    std::filesystem::create_directories(dir);
    const auto upload = dir / (".upload-" + std::to_string(daemon::new_session_handle()));
    {
        std::ofstream f(upload, std::ios::binary);
        f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    struct Cleanup {
        std::filesystem::path path;
        ~Cleanup() {
            std::error_code ignored;
            std::filesystem::remove(path, ignored);
        }
    } cleanup{upload};
    std::shared_ptr<const gmon::Symbolizer> elf;
    std::size_t functions = 0;
    try {
        elf = gmon::Symbolizer::load(upload);
        functions = gmon::gprof_symbol_table(*elf).size();  // throws when it names none
    } catch (const std::exception&) {
        fail(Failure::kNotAnElf, "the body is not a usable ELF file (with symbols)");
    }
    const std::string sha256 = daemon::file_sha256(upload);
    const std::string id = firmware_id(*elf, sha256);
    const auto stored = dir / (id + ".elf");
    const bool existed = std::filesystem::exists(stored);
    if (!existed) std::filesystem::rename(upload, stored);
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
                                  daemon::file_sha256(path));
    return session_json(stored_session(session_id));
}

json LocalRack::import_session(std::string_view bytes, const ImportParameters& query) {
    const std::string format = query.count("format") ? query.at("format") : "bin";
    if (format != "bin" && format != "hex" && format != "gmon")
        fail(Failure::kBadRequest, "format must be bin, hex or gmon");
    const daemon::BoardConfig wire_settings = import_wire(query, format == "gmon" ? "bin" : format);
    std::shared_ptr<const gmon::Symbolizer> elf;
    storage::NewSession spec;
    spec.board = query.count("board") ? query.at("board") : "import";
    spec.link = "import";
    spec.protocol = wire_settings.protocol;
    spec.format = format;
    spec.addr_bytes = wire_settings.addr_bytes;
    spec.started_ns = daemon::unix_now_ns();
    if (query.count("firmware")) {
        const std::string id = query.at("firmware");
        const auto path = firmware_dir() / (id + ".elf");
        if (!is_hex_id(id) || !std::filesystem::exists(path))
            fail(Failure::kNotFound, "no firmware " + id);
        elf = elves_.get(path.string());
        spec.elf_path = path.string();
        spec.elf_build_id = elf->build_id();
        spec.elf_sha256 = daemon::file_sha256(path);
    }
    ingest::ImportSpec import;
    import.kind = format == "gmon" ? ingest::InputKind::kGmon : ingest::InputKind::kCapture;
    import.wire = ingest::wire_spec_of(wire_settings);
    import.wire.code_range = ingest::decode_range_of(elf.get());
    import.layout = elf ? elf->layout() : gmon::TargetLayout{};
    const std::span<const std::uint8_t> body(reinterpret_cast<const std::uint8_t*>(bytes.data()),
                                             bytes.size());
    ingest::RecordCollector records;
    ingest::Imported imported;
    try {
        imported = ingest::import_bytes(body, import, records);
    } catch (const gmon::GmonFormatError& e) {
        fail(Failure::kBadGmon, e.what());
    }
    std::vector<std::uint8_t> raw;
    if (imported.kind == ingest::InputKind::kGmon) {
        spec.histograms = imported.histograms;  // its own ranges and rate, exactly
    } else {
        if (imported.stats.records() == 0)
            fail(Failure::kNoRecords, "no records found: check format, protocol and addr_bytes");
        spec.wire_options = ingest::wire_options_json(import.wire);
        raw.assign(body.begin(), body.end());
    }
    storage::SessionCounters counters;
    storage::set_decoder_counters(counters, imported.stats);
    const std::int64_t id =
        capture_.import_session(spec, std::move(raw), std::move(records.records), counters);
    return session_json(stored_session(id));
}

std::optional<LiveView> LocalRack::live(std::int64_t id) {
    auto snapshot = capture_.live_snapshot(id);
    if (!snapshot) return std::nullopt;
    LiveView view;
    view.board = snapshot->state.board;
    view.link = snapshot->state.link_state;
    view.counters = snapshot->state.counters;
    view.newest_arcs = std::move(snapshot->state.newest_arcs);
    view.newest_console = std::move(snapshot->state.newest_console);
    view.source.aggregate = snapshot->aggregate;
    view.source.elf = snapshot->state.elf;
    view.source.announced_range = snapshot->state.announced_range;
    view.version = snapshot->version;
    return view;
}

}  // namespace rackprof::service
