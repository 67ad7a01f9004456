#include "daemon/service/local_rack.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <set>

#include "daemon/board.h"
#include "daemon/capture_session.h"
#include "daemon/wire_decoder.h"
#include "gmon/gmon_reader.h"
#include "gmon/gmon_writer.h"
#include "gmon/profile.h"
#include "gmon/report.h"

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
        if (query.count(key)) board[key] = static_cast<int>(parse_non_negative(query.at(key), key));
    }
    if (query.count("tpiu")) board["tpiu"] = query.at("tpiu") == "true" || query.at("tpiu") == "1";
    try {
        return daemon::board_from_json(board);
    } catch (const daemon::BoardFieldError& e) {
        fail(Failure::kBadRequest, e.key() + ": " + e.what());
    }
}

struct DecodedImport {
    std::vector<protocol::Record> records;
    storage::SessionCounters counters;
    std::vector<std::uint8_t> raw;
};

// A gmon.out's arcs and histogram bins as records: bins become samples at their first
// address; wide counts are split into 32-bit records.
DecodedImport decode_gmon_import(std::span<const std::uint8_t> body, const gmon::Symbolizer* elf) {
    DecodedImport out;
    gmon::GmonData data;
    try {
        data = gmon::merge_duplicates(
            gmon::parse_gmon(body, elf ? elf->layout() : gmon::TargetLayout{}));
    } catch (const std::exception& e) {
        fail(Failure::kBadGmon, e.what());
    }
    auto push = [&](protocol::Record r, std::uint64_t count) {
        for (; count > 0; count -= r.count) {
            r.count = static_cast<std::uint32_t>(std::min<std::uint64_t>(count, 0xFFFFFFFFu));
            out.records.push_back(r);
        }
    };
    for (const auto& a : data.arcs) {
        push(protocol::Record::arc(static_cast<std::uint32_t>(a.from_pc),
                                   static_cast<std::uint32_t>(a.self_pc)),
             a.count);
        out.counters.arcs += a.count;
    }
    for (const auto& h : data.histograms) {
        for (std::size_t i = 0; i < h.bins.size(); ++i) {
            if (!h.bins[i]) continue;
            const auto pc =
                h.low_pc + static_cast<std::uint64_t>(static_cast<double>(i) * h.bin_bytes());
            push(protocol::Record::pc_sample(static_cast<std::uint32_t>(pc)), h.bins[i]);
            out.counters.pc_samples += h.bins[i];
        }
    }
    out.counters.bytes_in = body.size();
    return out;
}

// A capture's bytes run through the board's decoder, kept raw beside the records.
DecodedImport decode_capture_import(std::span<const std::uint8_t> body,
                                    const daemon::BoardConfig& wire_settings,
                                    const gmon::Symbolizer* elf, storage::NewSession& spec) {
    DecodedImport out;
    daemon::WireSpec wire = daemon::wire_spec_of(wire_settings);
    if (elf && elf->code_high() <= 0x100000000ull) {
        wire.code_range = protocol::AddressRange{static_cast<std::uint32_t>(elf->code_low()),
                                                 static_cast<std::uint32_t>(elf->code_high())};
    }
    if (wire.protocol == "itm") spec.wire_options = daemon::swo_options_json(wire.swo);
    const auto decoder = daemon::make_decoder(wire);
    struct Collect : protocol::RecordSink {
        std::vector<protocol::Record>& records;
        explicit Collect(std::vector<protocol::Record>& r) : records(r) {}
        void on_records(std::span<const protocol::Record> batch) override {
            records.insert(records.end(), batch.begin(), batch.end());
        }
    } sink(out.records);
    decoder->feed(body, sink);
    decoder->finish(sink);
    if (decoder->stats().records() == 0) {
        fail(Failure::kNoRecords, "no records found: check format, protocol and addr_bytes");
    }
    storage::set_decoder_counters(out.counters, decoder->stats());
    out.raw.assign(body.begin(), body.end());
    return out;
}

// ---- profiles ---------------------------------------------------------------------------

