// A small RAII wrapper over libpq's C API, as storage/sqlite.h is over SQLite's: a connection,
// results, parameterised statements (text format) and transactions. Every failure throws
// PgError with the server's message; the connection string is never part of a message.
#pragma once

#include <libpq-fe.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace rackprof::storage::fleet {

class PgError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

// One query's rows; values are text (libpq's text format).
class PgResult {
  public:
    explicit PgResult(PGresult* result) : result_(result, &PQclear) {}
    int rows() const { return PQntuples(result_.get()); }
    bool is_null(int row, int column) const { return PQgetisnull(result_.get(), row, column); }
    std::string text(int row, int column) const { return PQgetvalue(result_.get(), row, column); }
    std::int64_t integer(int row, int column) const;
    std::string bytes(int row, int column) const;  // a bytea column (hex form) decoded
    PGresult* raw() const { return result_.get(); }

  private:
    std::unique_ptr<PGresult, void (*)(PGresult*)> result_;
};

// A parameter: text, or SQL NULL.
using PgParam = std::optional<std::string>;

class PgConnection {
  public:
    // libpq's keyword/value pairs (fleet_url.h's connection_parameters); "dbname" may be a
    // URI, expanded. Throws PgError (whose message never holds the parameters).
    explicit PgConnection(const std::vector<std::pair<std::string, std::string>>& parameters);
    ~PgConnection();
    PgConnection(const PgConnection&) = delete;
    PgConnection& operator=(const PgConnection&) = delete;

    void exec(const std::string& sql);
    PgResult query(const std::string& sql, const std::vector<PgParam>& params = {});
    bool ok() const { return PQstatus(conn_) == CONNECTION_OK; }
    PGconn* handle() const { return conn_; }

  private:
    [[noreturn]] void fail(const std::string& what) const;
    PGconn* conn_ = nullptr;
};

// BEGIN on construction, ROLLBACK unless commit() was called.
class PgTransaction {
  public:
    explicit PgTransaction(PgConnection& c) : c_(c) { c_.exec("BEGIN"); }
    ~PgTransaction();
    PgTransaction(const PgTransaction&) = delete;
    PgTransaction& operator=(const PgTransaction&) = delete;
    void commit();

  private:
    PgConnection& c_;
    bool done_ = false;
};

// A bigint[] literal ("{1,2,3}") for unnest(): many rows in one statement.
std::string pg_array(const std::vector<std::int64_t>& values);
// bytea as a hex literal parameter ("\x0a1b…").
std::string pg_bytea(const std::string& bytes);

}  // namespace rackprof::storage::fleet
