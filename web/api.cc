#include "web/api.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <limits>
#include <map>
#include <mutex>
#include <set>

#include "daemon/board.h"
#include "daemon/ingest/wire_settings.h"
#include "gmon/gmon_reader.h"
#include "gmon/gmon_writer.h"
#include "gmon/profile.h"
#include "gmon/report.h"
#include "storage/session_store.h"
#include "web/static_site.h"

#include <fstream>

namespace rackprof::web {

namespace {

using nlohmann::json;

struct HttpError {
    http::status status;
    std::string code;
    std::string message;
};

std::vector<std::string> split_path(std::string_view target) {
    std::vector<std::string> parts;
    const auto q = target.find('?');
    std::string_view path = target.substr(0, q);
    std::size_t start = 0;
    while (start < path.size()) {
        const auto slash = path.find('/', start);
        const auto end = slash == std::string_view::npos ? path.size() : slash;
        if (end > start) parts.emplace_back(path.substr(start, end - start));
        start = end + 1;
    }
    return parts;
}

std::map<std::string, std::string> query_of(std::string_view target) {
    std::map<std::string, std::string> out;
    const auto q = target.find('?');
    if (q == std::string_view::npos) return out;
    std::string_view query = target.substr(q + 1);
    while (!query.empty()) {
        const auto amp = query.find('&');
        const std::string_view pair = query.substr(0, amp);
        const auto eq = pair.find('=');
        out[std::string(pair.substr(0, eq))] =
            eq == std::string_view::npos ? "" : std::string(pair.substr(eq + 1));
        if (amp == std::string_view::npos) break;
        query = query.substr(amp + 1);
    }
    return out;
}

std::int64_t parse_id(const std::string& text, const char* what) {
    std::int64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || value <= 0) {
        throw HttpError{http::status::bad_request, "bad_request",
                        std::string(what) + " must be a positive integer"};
    }
    return value;
}

std::int64_t parse_time(const std::string& text, const char* what) {
    std::int64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || value < 0) {
        throw HttpError{http::status::bad_request, "bad_request",
                        std::string(what) + " must be a time in Unix nanoseconds"};
    }
    return value;
}

double parse_number(const std::string& text, const char* what) {
    try {
        std::size_t used = 0;
        const double v = std::stod(text, &used);
        if (used == text.size() && v >= 0) return v;
    } catch (const std::exception&) {
    }
    throw HttpError{http::status::bad_request, "bad_request",
                    std::string(what) + " must be a non-negative number"};
}

json counters_json(const storage::SessionCounters& c) {
    return {{"bytes_in", c.bytes_in},
            {"bytes_discarded", c.bytes_discarded},
            {"resyncs", c.resyncs},
            {"arcs", c.arcs},
            {"pc_samples", c.pc_samples},
            {"gaps", c.gaps},
            {"records_lost", c.records_lost},
            {"bytes_lost", c.bytes_lost},
            {"frames", c.frames},
            {"frames_bad", c.frames_bad},
            {"frames_lost", c.frames_lost},
            {"target_dropped", c.target_dropped},
            {"overflows", c.overflows},
            {"sleep_samples", c.sleep_samples}};
}

json board_json(const daemon::BoardStatus& b) {
    return {{"name", b.name},
            {"link", b.link},
            {"state", daemon::to_string(b.state)},
            {"last_error", b.last_error},
            {"reconnects", b.reconnects},
            {"session", b.session_id ? json(b.session_id) : json(nullptr)},
            {"counters", b.session ? counters_json(b.counters) : json(nullptr)}};
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
                {"counters", counters_json(s.counters)}};
    if (s.spec.protocol == "itm") {
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

// GET /api/v1/sessions/{id}/console[?tail=N]: the console text the target printed (ITM
// stimulus port), lines as received; the newest N only with tail.
Response console_reply(const Request& request, storage::SessionStore& store, std::int64_t id,
                       const std::map<std::string, std::string>& query) {
    const int tail =
        query.count("tail") ? static_cast<int>(parse_number(query.at("tail"), "tail")) : 0;
    std::string text;
    for (const auto& line : store.console(id, tail)) text += line.text;
    Response r{http::status::ok, request.version()};
    r.set(http::field::content_type, "text/plain; charset=utf-8");
    r.keep_alive(request.keep_alive());
    r.body() = std::move(text);
    return r;
}

// A JSON body, or none, answering `request` (same HTTP version and keep-alive).
Response json_reply(const Request& request, http::status status, const json& body) {
    Response r{status, request.version()};
    r.set(http::field::content_type, "application/json");
    r.keep_alive(request.keep_alive());
    r.body() = body.dump() + "\n";
    return r;
}

Response empty_reply(const Request& request, http::status status) {
    Response r{status, request.version()};
    r.keep_alive(request.keep_alive());
    return r;
}

}  // namespace

