#include "storage/fleet/fleet_url.h"

#include <libpq-fe.h>

#include <fstream>
#include <memory>
#include <stdexcept>

namespace rackprof::storage::fleet {
namespace {

using Options = std::unique_ptr<PQconninfoOption, void (*)(PQconninfoOption*)>;

// The URL's settings as libpq reads them; throws std::invalid_argument with libpq's reason.
Options parse(const std::string& url) {
    if (url.rfind("postgresql://", 0) != 0 && url.rfind("postgres://", 0) != 0)
        throw std::invalid_argument("the fleet URL must start with postgresql://");
    char* error = nullptr;
    PQconninfoOption* options = PQconninfoParse(url.c_str(), &error);
    if (!options) {
        std::string why = error ? error : "out of memory";
        if (error) PQfreemem(error);
        while (!why.empty() && why.back() == '\n') why.pop_back();
        // libpq's message does not repeat the URL, so it cannot leak a password.
        throw std::invalid_argument("the fleet URL is not a PostgreSQL connection URI: " + why);
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
        const std::string user = value_of(options, "user");
        const std::string host = value_of(options, "host");
        const std::string port = value_of(options, "port");
        std::string out = "postgresql://";
        if (!user.empty()) out += user + "@";
        out += host.find('/') != std::string::npos ? "[" + host + "]" : host;
        if (!port.empty()) out += ":" + port;
        out += "/" + value_of(options, "dbname");
        const std::string sslmode = value_of(options, "sslmode");
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
