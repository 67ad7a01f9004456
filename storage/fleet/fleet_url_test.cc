#include "storage/fleet/fleet_url.h"

#include <doctest/doctest.h>

#include <fstream>
#include <stdexcept>

#include "storage/temp_db_test.h"

namespace rackprof::storage::fleet {

TEST_CASE("fleet URL: passwords refused, logs show no secret, settings passed to libpq") {
    CHECK_NOTHROW(check_fleet_url("postgresql://rackprof@db.lab:5432/fleet?sslmode=require"));
    CHECK_NOTHROW(check_fleet_url("postgresql:///postgres?host=/tmp/x&port=5000&user=r"));
    CHECK_THROWS_AS(check_fleet_url("postgresql://rackprof:s3cret@db.lab/fleet"),
                    std::invalid_argument);
    CHECK_THROWS_AS(check_fleet_url("postgresql://db.lab/fleet?password=s3cret"),
                    std::invalid_argument);
    CHECK_THROWS_AS(check_fleet_url("host=db.lab"), std::invalid_argument);
    try {
        check_fleet_url("postgresql://rackprof:s3cret@db.lab/fleet");
    } catch (const std::invalid_argument& e) {
        CHECK(std::string(e.what()).find("s3cret") == std::string::npos);
    }

    CHECK(redacted_url("postgresql://rackprof:s3cret@db.lab:5433/fleet?sslmode=require") ==
          "postgresql://rackprof@db.lab:5433/fleet?sslmode=require");
    CHECK(redacted_url("postgresql://db.lab/fleet?password=s3cret").find("s3cret") ==
          std::string::npos);
    // What reaches a log reads as the URL carried it: a decoded ':' in the user is not a
    // password's separator, a line break in the host forges no log line.
    CHECK(redacted_url("postgresql://u%3Apw@db.lab/fleet") == "postgresql://u%3Apw@db.lab/fleet");
    CHECK(redacted_url("postgresql://db%0Aforged%1B%5B31m/fleet") ==
          "postgresql://db%0Aforged%1B%5B31m/fleet");
    CHECK(redacted_url("postgresql://[::1]:5433/fleet") == "postgresql://[::1]:5433/fleet");
    // libpq quotes the bad token of a malformed URL: the quoted part never reaches the error.
    for (const char* malformed : {"postgresql://u:s3cret%zz@db.lab/fleet",
                                  "postgresql://u@db.lab/fleet?password=s3cret%zz"}) {
        CAPTURE(malformed);
        try {
            check_fleet_url(malformed);
            FAIL("a malformed URL was accepted");
        } catch (const std::invalid_argument& e) {
            const std::string what = e.what();
            CHECK(what.find("s3cret") == std::string::npos);
            CHECK(what.find('\n') == std::string::npos);
        }
    }

    FleetConnection c;
    c.url = "postgresql://rackprof@db.lab/fleet";
    c.sslmode = "verify-full";
    c.sslrootcert = "/etc/ca.pem";
    storage::TempDb file;  // a path under the temp dir, removed at the end
    c.password_file = file.path;
    std::ofstream(c.password_file) << "pw-from-file\n";
    const auto parameters = connection_parameters(c);
    const auto value = [&](const std::string& key) {
        for (const auto& [k, v] : parameters) {
            if (k == key) return v;
        }
        return std::string("(none)");
    };
    CHECK(value("dbname") == c.url);
    CHECK(value("password") == "pw-from-file");
    CHECK(value("sslmode") == "verify-full");
    CHECK(value("sslrootcert") == "/etc/ca.pem");
    CHECK(value("sslkey") == "(none)");
    c.password_file = "/nonexistent/fleet-password";
    CHECK_THROWS_AS(connection_parameters(c), std::runtime_error);
}

}  // namespace rackprof::storage::fleet