std::shared_ptr<const gmon::Symbolizer> cached_symbolizer(const std::string& path) {
    static std::mutex mutex;
    static std::map<std::string, std::shared_ptr<const gmon::Symbolizer>> cache;
    std::lock_guard lock(mutex);
    auto& slot = cache[path];
    if (!slot) slot = gmon::Symbolizer::load(path);
    return slot;
}

Api::Api(daemon::CaptureService& service, ApiOptions options)
    : service_(service),
      options_(std::move(options)),
      site_(std::make_unique<StaticSite>(options_.web_root)) {}

Api::~Api() = default;

Response Api::error(http::status status, const std::string& code, const std::string& message,
                    unsigned version, bool keep_alive) {
    Response r{status, version};
    r.set(http::field::content_type, "application/json");
    r.keep_alive(keep_alive);
    r.body() = json{{"error", {{"code", code}, {"message", message}}}}.dump() + "\n";
    return r;
}

Reply Api::handle(const Request& request) {
    const auto json_response = [&](http::status status, const json& body) {
        return json_reply(request, status, body);
    };
    try {
        const auto parts = split_path(request.target());
        const auto query = query_of(request.target());
        const auto method = request.method();
        const bool get = method == http::verb::get || method == http::verb::head;
        const bool post = method == http::verb::post;
        auto need = [&](bool allowed) {
            if (!allowed)
                throw HttpError{http::status::method_not_allowed, "method_not_allowed",
                                "method not allowed here"};
        };
        // The dashboard's files hold no data, so they need no token (the page asks for one).
        const bool health_probe =
            parts.size() == 1 && (parts[0] == "healthz" || parts[0] == "readyz");
        if (!health_probe && (parts.empty() || parts[0] != "api")) {
            need(get);
            return site_->serve(request);
        }
        if ((!get || options_.token_for_reads) && options_.require_token) {
            const auto auth = request[http::field::authorization];
            if (options_.token.empty() || auth != "Bearer " + options_.token) {
                throw HttpError{http::status::unauthorized, "unauthorized",
                                "this request needs Authorization: Bearer <token>"};
            }
        }

        if (parts == std::vector<std::string>{"healthz"}) {
            need(get);
            return json_response(http::status::ok, {{"status", "ok"}});
        }
        if (parts == std::vector<std::string>{"readyz"}) {
            need(get);
            try {
                storage::SessionStore probe(options_.storage_path,
                                            storage::Database::Mode::kReadOnly);
                return json_response(http::status::ok,
                                     {{"status", "ready"}, {"boards", service_.boards().size()}});
            } catch (const std::exception&) {
                throw HttpError{http::status::service_unavailable, "not_ready",
                                "storage is not available"};
            }
        }
        if (parts.size() < 2 || parts[0] != "api" || parts[1] != "v1") {
            throw HttpError{http::status::not_found, "not_found", "no such resource"};
        }
        const std::vector<std::string> rest(parts.begin() + 2, parts.end());

        if (rest == std::vector<std::string>{"version"}) {
            need(get);
            return json_response(
                http::status::ok,
                {{"name", "rackprof"}, {"version", RACKPROF_VERSION}, {"api", "v1"}});
        }
        if (!rest.empty() && rest[0] == "boards") {
            if (rest.size() == 1 && post) return change_board(request, "");
            if (rest.size() == 2 && (method == http::verb::put || method == http::verb::delete_)) {
                return change_board(request, rest[1]);
            }
            const auto boards = service_.boards();
            if (rest.size() == 1) {
                need(get);
                json list = json::array();
                for (const auto& b : boards) list.push_back(board_json(b));
                return json_response(http::status::ok, list);
            }
            const auto board = std::find_if(boards.begin(), boards.end(),
                                            [&](const auto& b) { return b.name == rest[1]; });
            if (board == boards.end())
                throw HttpError{http::status::not_found, "not_found",
                                "no board named '" + rest[1] + "'"};
            if (rest.size() == 2) {
                need(get);
                return json_response(http::status::ok, board_json(*board));
            }
            if (rest.size() == 3 && rest[2] == "sessions") {
                need(post);
                const std::int64_t id = service_.start_session(board->name);
                if (!id)
                    throw HttpError{http::status::conflict, "conflict",
                                    "the session could not start"};
                storage::SessionStore store(options_.storage_path,
                                            storage::Database::Mode::kReadOnly);
                return json_response(http::status::created, session_json(*store.session(id)));
            }
            throw HttpError{http::status::not_found, "not_found", "no such resource"};
        }
        if (rest == std::vector<std::string>{"firmware"}) {
            need(method == http::verb::put);
            return put_firmware(request);
        }
        if (rest == std::vector<std::string>{"sessions", "import"}) {
            need(post);
            return import_session(request);
        }
        if (!rest.empty() && rest[0] == "sessions") {
            storage::SessionStore store(options_.storage_path, storage::Database::Mode::kReadOnly);
            if (rest.size() == 1) {
                need(get);
                const std::int64_t from =
                    query.count("from") ? parse_time(query.at("from"), "from") : 0;
                const std::int64_t to = query.count("to") ? parse_time(query.at("to"), "to") : 0;
                json list = json::array();
                std::set<std::string> tagged;  // boards carrying the tag, as configured now
                if (query.count("tag")) {
                    for (const auto& b : service_.board_configs()) {
                        if (std::find(b.tags.begin(), b.tags.end(), query.at("tag")) !=
                            b.tags.end())
                            tagged.insert(b.name);
                    }
                }
                for (const auto& s : store.sessions()) {
                    if (query.count("board") && s.spec.board != query.at("board")) continue;
                    if (query.count("tag") && !tagged.count(s.spec.board)) continue;
                    if (query.count("state") && s.state != query.at("state")) continue;
                    if (from && s.spec.started_ns < from) continue;
                    if (to && s.spec.started_ns > to) continue;
                    list.push_back(session_json(s));
                }
                return json_response(http::status::ok, list);
            }
            const std::int64_t id = parse_id(rest[1], "the session id");
            const auto info = store.session(id);
            if (!info)
                throw HttpError{http::status::not_found, "not_found", "no session " + rest[1]};
            if (rest.size() == 2) {
                if (method == http::verb::delete_) {
                    if (info->state == "capturing" || !service_.delete_stored_session(id)) {
                        throw HttpError{http::status::conflict, "conflict",
                                        "session " + rest[1] + " is capturing: stop it first"};
                    }
                    return empty_reply(request, http::status::no_content);
                }
                need(get);
                return json_response(http::status::ok, session_json(*info));
            }
            if (rest.size() == 3 && rest[2] == "firmware") {
                need(method == http::verb::put);
                return attach_firmware(request, id);
            }
            if (rest.size() == 3 && rest[2] == "stop") {
                need(post);
                if (info->state != "capturing" || !service_.stop_stored_session(id)) {
                    throw HttpError{http::status::conflict, "conflict",
                                    "session " + rest[1] + " is not capturing"};
                }
                return json_response(http::status::ok, session_json(*store.session(id)));
            }
            if (rest.size() == 3 && rest[2] == "console") {
                need(get);
                return console_reply(request, store, id, query);
            }
            if (rest.size() == 3 &&
                (rest[2] == "records.csv" || rest[2] == "records.ndjson" || rest[2] == "raw")) {
                need(get);
                return handle_session_export(request, id, rest[2]);
            }
            std::shared_ptr<const gmon::Symbolizer> elf;
            if (!info->spec.elf_path.empty()) {
                try {
                    elf = cached_symbolizer(info->spec.elf_path);
                } catch (const std::exception&) {
                    elf = nullptr;  // moved or deleted since: profile by address only
                }
            }
            // A time window (receive times, ns) sums the record batches inside it.
            const bool windowed = query.count("from") || query.count("to");
            const auto aggregate =
                windowed ? store.aggregate_between(
                               id, query.count("from") ? parse_time(query.at("from"), "from") : 0,
                               query.count("to") ? parse_time(query.at("to"), "to")
                                                 : std::numeric_limits<std::int64_t>::max())
                         : store.aggregate(id);
            const auto spec =
                gmon::histogram_spec(aggregate, daemon::session_code_range(*info, elf.get()));
            const auto data =
                gmon::to_gmon_data(aggregate, spec, elf ? elf->layout() : gmon::TargetLayout{})
                    .data;
            if (rest.size() == 3 && rest[2] == "gmon.out") {
                need(get);
                const auto bytes = gmon::serialize_gmon(data);
                Response r{http::status::ok, request.version()};
                r.set(http::field::content_type, "application/octet-stream");
                r.set(http::field::content_disposition, "attachment; filename=\"" +
                                                            info->spec.board + "-" +
                                                            std::to_string(id) + ".gmon.out\"");
                r.keep_alive(request.keep_alive());
                r.body().assign(bytes.begin(), bytes.end());
                return r;
            }
            if (rest.size() == 3 && rest[2] == "profile") {
                need(get);
                if (!elf) {
                    throw HttpError{
                        http::status::unprocessable_entity, "no_elf",
                        "session " + rest[1] + " has no usable ELF, so functions cannot be named"};
                }
                gmon::JsonReportOptions options;
                if (query.count("top"))
                    options.top = static_cast<std::size_t>(parse_number(query.at("top"), "top"));
                if (query.count("min_percent"))
                    options.min_percent = parse_number(query.at("min_percent"), "min_percent");
                json profile = gmon::profile_json(gmon::compute_profile(data, *elf), options);
                // DWT samples taken while the core slept: a count beside the functions, never
                // one of them (the record batches do not carry them, so a window has none).
                profile["sleeping"] = windowed ? json(nullptr) : json(info->counters.sleep_samples);
                return json_response(http::status::ok, profile);
            }
        }
        throw HttpError{http::status::not_found, "not_found", "no such resource"};
    } catch (const HttpError& e) {
        return error(e.status, e.code, e.message, request.version(), request.keep_alive());
    } catch (const std::exception& e) {
        // The details (paths, SQL) go to the log, not to the client.
        if (options_.log_error) options_.log_error(std::string(request.target()) + ": " + e.what());
        return error(http::status::internal_server_error, "internal",
                     "internal error; the daemon's log has the details", request.version(),
                     request.keep_alive());
    }
}