// A stored session's profile data: its aggregate (whole, or the batches inside a window) over
// the session's code range, named by its ELF when that still loads.
struct SessionProfileData {
    std::shared_ptr<const gmon::Symbolizer> elf;  // null: profile by address only
    gmon::GmonData data;
};

SessionProfileData session_profile_data(storage::SessionStore& store,
                                        const storage::SessionInfo& info, const TimeWindow& window,
                                        SymbolizerCache& elves) {
    SessionProfileData out;
    if (!info.spec.elf_path.empty()) {
        try {
            out.elf = elves.get(info.spec.elf_path);
        } catch (const std::exception&) {
            out.elf = nullptr;  // moved or deleted since: profile by address only
        }
    }
    const auto aggregate =
        window.bounded() ? store.aggregate_between(
                               info.id, window.from_ns.value_or(0),
                               window.to_ns.value_or(std::numeric_limits<std::int64_t>::max()))
                         : store.aggregate(info.id);
    const auto spec =
        gmon::histogram_spec(aggregate, daemon::session_code_range(info, out.elf.get()));
    out.data =
        gmon::to_gmon_data(aggregate, spec, out.elf ? out.elf->layout() : gmon::TargetLayout{})
            .data;
    return out;
}

const gmon::Symbolizer& require_elf(const SessionProfileData& profile, std::int64_t id) {
    if (!profile.elf) {
        fail(Failure::kNoElf,
             "session " + std::to_string(id) + " has no usable ELF, so functions cannot be named");
    }
    return *profile.elf;
}

// ---- exports ----------------------------------------------------------------------------

constexpr int kExportPage = 64;

// A stream pulled page by page: `page(store, after, out)` appends one page after the sequence
// number `after` and returns the last one it read. A connection is leased per page, so a slow
// client holds none; an empty page ends the stream.
template <typename Page>
std::function<std::optional<std::string>()> paged(storage::ReaderPool& readers, Page page) {
    return [&readers, page, after = std::int64_t{-1},
            done = false]() mutable -> std::optional<std::string> {
        if (done) return std::nullopt;
        std::string out;
        after = page(*readers.lease(), after, out);
        if (out.empty()) done = true;
        return done ? std::nullopt : std::optional(std::move(out));
    };
}

// Raw bytes as received.
std::function<std::optional<std::string>()> raw_pages(storage::ReaderPool& readers,
                                                      std::int64_t id) {
    return paged(readers, [id](storage::SessionStore& store, std::int64_t after, std::string& out) {
        for (const auto& row : store.chunk_page(id, after, kExportPage)) {
            out.append(reinterpret_cast<const char*>(row.bytes.data()), row.bytes.size());
            after = row.seq;
        }
        return after;
    });
}

// Every record with its receive time, one JSON object a line.
std::function<std::optional<std::string>()> ndjson_pages(storage::ReaderPool& readers,
                                                         std::int64_t id) {
    return paged(readers, [id](storage::SessionStore& store, std::int64_t after, std::string& out) {
        for (const auto& row : store.batch_page(id, after, kExportPage)) {
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
            after = row.seq;
        }
        return after;
    });
}

// The aggregate in the thesis' validation columns. It is small (distinct addresses), but it
// is sent as a stream all the same.
std::function<std::optional<std::string>()> csv_rows(gmon::Aggregate aggregate) {
    return
        [aggregate = std::move(aggregate), sent = false]() mutable -> std::optional<std::string> {
            if (sent) return std::nullopt;
            sent = true;
            std::string out = "kind,from,self,pc,count\n";
            for (const auto& a : aggregate.arcs()) {
                out += "arc," + gmon::hex_address(a.from_pc) + "," + gmon::hex_address(a.self_pc) +
                       ",," + std::to_string(a.count) + "\n";
            }
            for (const auto& p : aggregate.pc_samples()) {
                out += "pc,,," + gmon::hex_address(p.pc) + "," + std::to_string(p.count) + "\n";
            }
            return out;
        };
}

