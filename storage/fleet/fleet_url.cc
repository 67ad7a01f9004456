#include "storage/fleet/fleet_url.h"

#include <libpq-fe.h>

#include <cctype>
#include <fstream>
#include <memory>
#include <stdexcept>

namespace rackprof::storage::fleet {
namespace {

using Options = std::unique_ptr<PQconninfoOption, void (*)(PQconninfoOption*)>;

// libpq's reason with what it quotes of the URL taken out ("invalid percent-encoded token:
// \"pw%zz\"" quotes the password), and no line breaks: it goes to logs and terminals.
std::string without_quotes(const std::string& why) {
    std::string out;
    bool quoted = false;
    for (const char c : why) {
        if (c == '"') {
            out += quoted ? "\"" : "\"...";
            quoted = !quoted;
        } else if (!quoted) {
            out += (c == '\n' || c == '\r') ? ' ' : c;
        }
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out;
}

// A URL part as the URL would carry it: anything but letters, digits and "-._~/" (and ':' in
// a host: IPv6) percent-encoded, so a decoded ':' in a user name or a line break in a host
// reads as what it was, never as a password or a forged log line.
std::string url_escaped(const std::string& part, bool host) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    std::string out;
    for (const unsigned char c : part) {
        if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/' ||
            (host && c == ':')) {
            out += static_cast<char>(c);
        } else {
            out += '%';
            out += kHex[c >> 4];
            out += kHex[c & 15];
        }
    }
    return out;
}

// The URL's settings as libpq reads them; throws std::invalid_argument with libpq's reason.
Options parse(const std::string& url) {
    if (url.rfind("postgresql://", 0) != 0 && url.rfind("postgres://", 0) != 0)
        throw std::invalid_argument("the fleet URL must start with postgresql://");
    char* error = nullptr;
    PQconninfoOption* options = PQconninfoParse(url.c_str(), &error);
    if (!options) {
        std::string why = error ? error : "out of memory";
        if (error) PQfreemem(error);
        throw std::invalid_argument("the fleet URL is not a PostgreSQL connection URI: " +
                                    without_quotes(why));
    }
    return Options(options, &PQconninfoFree);
}

std::string value_of(const Options& options, const std::string& keyword) {
    for (const PQconninfoOption* o = options.get(); o->keyword; ++o) {
        if (keyword == o->keyword && o->val) return o->val;
    }
    return "";
}

}  // namespace

void check_fleet_url(const std::string& url) {
    const Options options = parse(url);
    if (!value_of(options, "password").empty()) {
        throw std::invalid_argument(
            "the fleet URL carries a password: remove it and put it in a file named by "
            "[fleet] password_file (or PGPASSFILE, or PGPASSWORD in the environment)");
    }
}

std::string redacted_url(const std::string& url) {
    try {
        const Options options = parse(url);
        const std::string user = url_escaped(value_of(options, "user"), false);
        const std::string host = url_escaped(value_of(options, "host"), true);
        const std::string port = url_escaped(value_of(options, "port"), false);
        std::string out = "postgresql://";
        if (!user.empty()) out += user + "@";
        const bool bracketed = host.find_first_of("/:") != std::string::npos;  // socket, IPv6
        out += bracketed ? "[" + host + "]" : host;
        if (!port.empty()) out += ":" + port;
        out += "/" + url_escaped(value_of(options, "dbname"), false);
        const std::string sslmode = url_escaped(value_of(options, "sslmode"), false);
        if (!sslmode.empty()) out += "?sslmode=" + sslmode;
        return out;
    } catch (const std::invalid_argument&) {
        return "postgresql://(unparsable URL)";
    }
}

std::vector<std::pair<std::string, std::string>> connection_parameters(
    const FleetConnection& connection) {
    std::vector<std::pair<std::string, std::string>> out = {{"dbname", connection.url}};
    if (!connection.password_file.empty()) {
        std::ifstream in(connection.password_file);
        std::string password;
        if (!in || !std::getline(in, password))
            throw std::runtime_error("fleet password_file: cannot read " +
                                     connection.password_file.string());
        if (!password.empty() && password.back() == '\r') password.pop_back();
        out.emplace_back("password", password);
    }
    const std::pair<const char*, const std::string*> tls[] = {
        {"sslmode", &connection.sslmode},
        {"sslrootcert", &connection.sslrootcert},
        {"sslcert", &connection.sslcert},
        {"sslkey", &connection.sslkey}};
    for (const auto& [keyword, value] : tls) {
        if (!value->empty()) out.emplace_back(keyword, *value);
    }
    out.emplace_back("application_name", "rackprof");
    out.emplace_back("connect_timeout", "5");
    return out;
}

}  // namespace rackprof::storage::fleet