namespace {
std::filesystem::path firmware_dir(const std::filesystem::path& storage_path);
bool is_hex_id(const std::string& id);
}  // namespace

// POST /api/v1/boards, PUT and DELETE /api/v1/boards/{name}: boards kept in the database.
Response Api::change_board(const Request& request, const std::string& name) {
    using Change = daemon::CaptureService::BoardChange;
    auto fail_for = [&](Change c, const std::string& board) {
        if (c == Change::kExists)
            throw HttpError{http::status::conflict, "conflict",
                            "a board named '" + board + "' exists"};
        if (c == Change::kNotFound)
            throw HttpError{http::status::not_found, "not_found", "no board named '" + board + "'"};
        if (c == Change::kFromFile) {
            throw HttpError{
                http::status::conflict, "conflict",
                "'" + board + "' comes from the configuration file: change it there (and reload)"};
        }
    };
    if (request.method() == http::verb::delete_) {
        fail_for(service_.remove_board(name), name);
        return empty_reply(request, http::status::no_content);
    }
    if (request[http::field::content_type].find("application/json") == std::string_view::npos) {
        throw HttpError{http::status::unsupported_media_type, "unsupported_media_type",
                        "send application/json"};
    }
    daemon::BoardConfig board;
    try {
        json body = json::parse(request.body());
        if (!name.empty() && body.is_object()) {
            if (body.contains("name") && body["name"] != name) {
                throw HttpError{http::status::unprocessable_entity, "invalid",
                                "name: the path names the board"};
            }
            body["name"] = name;
        }
        // "firmware": an uploaded image's id stands for its stored ELF (no paths over HTTP).
        if (body.is_object() && body.contains("firmware")) {
            const std::string id =
                body["firmware"].is_string() ? body["firmware"].get<std::string>() : "";
            const auto path = firmware_dir(options_.storage_path) / (id + ".elf");
            if (!is_hex_id(id) || !std::filesystem::exists(path)) {
                throw HttpError{http::status::unprocessable_entity, "invalid",
                                "firmware: no uploaded firmware with that id"};
            }
            body.erase("firmware");
            body["elf"] = path.string();
        }
        board = daemon::board_from_json(body);
    } catch (const json::exception&) {
        throw HttpError{http::status::bad_request, "bad_request", "the body is not JSON"};
    } catch (const daemon::BoardFieldError& e) {
        throw HttpError{http::status::unprocessable_entity, "invalid", e.key() + ": " + e.what()};
    }
    const Change change = name.empty() ? service_.add_board(board) : service_.update_board(board);
    fail_for(change, board.name);
    for (const auto& b : service_.boards()) {
        if (b.name != board.name) continue;
        return json_reply(request, name.empty() ? http::status::created : http::status::ok,
                          board_json(b));
    }
    throw HttpError{http::status::internal_server_error, "internal", "the board vanished"};
}