std::function<std::optional<std::string>()> once(std::string bytes) {
    return [bytes = std::move(bytes), sent = false]() mutable -> std::optional<std::string> {
        if (sent) return std::nullopt;
        sent = true;
        return std::move(bytes);
    };
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
    auto store = readers_.lease();
    const auto info = store->session(id);
    if (!info) fail(Failure::kNotFound, "no session " + std::to_string(id));
    const auto data = session_profile_data(*store, *info, window, elves_);
    const auto& elf = require_elf(data, id);
    json profile = gmon::profile_json(gmon::compute_profile(data.data, elf),
                                      {options.top, options.min_percent});
    // DWT samples taken while the core slept: a count beside the functions, never one of them
    // (the record batches do not carry them, so a window has none).
    profile["sleeping"] = window.bounded() ? json(nullptr) : json(info->counters.sleep_samples);
    return profile;
}

Export LocalRack::open_export(std::int64_t id, const std::string& format,
                              const TimeWindow& window) {
    auto store = readers_.lease();
    const auto info = store->session(id);
    if (!info) fail(Failure::kNotFound, "no session " + std::to_string(id));
    const std::string base = info->spec.board + "-" + std::to_string(id);
    if (format == "raw")
        return {"application/octet-stream", base + ".raw", false, raw_pages(readers_, id)};
    if (format == "ndjson")
        return {"application/x-ndjson", base + ".ndjson", false, ndjson_pages(readers_, id)};
    if (format == "csv") return {"text/csv", base + ".csv", false, csv_rows(store->aggregate(id))};
    if (format != "gmon" && format != "text" && format != "json")
        fail(Failure::kUnknownFormat, "unknown format '" + format + "'");
    const auto data = session_profile_data(*store, *info, window, elves_);
    if (format == "gmon") {
        const auto bytes = gmon::serialize_gmon(data.data);
        return {"application/octet-stream", base + ".gmon.out", true,
                once(std::string(bytes.begin(), bytes.end()))};
    }
    const auto profile = gmon::compute_profile(data.data, require_elf(data, id));
    if (format == "text")
        return {"text/plain; charset=utf-8", base + ".txt", true,
                once(gmon::render_gprof_text(profile))};
    return {"application/json", base + ".json", true,
            once(gmon::profile_json(profile).dump() + "\n")};
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
    try {
        elf = gmon::Symbolizer::load(upload);
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
                 {"functions", gmon::gprof_symbol_table(*elf).size()},
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
    const std::span<const std::uint8_t> body(reinterpret_cast<const std::uint8_t*>(bytes.data()),
                                             bytes.size());
    DecodedImport decoded = format == "gmon"
                                ? decode_gmon_import(body, elf.get())
                                : decode_capture_import(body, wire_settings, elf.get(), spec);
    const std::int64_t id = capture_.import_session(spec, std::move(decoded.raw),
                                                    std::move(decoded.records), decoded.counters);
    return session_json(stored_session(id));
}

// The top functions by self time in a live aggregate, named by the session's ELF.
json LocalRack::top_functions(std::int64_t id, const gmon::Aggregate& aggregate) {
    json top = json::array();
    try {
        const auto info = readers_.lease()->session(id);
        if (info && !info->spec.elf_path.empty()) {
            const auto elf = elves_.get(info->spec.elf_path);
            const auto spec =
                gmon::histogram_spec(aggregate, std::pair(elf->code_low(), elf->code_high()));
            const auto profile = gmon::compute_profile(
                gmon::to_gmon_data(aggregate, spec, elf->layout()).data, *elf);
            const auto flat = gmon::profile_json(profile, {10, 0.0})["flat"];
            for (const auto& row : flat)
                top.push_back({{"name", row["name"]},
                               {"self_percent", row["percent"]},
                               {"calls", row["calls"]}});
        }
    } catch (const std::exception&) {
        // No usable ELF: the view goes without function names.
    }
    return top;
}

std::optional<LiveView> LocalRack::live(std::int64_t id) {
    auto view = capture_.live(id);
    if (view) view->top_functions = top_functions(id, view->aggregate);
    return view;
}

}  // namespace rackprof::service
