// Where the fleet store is and how to reach it: the URL from the configuration or
// RACKPROF_FLEET_URL, the password from a file or the environment (never from the URL), TLS
// settings passed through to libpq, and the URL as logs may show it.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "storage/fleet/pg.h"

namespace rackprof::storage::fleet {

struct FleetConnection {
    std::string url;                      // postgresql://user@host:port/db?sslmode=…
    std::filesystem::path password_file;  // the password, first line; "": libpq's own (PGPASSWORD,
                                          // PGPASSFILE, ~/.pgpass)
    std::string sslmode;                  // "": libpq's default (or the URL's)
    std::string sslrootcert;
    std::string sslcert;
    std::string sslkey;
    PgLimits limits;  // what one reply may cost
};

// Throws std::invalid_argument when `url` is not a libpq connection URI or carries a password
// (credentials come from a file or the environment, never from a configuration).
void check_fleet_url(const std::string& url);

// The URL with any password removed and only what locates the server: for logs and errors.
std::string redacted_url(const std::string& url);

// libpq keyword/value pairs (the URL expanded as dbname, then the password read from the file
// and the TLS settings). Throws std::runtime_error when the password file cannot be read.
std::vector<std::pair<std::string, std::string>> connection_parameters(
    const FleetConnection& connection);

}  // namespace rackprof::storage::fleet