bool Api::is_upload(const http::request_header<>& header) {
    const std::string_view target = header.target();
    const auto path = target.substr(0, target.find('?'));
    return (header.method() == http::verb::put && path == "/api/v1/firmware") ||
           (header.method() == http::verb::post && path == "/api/v1/sessions/import");
}

namespace {

std::filesystem::path firmware_dir(const std::filesystem::path& storage_path) {
    return storage_path.parent_path() / "firmware";
}

// The id an uploaded image is stored under: its build-id, or its SHA-256 when it has none.
std::string firmware_id(const gmon::Symbolizer& elf, const std::string& sha256) {
    return elf.build_id().empty() ? sha256 : elf.build_id();
}

bool is_hex_id(const std::string& id) {
    return !id.empty() && id.size() <= 128 &&
           id.find_first_not_of("0123456789abcdef") == std::string::npos;
}

}  // namespace

// PUT /api/v1/firmware: an ELF body, stored once under its build-id.
Response Api::put_firmware(const Request& request) {
    const auto dir = firmware_dir(options_.storage_path);
    std::filesystem::create_directories(dir);
    const auto upload = dir / (".upload-" + std::to_string(daemon::new_session_handle()));
    {
        std::ofstream f(upload, std::ios::binary);
        f.write(request.body().data(), static_cast<std::streamsize>(request.body().size()));
    }
    struct Cleanup {
        std::filesystem::path path;
        ~Cleanup() {
            std::error_code ignored;
            std::filesystem::remove(path, ignored);
        }
    } cleanup{upload};
    std::shared_ptr<const gmon::Symbolizer> elf;
    try {
        elf = gmon::Symbolizer::load(upload);
    } catch (const std::exception&) {
        throw HttpError{http::status::unprocessable_entity, "not_an_elf",
                        "the body is not a usable ELF file (with symbols)"};
    }
    const std::string sha256 = daemon::file_sha256(upload);
    const std::string id = firmware_id(*elf, sha256);
    const auto stored = dir / (id + ".elf");
    const bool existed = std::filesystem::exists(stored);
    if (!existed) std::filesystem::rename(upload, stored);
    return json_reply(request, existed ? http::status::ok : http::status::created,
                      json{{"id", id},
                           {"build_id", elf->build_id()},
                           {"sha256", sha256},
                           {"functions", gmon::gprof_symbol_table(*elf).size()},
                           {"stored", !existed}});
}

