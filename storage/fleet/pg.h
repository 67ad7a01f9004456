// A small RAII wrapper over libpq's C API, as storage/sqlite.h is over SQLite's: a connection,
// results, parameterised statements (text format) and transactions. Every failure throws
// PgError with the server's message; the connection string is never part of a message.
//
// The server is not trusted: a reply is read row by row (libpq's single-row mode) into a
// compact table, and one larger than PgLimits::max_reply_bytes, or not complete within
// PgLimits::reply_timeout, is refused with PgReplyError and the connection closed. Rows of
// unequal width, cells asked for that a reply lacks and integers that are not integers are
// PgReplyError too: a hostile or broken server costs a bounded amount of memory and time.
#pragma once

#include <libpq-fe.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rackprof::storage::fleet {

class PgError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

// The server could not be reached, or refused the login: an outage, worth trying again.
class PgConnectError : public PgError {
  public:
    using PgError::PgError;
};

// The server was reached and answered what rackprof cannot use (too much, too late, or not
// the shape asked for). The connection is closed when it is thrown mid-reply.
class PgReplyError : public PgError {
  public:
    using PgError::PgError;
};

struct PgLimits {
    std::size_t max_reply_bytes = std::size_t{256} << 20;  // one reply's cells, read or buffered
    std::chrono::milliseconds reply_timeout{120000};       // from sending to the reply's end
};

// One query's rows; values are text (libpq's text format).
class PgResult {
  public:
    int rows() const { return rows_; }
    int columns() const { return columns_; }
    bool is_null(int row, int column) const { return nulls_[cell(row, column)]; }
    std::string_view view(int row, int column) const;
    std::string text(int row, int column) const { return std::string(view(row, column)); }
    // NULL reads as 0; anything else must be a whole decimal integer (PgReplyError if not).
    std::int64_t integer(int row, int column) const;
    std::string bytes(int row, int column) const;  // a bytea column (hex form) decoded
    std::size_t size_bytes() const { return data_.size() + ends_.size() * sizeof(std::size_t); }

  private:
    friend class PgConnection;
    std::size_t cell(int row, int column) const;
    // One PGRES_SINGLE_TUPLE result appended; what is wrong with it, or "".
    std::string add_row(const PGresult* row);

    int rows_ = 0;
    int columns_ = 0;
    std::string data_;               // the cells' text, one after another
    std::vector<std::size_t> ends_;  // where each cell ends in data_ (row-major)
    std::vector<bool> nulls_;
};

// A parameter: text, or SQL NULL.
using PgParam = std::optional<std::string>;

class PgConnection {
  public:
    // libpq's keyword/value pairs (fleet_url.h's connection_parameters); "dbname" may be a
    // URI, expanded. Throws PgConnectError (whose message never holds the parameters).
    explicit PgConnection(const std::vector<std::pair<std::string, std::string>>& parameters,
                          PgLimits limits = {});
    ~PgConnection();
    PgConnection(const PgConnection&) = delete;
    PgConnection& operator=(const PgConnection&) = delete;

    // A script of several statements (the schema's) runs as one; any rows are discarded.
    void exec(const std::string& sql);
    PgResult query(const std::string& sql, const std::vector<PgParam>& params = {});
    bool ok() const { return conn_ && PQstatus(conn_) == CONNECTION_OK; }

  private:
    [[noreturn]] void fail(const std::string& what) const;
    [[noreturn]] void refuse(const std::string& why);  // closes the connection
    PgResult read_reply();
    void wait_for_input(std::chrono::steady_clock::time_point deadline, std::size_t& received);
    PGconn* conn_ = nullptr;
    PgLimits limits_;
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
