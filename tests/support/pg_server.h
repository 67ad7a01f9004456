// A PostgreSQL 15 server of a test's or a benchmark's own: initdb and pg_ctl in a folder it is
// given, a Unix socket there and no TCP. As root the server runs as `nobody` (postgres refuses
// root). Callers print a visible SKIP when installed() is false or ok() is false after start.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tests/support/process.h"

namespace rackprof::testing {

class PgServer {
  public:
    // Where PostgreSQL 15's initdb and pg_ctl are (Debian's postgresql-15).
    static std::filesystem::path bin_dir() { return "/usr/lib/postgresql/15/bin"; }
    static bool installed() { return std::filesystem::exists(bin_dir() / "initdb"); }

    // Creates a cluster in `dir`/pg and starts it.
    explicit PgServer(const std::filesystem::path& dir);
    // A started server, or null after printing "SKIP: <what>: ..." (not installed, or it
    // would not start): what a test case needing PostgreSQL begins with.
    static std::unique_ptr<PgServer> start_or_skip(const std::filesystem::path& dir,
                                                   std::string_view what);
    ~PgServer();
    PgServer(const PgServer&) = delete;
    PgServer& operator=(const PgServer&) = delete;

    bool ok() const { return ok_; }
    const std::string& why() const { return why_; }  // initdb's or pg_ctl's output on failure
    // A postgresql:// URL for the socket, user rackprof (trusted), database postgres.
    std::string url() const;
    // Started again on the same data, or stopped (fast shutdown).
    bool start();
    bool stop();
    // The server's log, for a failure's explanation.
    std::filesystem::path log() const { return dir_ / "server.log"; }

  private:
    CommandResult run_pg(std::vector<std::string> argv) const;
    std::filesystem::path dir_;
    std::string port_;
    bool ok_ = true;
    std::string why_;
};

}  // namespace rackprof::testing