// PUT /api/v1/sessions/{id}/firmware {"id": "<firmware id>"}: name a session's functions later.
Response Api::attach_firmware(const Request& request, std::int64_t session) {
    if (request[http::field::content_type].find("application/json") == std::string_view::npos) {
        throw HttpError{http::status::unsupported_media_type, "unsupported_media_type",
                        "send application/json"};
    }
    json body;
    try {
        body = json::parse(request.body());
    } catch (const json::exception&) {
        throw HttpError{http::status::bad_request, "bad_request", "the body is not JSON"};
    }
    const std::string id = body.value("id", "");
    if (!is_hex_id(id))
        throw HttpError{http::status::unprocessable_entity, "bad_firmware_id",
                        "\"id\" must be a firmware id"};
    const auto path = firmware_dir(options_.storage_path) / (id + ".elf");
    if (!std::filesystem::exists(path))
        throw HttpError{http::status::not_found, "not_found",
                        "no firmware " + id + "; PUT it first"};
    const auto elf = cached_symbolizer(path.string());
    service_.set_session_firmware(session, path.string(), elf->build_id(),
                                  daemon::file_sha256(path));
    storage::SessionStore store(options_.storage_path, storage::Database::Mode::kReadOnly);
    return json_reply(request, http::status::ok, session_json(*store.session(session)));
}

