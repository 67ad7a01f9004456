#include "daemon/config/config.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include <arpa/inet.h>

#include <toml++/toml.h>

#include "daemon/config/link_uri.h"
#include "protocol/wire_format.h"

namespace rackprof::daemon::config {

namespace {

std::string where(const std::string& source, const toml::source_region& region) {
    return source + ":" + std::to_string(region.begin.line);
}

[[noreturn]] void fail(const std::string& source, const toml::node& node, const std::string& key,
                       const std::string& what) {
    throw ConfigError(where(source, node.source()) + ": " + key + ": " + what);
}

void reject_unknown(const std::string& source, const toml::table& table, const std::string& prefix,
                    const std::set<std::string>& known) {
    for (const auto& [key, value] : table) {
        if (!known.count(std::string(key.str()))) {
            fail(source, value, prefix + std::string(key.str()), "unknown key");
        }
    }
}

std::string get_string(const std::string& source, const toml::table& t, const std::string& prefix,
                       const char* key, const std::string& fallback) {
    const toml::node* node = t.get(key);
    if (!node) return fallback;
    if (!node->is_string()) fail(source, *node, prefix + key, "must be a string");
    return node->value<std::string>().value();
}

// Board numbers are small: clamped, not wrapped, so a value out of range (4294967299 as an
// address width) stays out of range for validate_board instead of becoming a valid one.
int narrowed(std::int64_t value) {
    return static_cast<int>(std::clamp<std::int64_t>(value, -1, 65536));
}

std::int64_t get_int(const std::string& source, const toml::table& t, const std::string& prefix,
                     const char* key, std::int64_t fallback) {
    const toml::node* node = t.get(key);
    if (!node) return fallback;
    if (!node->is_integer()) fail(source, *node, prefix + key, "must be an integer");
    return node->value<std::int64_t>().value();
}

// A retention rule: whole days, 0 (or absent) for forever, at most 100 years.
std::int64_t get_days(const std::string& source, const toml::table& t, const std::string& prefix,
                      const char* key) {
    const std::int64_t days = get_int(source, t, prefix, key, 0);
    if (days < 0 || days > kMaxRetentionDays) {
        fail(source, *t.get(key), prefix + key,
             "must be a number of days from 1 to " + std::to_string(kMaxRetentionDays) +
                 ", or 0 to keep forever");
    }
    return days;
}

std::optional<int> get_optional_int(const std::string& source, const toml::table& t,
                                    const std::string& prefix, const char* key) {
    if (!t.get(key)) return std::nullopt;
    return narrowed(get_int(source, t, prefix, key, 0));
}

std::vector<std::string> get_string_list(const std::string& source, const toml::node& node,
                                         const std::string& key) {
    const toml::array* list = node.as_array();
    if (!list) fail(source, node, key, "must be a list of strings");
    std::vector<std::string> out;
    for (const auto& item : *list) {
        if (!item.is_string()) fail(source, item, key, "must be a list of strings");
        out.push_back(item.value<std::string>().value());
    }
    return out;
}

bool get_bool(const std::string& source, const toml::table& t, const std::string& prefix,
              const char* key, bool fallback) {
    const toml::node* node = t.get(key);
    if (!node) return fallback;
    if (!node->is_boolean()) fail(source, *node, prefix + key, "must be true or false");
    return node->value<bool>().value();
}

// Every key a board may have: the common ones and each registered protocol's own.
const std::set<std::string>& board_keys() {
    static const std::set<std::string> keys = [] {
        std::set<std::string> k = {"name",       "link", "protocol",  "format",
                                   "addr_bytes", "elf",  "autostart", "tags"};
        for (const auto& format : protocol::wire_formats())
            k.insert(format.own_keys.begin(), format.own_keys.end());
        return k;
    }();
    return keys;
}

BoardConfig parse_board(const std::string& source, const toml::table& t, std::size_t index) {
    const std::string prefix = "boards[" + std::to_string(index) + "].";
    reject_unknown(source, t, prefix, board_keys());
    BoardConfig b;
    b.name = get_string(source, t, prefix, "name", "");
    b.link = get_string(source, t, prefix, "link", "");
    b.protocol = get_string(source, t, prefix, "protocol", default_protocol(b.link));
    b.format = get_string(source, t, prefix, "format", "bin");
    b.addr_bytes =
        narrowed(get_int(source, t, prefix, "addr_bytes", default_addr_bytes(b.protocol)));
    b.elf = get_string(source, t, prefix, "elf", "");
    b.autostart = get_bool(source, t, prefix, "autostart", true);
    b.tpiu = get_bool(source, t, prefix, "tpiu", false);
    b.tpiu_stream = narrowed(get_int(source, t, prefix, "tpiu_stream", 1));
    b.framed_port = get_optional_int(source, t, prefix, "framed_port");
    b.orbstat_port = get_optional_int(source, t, prefix, "orbstat_port");
    b.console_port = get_optional_int(source, t, prefix, "console_port");
    if (const toml::node* tags = t.get("tags")) {
        const toml::array* list = tags->as_array();
        if (!list) fail(source, *tags, prefix + "tags", "must be a list of strings");
        for (const auto& tag : *list) {
            if (!tag.is_string()) fail(source, tag, prefix + "tags", "must be a list of strings");
            b.tags.push_back(tag.value<std::string>().value());
        }
    }
    try {
        validate_board(b);
    } catch (const BoardFieldError& e) {
        const toml::node* node = t.get(e.key());
        fail(source, node ? *node : static_cast<const toml::node&>(t), prefix + e.key(), e.what());
    }
    return b;
}

// Only letters, digits and the given punctuation (ASCII: no control or multi-byte characters).
bool only(std::string_view text, std::string_view punctuation) {
    return std::all_of(text.begin(), text.end(), [&](unsigned char c) {
        return std::isalnum(c) || punctuation.find(static_cast<char>(c)) != std::string::npos;
    });
}

}  // namespace

std::string printable(std::string_view text) {
    std::string out;
    for (const unsigned char c : text) {
        if (c >= 0x20 && c < 0x7f && c != '\\') {
            out += static_cast<char>(c);
        } else {
            static const char kHex[] = "0123456789abcdef";
            out += "\\x";
            out += kHex[c >> 4];
            out += kHex[c & 15];
        }
    }
    return out;
}

void check_listen_address(const std::string& listen) {
    const auto colon = listen.rfind(':');
    if (colon == std::string::npos) throw std::invalid_argument("'" + listen + "' needs host:port");
    std::string host = listen.substr(0, colon);
    const bool bracketed = host.size() >= 2 && host.front() == '[' && host.back() == ']';
    if (bracketed) host = host.substr(1, host.size() - 2);
    unsigned char address[sizeof(in6_addr)];
    if (::inet_pton(AF_INET, host.c_str(), address) != 1 &&
        ::inet_pton(AF_INET6, host.c_str(), address) != 1) {
        throw std::invalid_argument("'" + host + "' is not an IP address");
    }
    const std::string port = listen.substr(colon + 1);
    if (port.empty() || port.size() > 5 || !only(port, "") || std::stoul(port) > 65535)
        throw std::invalid_argument("'" + port + "' is not a port (0..65535)");
}

std::string default_protocol(const std::string& link) {
    // A probe's samples are made by rackprof itself, as the framed protocol's items.
    return link.rfind("gdb://", 0) == 0 || link.rfind("gdb+serial://", 0) == 0 ? "framed"
                                                                               : "legacy";
}

int default_addr_bytes(const std::string& protocol) {
    const auto* format = protocol::find_wire_format(protocol);
    return format ? format->default_addr_bytes : 3;  // an unknown protocol is refused later
}

namespace {

// The keys only some protocols accept (the registry says which): wrong anywhere else (they
// would silently do nothing), and checked here with the key named rather than by the decoder.
void validate_protocol_keys(const BoardConfig& b, const protocol::WireFormat& format) {
    const std::pair<const char*, const std::optional<int>*> ports[] = {
        {"framed_port", &b.framed_port},
        {"orbstat_port", &b.orbstat_port},
        {"console_port", &b.console_port}};
    auto only_elsewhere = [&](const char* key, bool is_set) {
        if (is_set && !protocol::accepts_key(format, key))
            throw BoardFieldError(key, "only for protocol = " + protocol::protocols_with_key(key));
    };
    only_elsewhere("tpiu", b.tpiu);
    only_elsewhere("tpiu_stream", b.tpiu_stream != 1);
    for (const auto& [key, port] : ports) only_elsewhere(key, port->has_value());
    if (b.tpiu_stream < 1 || b.tpiu_stream > 111)
        throw BoardFieldError("tpiu_stream", "must be 1..111 (the TPIU's trace source IDs)");
    std::set<int> used;
    for (const auto& [key, port] : ports) {
        if (!port->has_value()) continue;
        if (**port < 0 || **port > 255)
            throw BoardFieldError(key, "must be an ITM stimulus port, 0..255");
        if (!used.insert(**port).second)
            throw BoardFieldError(
                key, "port " + std::to_string(**port) + " already has another use on this board");
    }
}

}  // namespace

void validate_board_name(const std::string& name) {
    if (name.empty()) throw BoardFieldError("name", "every board needs a name");
    // Names reach URLs, file names in Content-Disposition headers and log lines: a closed set
    // of characters keeps every one of them safe without escaping.
    if (name.size() > 64 || !only(name, "._-:+@"))
        throw BoardFieldError("name", "1 to 64 letters, digits or . _ - : + @");
}

void validate_board(const BoardConfig& b) {
    validate_board_name(b.name);
    for (const auto& tag : b.tags) {
        if (tag.empty() || tag.size() > 64 || !only(tag, "._-:+@=/"))
            throw BoardFieldError("tags", "each tag: 1 to 64 letters, digits or . _ - : + @ = /");
    }
    if (b.elf.size() > 4096 || !std::all_of(b.elf.begin(), b.elf.end(), [](unsigned char c) {
            return c >= 0x20 && c != 0x7f;
        })) {
        throw BoardFieldError("elf",
                              "a path of at most 4096 characters, without control characters");
    }
    if (b.link.empty()) throw BoardFieldError("link", "every board needs a link");
    try {
        parse_link_uri(b.link);
    } catch (const std::invalid_argument& e) {
        throw BoardFieldError("link", e.what());
    }
    const auto* format = protocol::find_wire_format(b.protocol);
    if (!format)
        throw BoardFieldError("protocol", "must be " + protocol::wire_format_names(" or ", "\""));
    if (parse_link_uri(b.link).is_probe() && b.protocol != "framed")
        throw BoardFieldError("protocol",
                              "a gdb:// link hands its samples on as the framed protocol: must be "
                              "\"framed\" (or left out)");
    if (parse_link_uri(b.link).is_probe() && parse_link_uri(b.link).number("stacks", 0) &&
        b.elf.empty())
        throw BoardFieldError("elf",
                              "stacks=1 unwinds with the firmware's call-frame information: the "
                              "board needs its ELF (elf, or firmware over the API)");
    if (parse_link_uri(b.link).is_probe() && b.addr_bytes != 4)
        throw BoardFieldError("addr_bytes",
                              "a gdb:// link's samples carry 4-byte addresses: must be 4");
    if (b.format != "bin" && b.format != "hex")
        throw BoardFieldError("format", "must be \"bin\" or \"hex\"");
    if (!format->traits.text_encoding && b.format != "bin")
        throw BoardFieldError("format",
                              "the " + b.protocol + " protocol is binary: must be \"bin\"");
    validate_protocol_keys(b, *format);
    if (b.addr_bytes != 3 && b.addr_bytes != 4)
        throw BoardFieldError("addr_bytes", "must be 3 or 4");
}

nlohmann::json board_to_json(const BoardConfig& b) {
    nlohmann::json j = {{"name", b.name},
                        {"link", b.link},
                        {"protocol", b.protocol},
                        {"format", b.format},
                        {"addr_bytes", b.addr_bytes},
                        {"elf", b.elf},
                        {"autostart", b.autostart},
                        {"tags", b.tags}};
    const auto* format = protocol::find_wire_format(b.protocol);
    if (format && protocol::accepts_key(*format, "tpiu")) {
        j["tpiu"] = b.tpiu;
        j["tpiu_stream"] = b.tpiu_stream;
        for (const auto& [key, port] :
             {std::pair{"framed_port", b.framed_port}, std::pair{"orbstat_port", b.orbstat_port},
              std::pair{"console_port", b.console_port}}) {
            j[key] = port ? nlohmann::json(*port) : nlohmann::json(nullptr);
        }
    }
    return j;
}

namespace {

// A JSON integer as a board number: a huge unsigned value would wrap through int64_t.
int json_int(const nlohmann::json& value) {
    if (value.is_number_unsigned() &&
        value.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
        return -1;
    }
    return narrowed(value.get<std::int64_t>());
}

}  // namespace

BoardConfig board_from_json(const nlohmann::json& j) {
    if (!j.is_object()) throw BoardFieldError("", "a board is a JSON object");
    for (const auto& [key, value] : j.items()) {
        if (!board_keys().count(key)) throw BoardFieldError(key, "unknown key");
    }
    BoardConfig b;
    auto text = [&](const char* key, std::string& out) {
        if (!j.contains(key)) return;
        if (!j[key].is_string()) throw BoardFieldError(key, "must be a string");
        out = j[key].get<std::string>();
    };
    text("name", b.name);
    text("link", b.link);
    b.protocol = default_protocol(b.link);
    text("protocol", b.protocol);
    text("format", b.format);
    text("elf", b.elf);
    b.addr_bytes = default_addr_bytes(b.protocol);
    if (j.contains("addr_bytes")) {
        if (!j["addr_bytes"].is_number_integer())
            throw BoardFieldError("addr_bytes", "must be an integer");
        b.addr_bytes = json_int(j["addr_bytes"]);
    }
    if (j.contains("autostart")) {
        if (!j["autostart"].is_boolean())
            throw BoardFieldError("autostart", "must be true or false");
        b.autostart = j["autostart"].get<bool>();
    }
    if (j.contains("tpiu")) {
        if (!j["tpiu"].is_boolean()) throw BoardFieldError("tpiu", "must be true or false");
        b.tpiu = j["tpiu"].get<bool>();
    }
    if (j.contains("tpiu_stream")) {
        if (!j["tpiu_stream"].is_number_integer())
            throw BoardFieldError("tpiu_stream", "must be an integer");
        b.tpiu_stream = json_int(j["tpiu_stream"]);
    }
    for (const auto& [key, port] :
         {std::pair{"framed_port", &b.framed_port}, std::pair{"orbstat_port", &b.orbstat_port},
          std::pair{"console_port", &b.console_port}}) {
        if (!j.contains(key) || j[key].is_null()) continue;  // null: no use for any port
        if (!j[key].is_number_integer()) throw BoardFieldError(key, "must be an integer");
        *port = json_int(j[key]);
    }
    if (j.contains("tags")) {
        if (!j["tags"].is_array()) throw BoardFieldError("tags", "must be a list of strings");
        for (const auto& tag : j["tags"]) {
            if (!tag.is_string()) throw BoardFieldError("tags", "must be a list of strings");
            b.tags.push_back(tag.get<std::string>());
        }
    }
    validate_board(b);
    return b;
}

namespace {

// The table `name` of the root, or nullptr when absent; anything else there is an error.
const toml::table* section(const std::string& source, const toml::table& root,
                           const std::string& name) {
    const toml::node* node = root.get(name);
    if (!node) return nullptr;
    const toml::table* t = node->as_table();
    if (!t) fail(source, *node, name, "must be a table");
    return t;
}

void parse_server(const std::string& source, const toml::table& t, DaemonConfig& c) {
    reject_unknown(source, t, "server.",
                   {"listen", "token_file", "token_for_reads", "web_root", "api_links"});
    c.listen = get_string(source, t, "server.", "listen", c.listen);
    c.token_file = get_string(source, t, "server.", "token_file", "");
    c.token_for_reads = get_bool(source, t, "server.", "token_for_reads", false);
    c.web_root = get_string(source, t, "server.", "web_root", "");
    if (const toml::node* links = t.get("api_links"))
        c.api_links = get_string_list(source, *links, "server.api_links");
    try {
        check_listen_address(c.listen);
    } catch (const std::invalid_argument& e) {
        fail(source, *t.get("listen"), "server.listen", e.what());
    }
}

void parse_storage(const std::string& source, const toml::table& t, DaemonConfig& c) {
    reject_unknown(source, t, "storage.", {"path", "keep_raw_days", "keep_sessions_days"});
    c.storage_path = get_string(source, t, "storage.", "path", c.storage_path.string());
    c.keep_raw_days = get_days(source, t, "storage.", "keep_raw_days");
    c.keep_sessions_days = get_days(source, t, "storage.", "keep_sessions_days");
}

void parse_fleet(const std::string& source, const toml::table& t, FleetConfig& f) {
    reject_unknown(source, t, "fleet.",
                   {"url", "bench", "password_file", "sslmode", "sslrootcert", "sslcert", "sslkey",
                    "push_interval_ms", "retry_max_ms", "keep_sessions_days", "max_reply_mib",
                    "reply_timeout_s"});
    f.url = get_string(source, t, "fleet.", "url", "");
    f.bench = get_string(source, t, "fleet.", "bench", "");
    f.password_file = get_string(source, t, "fleet.", "password_file", "");
    f.sslmode = get_string(source, t, "fleet.", "sslmode", "");
    f.sslrootcert = get_string(source, t, "fleet.", "sslrootcert", "");
    f.sslcert = get_string(source, t, "fleet.", "sslcert", "");
    f.sslkey = get_string(source, t, "fleet.", "sslkey", "");
    const std::int64_t interval = get_int(source, t, "fleet.", "push_interval_ms", 2000);
    const std::int64_t retry = get_int(source, t, "fleet.", "retry_max_ms", 300000);
    if (interval <= 0 || interval > 3'600'000 || retry < interval || retry > 86'400'000) {
        fail(source, t, "fleet.push_interval_ms",
             "push_interval_ms must be 1..3600000 and retry_max_ms not below it (at most a "
             "day)");
    }
    f.keep_sessions_days = get_days(source, t, "fleet.", "keep_sessions_days");
    f.max_reply_mib = get_int(source, t, "fleet.", "max_reply_mib", 256);
    if (f.max_reply_mib < 1 || f.max_reply_mib > 4096)
        fail(source, t, "fleet.max_reply_mib", "max_reply_mib must be 1..4096");
    const std::int64_t timeout = get_int(source, t, "fleet.", "reply_timeout_s", 120);
    if (timeout < 1 || timeout > 3600)
        fail(source, t, "fleet.reply_timeout_s", "reply_timeout_s must be 1..3600");
    f.reply_timeout = std::chrono::seconds(timeout);
    f.push_interval = std::chrono::milliseconds(interval);
    f.retry_max = std::chrono::milliseconds(retry);
    if (t.get("url")) {
        try {
            check_fleet_url_text(f.url);
        } catch (const std::invalid_argument& e) {
            fail(source, *t.get("url"), "fleet.url", e.what());
        }
    }
    if (!f.bench.empty()) {
        try {
            validate_board_name(f.bench);
        } catch (const BoardFieldError& e) {
            fail(source, *t.get("bench"), "fleet.bench", e.what());
        }
    }
}

void parse_logging(const std::string& source, const toml::table& t, DaemonConfig& c) {
    reject_unknown(source, t, "logging.", {"level"});
    c.log_level = get_string(source, t, "logging.", "level", c.log_level);
    try {
        check_log_level(c.log_level);
    } catch (const ConfigError& e) {
        fail(source, *t.get("level"), "logging.level", e.what());
    }
}

void parse_links(const std::string& source, const toml::table& t, DaemonConfig& c) {
    reject_unknown(source, t, "links.", {"reconnect_min_ms", "reconnect_max_ms"});
    const std::int64_t min_ms = get_int(source, t, "links.", "reconnect_min_ms", 100);
    const std::int64_t max_ms = get_int(source, t, "links.", "reconnect_max_ms", 5000);
    // An hour at most: larger values overflowed the timers' arithmetic.
    if (min_ms <= 0 || max_ms > 3'600'000 || max_ms < min_ms) {
        fail(source, t, "links.reconnect_min_ms",
             "reconnect_min_ms and reconnect_max_ms must be 1..3600000, min not above max");
    }
    c.reconnect_min = std::chrono::milliseconds(min_ms);
    c.reconnect_max = std::chrono::milliseconds(max_ms);
}

void parse_sources(const std::string& source, const toml::table& t, DaemonConfig& c) {
    reject_unknown(source, t, "sources.", {"roots"});
    const toml::node* roots = t.get("roots");
    if (!roots) return;
    const toml::array* list = roots->as_array();
    if (!list) fail(source, *roots, "sources.roots", "must be an array of folder paths");
    for (const toml::node& root : *list) {
        const auto* path = root.as_string();
        if (!path || path->get().empty())
            fail(source, root, "sources.roots", "must be an array of folder paths");
        c.source_roots.emplace_back(path->get());
    }
}

void parse_boards(const std::string& source, const toml::node& node, DaemonConfig& c) {
    const toml::array* boards = node.as_array();
    if (!boards) fail(source, node, "boards", "must be an array of tables ([[boards]])");
    std::set<std::string> names;
    for (std::size_t i = 0; i < boards->size(); ++i) {
        const toml::node& entry = *boards->get(i);
        const toml::table* t = entry.as_table();
        if (!t) fail(source, entry, "boards[" + std::to_string(i) + "]", "must be a table");
        BoardConfig b = parse_board(source, *t, i);
        if (!names.insert(b.name).second)
            fail(source, entry, "boards[" + std::to_string(i) + "].name",
                 "duplicate board name '" + b.name + "'");
        c.boards.push_back(std::move(b));
    }
}

}  // namespace

DaemonConfig parse_config(const std::string& text, const std::string& source) {
    toml::table root;
    try {
        root = toml::parse(text, source);
    } catch (const toml::parse_error& e) {
        throw ConfigError(source + ":" + std::to_string(e.source().begin.line) + ": " +
                          std::string(e.description()));
    }
    DaemonConfig c;
    c.source = source;
    reject_unknown(source, root, "",
                   {"server", "storage", "logging", "links", "boards", "fleet", "sources"});
    if (const toml::table* t = section(source, root, "server")) parse_server(source, *t, c);
    if (const toml::table* t = section(source, root, "storage")) parse_storage(source, *t, c);
    if (const toml::table* t = section(source, root, "fleet")) parse_fleet(source, *t, c.fleet);
    if (const toml::table* t = section(source, root, "logging")) parse_logging(source, *t, c);
    if (const toml::table* t = section(source, root, "links")) parse_links(source, *t, c);
    if (const toml::table* t = section(source, root, "sources")) parse_sources(source, *t, c);
    if (const toml::node* node = root.get("boards")) parse_boards(source, *node, c);
    return c;
}

DaemonConfig load_config(const std::filesystem::path& path) {
    std::ifstream f(path);
    if (!f) throw ConfigError(path.string() + ": cannot read the configuration file");
    std::stringstream text;
    text << f.rdbuf();
    return parse_config(text.str(), path.string());
}

void check_log_level(const std::string& level) {
    static const std::set<std::string> kLevels = {"trace", "debug", "info", "warn", "error"};
    if (!kLevels.count(level))
        throw ConfigError("log level '" + printable(level) +
                          "': must be trace, debug, info, warn or error");
}

void check_fleet_url_text(const std::string& url) {
    const bool scheme = url.rfind("postgresql://", 0) == 0 || url.rfind("postgres://", 0) == 0;
    if (!scheme) throw std::invalid_argument("must be a postgresql:// URL");
    // The authority's user info ("user:password@") or a password= parameter: libpq would take
    // either, and the configuration would then hold a secret.
    const std::string rest = url.substr(url.find("://") + 3);
    const std::string authority = rest.substr(0, rest.find_first_of("/?"));
    const auto at = authority.rfind('@');
    const bool in_userinfo =
        at != std::string::npos && authority.substr(0, at).find(':') != std::string::npos;
    const auto query = rest.find('?');
    const bool in_query = query != std::string::npos &&
                          ("&" + rest.substr(query + 1)).find("&password=") != std::string::npos;
    if (in_userinfo || in_query) {
        throw std::invalid_argument(
            "holds a password: put it in a file named by fleet.password_file (or use PGPASSFILE "
            "or PGPASSWORD) and remove it from the URL");
    }
}

void make_paths_absolute(DaemonConfig& config) {
    const auto absolute = [](std::filesystem::path& path) {
        if (!path.empty()) path = std::filesystem::absolute(path).lexically_normal();
    };
    absolute(config.storage_path);
    absolute(config.token_file);
    absolute(config.web_root);
    absolute(config.fleet.password_file);
    for (std::filesystem::path& root : config.source_roots) absolute(root);
    for (BoardConfig& board : config.boards) {
        std::filesystem::path elf = board.elf;
        absolute(elf);
        board.elf = elf.string();
    }
}

DaemonConfig embedded_default_config() {
    DaemonConfig c;
    c.source = "embedded default";
    const char* models[] = {"blinky", "conflation", "deterministic"};
    for (const char* model : models) {
        BoardConfig b;
        b.name = std::string("sim-") + model;
        b.link = std::string("sim://") + model + "?rate=20000";
        b.tags = {"simulated"};
        if (std::string(model) == "deterministic") {  // one board speaks the framed protocol
            b.protocol = "framed";
            b.addr_bytes = default_addr_bytes(b.protocol);
            b.link += "&arc_cache=32";
        }
        c.boards.push_back(b);
    }
    return c;
}

}  // namespace rackprof::daemon::config