namespace {

// An imported capture's wire from the query (protocol, addr_bytes and the itm keys, as a
// board's), checked by the same rules as a board's settings.
daemon::BoardConfig import_wire(const std::map<std::string, std::string>& query,
                                const std::string& format) {
    json board = {{"name", "import"}, {"link", "file:///import"}, {"format", format}};
    if (query.count("protocol")) board["protocol"] = query.at("protocol");
    for (const char* key :
         {"addr_bytes", "tpiu_stream", "framed_port", "orbstat_port", "console_port"}) {
        if (query.count(key)) board[key] = static_cast<int>(parse_number(query.at(key), key));
    }
    if (query.count("tpiu")) board["tpiu"] = query.at("tpiu") == "true" || query.at("tpiu") == "1";
    try {
        return daemon::board_from_json(board);
    } catch (const daemon::BoardFieldError& e) {
        throw HttpError{http::status::bad_request, "bad_request", e.key() + ": " + e.what()};
    }
}

}  // namespace

// POST /api/v1/sessions/import?format=bin|hex|gmon&protocol=legacy|framed|itm&addr_bytes=3|4
//      &tpiu=&tpiu_stream=&framed_port=&orbstat_port=&console_port=&board=NAME&firmware=ID
Response Api::import_session(const Request& request) {
    const auto query = query_of(request.target());
    const std::string format = query.count("format") ? query.at("format") : "bin";
    if (format != "bin" && format != "hex" && format != "gmon") {
        throw HttpError{http::status::bad_request, "bad_request",
                        "format must be bin, hex or gmon"};
    }
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
        const auto path = firmware_dir(options_.storage_path) / (id + ".elf");
        if (!is_hex_id(id) || !std::filesystem::exists(path))
            throw HttpError{http::status::not_found, "not_found", "no firmware " + id};
        elf = cached_symbolizer(path.string());
        spec.elf_path = path.string();
        spec.elf_build_id = elf->build_id();
        spec.elf_sha256 = daemon::file_sha256(path);
    }
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(request.body().data());
    const std::span<const std::uint8_t> body(bytes, request.body().size());
    std::vector<protocol::Record> records;
    storage::SessionCounters counters;
    std::vector<std::uint8_t> raw;
    if (format == "gmon") {
        gmon::GmonData data;
        try {
            data = gmon::merge_duplicates(
                gmon::parse_gmon(body, elf ? elf->layout() : gmon::TargetLayout{}));
        } catch (const std::exception& e) {
            throw HttpError{http::status::unprocessable_entity, "bad_gmon", e.what()};
        }
        // Bins become samples at their first address; wide counts are split into 32-bit records.
        auto push = [&](protocol::Record r, std::uint64_t count) {
            for (; count > 0; count -= r.count) {
                r.count = static_cast<std::uint32_t>(std::min<std::uint64_t>(count, 0xFFFFFFFFu));
                records.push_back(r);
            }
        };
        for (const auto& a : data.arcs) {
            push(protocol::Record::arc(static_cast<std::uint32_t>(a.from_pc),
                                       static_cast<std::uint32_t>(a.self_pc)),
                 a.count);
            counters.arcs += a.count;
        }
        for (const auto& h : data.histograms) {
            for (std::size_t i = 0; i < h.bins.size(); ++i) {
                if (!h.bins[i]) continue;
                const auto pc =
                    h.low_pc + static_cast<std::uint64_t>(static_cast<double>(i) * h.bin_bytes());
                push(protocol::Record::pc_sample(static_cast<std::uint32_t>(pc)), h.bins[i]);
                counters.pc_samples += h.bins[i];
            }
        }
        counters.bytes_in = body.size();
    } else {
        daemon::WireSpec wire = daemon::wire_spec_of(wire_settings);
        if (elf && elf->code_high() <= 0x100000000ull) {
            wire.code_range = protocol::AddressRange{static_cast<std::uint32_t>(elf->code_low()),
                                                     static_cast<std::uint32_t>(elf->code_high())};
        }
        if (wire.protocol == "itm") spec.wire_options = daemon::swo_options_json(wire.swo);
        const auto decoder = daemon::make_decoder(wire);
        struct Collect : protocol::RecordSink {
            std::vector<protocol::Record>& out;
            explicit Collect(std::vector<protocol::Record>& o) : out(o) {}
            void on_records(std::span<const protocol::Record> batch) override {
                out.insert(out.end(), batch.begin(), batch.end());
            }
        } sink(records);
        decoder->feed(body, sink);
        decoder->finish(sink);
        if (decoder->stats().records() == 0) {
            throw HttpError{http::status::unprocessable_entity, "no_records",
                            "no records found: check format, protocol and addr_bytes"};
        }
        storage::set_decoder_counters(counters, decoder->stats());
        raw.assign(body.begin(), body.end());
    }
    const std::int64_t id =
        service_.import_session(spec, std::move(raw), std::move(records), counters);
    storage::SessionStore store(options_.storage_path, storage::Database::Mode::kReadOnly);
    return json_reply(request, http::status::created, session_json(*store.session(id)));
}

// Exports streamed page by page from storage: raw bytes as received; every record with its
// receive time (NDJSON); the aggregate in the thesis' validation columns (CSV).
Reply Api::handle_session_export(const Request& request, std::int64_t id, const std::string& what) {
    struct Cursor {
        storage::SessionStore store;
        std::int64_t after = -1;  // the last seq sent
        bool done = false;
        explicit Cursor(const std::filesystem::path& path)
            : store(path, storage::Database::Mode::kReadOnly) {}
    };
    constexpr int kPage = 64;
    auto cursor = std::make_shared<Cursor>(options_.storage_path);
    const auto info = cursor->store.session(id);
    if (!info)
        return error(http::status::not_found, "not_found", "no session " + std::to_string(id),
                     request.version(), request.keep_alive());
    StreamedResponse reply;
    reply.header.version(request.version());
    reply.header.result(http::status::ok);
    reply.header.keep_alive(request.keep_alive());
    const std::string base = info->spec.board + "-" + std::to_string(id);
    auto attach = [&](const char* type, const std::string& name) {
        reply.header.set(http::field::content_type, type);
        reply.header.set(http::field::content_disposition, "attachment; filename=\"" + name + "\"");
    };
    if (what == "raw") {
        attach("application/octet-stream", base + ".raw");
        reply.next = [cursor, id]() -> std::optional<std::string> {
            if (cursor->done) return std::nullopt;
            std::string out;
            for (const auto& row : cursor->store.chunk_page(id, cursor->after, kPage)) {
                out.append(reinterpret_cast<const char*>(row.bytes.data()), row.bytes.size());
                cursor->after = row.seq;
            }
            if (out.empty()) cursor->done = true;
            return cursor->done ? std::nullopt : std::optional(std::move(out));
        };
    } else if (what == "records.ndjson") {
        attach("application/x-ndjson", base + ".ndjson");
        reply.next = [cursor, id]() -> std::optional<std::string> {
            if (cursor->done) return std::nullopt;
            std::string out;
            for (const auto& row : cursor->store.batch_page(id, cursor->after, kPage)) {
                const std::string t = std::to_string(row.received_ns);
                for (const auto& r : row.records) {
                    out += "{\"t\":" + t;
                    if (r.kind == protocol::RecordKind::kArc) {
                        out += ",\"kind\":\"arc\",\"from\":\"" + gmon::hex_address(r.from_pc) +
                               "\",\"self\":\"" + gmon::hex_address(r.self_pc) + "\"";
                    } else {
                        out += ",\"kind\":\"pc\",\"pc\":\"" + gmon::hex_address(r.self_pc) + "\"";
                    }
                    out += ",\"count\":" + std::to_string(r.count) + "}\n";
                }
                cursor->after = row.seq;
            }
            if (out.empty()) cursor->done = true;
            return cursor->done ? std::nullopt : std::optional(std::move(out));
        };
    } else {
        // The aggregate is small (distinct addresses), but it is sent in pieces all the same.
        attach("text/csv", base + ".csv");
        auto aggregate = std::make_shared<gmon::Aggregate>(cursor->store.aggregate(id));
        reply.next = [cursor, aggregate, sent = false]() mutable -> std::optional<std::string> {
            if (sent) return std::nullopt;
            sent = true;
            std::string out = "kind,from,self,pc,count\n";
            for (const auto& a : aggregate->arcs()) {
                out += "arc," + gmon::hex_address(a.from_pc) + "," + gmon::hex_address(a.self_pc) +
                       ",," + std::to_string(a.count) + "\n";
            }
            for (const auto& p : aggregate->pc_samples()) {
                out += "pc,,," + gmon::hex_address(p.pc) + "," + std::to_string(p.count) + "\n";
            }
            return out;
        };
    }
    return reply;
}

}  // namespace rackprof::web
