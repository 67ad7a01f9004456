#include "storage/fleet/pg.h"

#include <cstdlib>

namespace rackprof::storage::fleet {

std::int64_t PgResult::integer(int row, int column) const {
    return std::strtoll(PQgetvalue(result_.get(), row, column), nullptr, 10);
}

std::string PgResult::bytes(int row, int column) const {
    std::size_t length = 0;
    unsigned char* raw = PQunescapeBytea(
        reinterpret_cast<const unsigned char*>(PQgetvalue(result_.get(), row, column)), &length);
    if (!raw) throw PgError("postgresql: cannot decode a bytea value");
    std::string out(reinterpret_cast<const char*>(raw), length);
    PQfreemem(raw);
    return out;
}

PgConnection::PgConnection(const std::vector<std::pair<std::string, std::string>>& parameters) {
    std::vector<const char*> keywords, values;
    for (const auto& [keyword, value] : parameters) {
        keywords.push_back(keyword.c_str());
        values.push_back(value.c_str());
    }
    keywords.push_back(nullptr);
    values.push_back(nullptr);
    conn_ = PQconnectdbParams(keywords.data(), values.data(), 1);
    if (!conn_) throw PgError("postgresql: out of memory");
    if (PQstatus(conn_) != CONNECTION_OK) {
        std::string message = PQerrorMessage(conn_);
        while (!message.empty() && (message.back() == '\n' || message.back() == ' '))
            message.pop_back();
        PQfinish(conn_);
        conn_ = nullptr;
        throw PgError("postgresql: cannot connect: " + message);
    }
    // Notices (e.g. "relation exists, skipping") are not errors: keep them out of stderr.
    PQsetNoticeProcessor(
        conn_, [](void*, const char*) {}, nullptr);
}

PgConnection::~PgConnection() {
    if (conn_) PQfinish(conn_);
}

void PgConnection::fail(const std::string& what) const {
    std::string message = PQerrorMessage(conn_);
    while (!message.empty() && (message.back() == '\n' || message.back() == ' '))
        message.pop_back();
    throw PgError("postgresql: " + what + ": " + message);
}

void PgConnection::exec(const std::string& sql) {
    // PQexec: a script of several statements (the schema's) runs as one.
    PgResult result(PQexec(conn_, sql.c_str()));
    if (PQresultStatus(result.raw()) != PGRES_COMMAND_OK &&
        PQresultStatus(result.raw()) != PGRES_TUPLES_OK)
        fail("statement failed");
}

PgResult PgConnection::query(const std::string& sql, const std::vector<PgParam>& params) {
    std::vector<const char*> values;
    values.reserve(params.size());
    for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
    PGresult* raw = PQexecParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr,
                                 values.data(), nullptr, nullptr, 0);
    PgResult result(raw);
    const auto status = raw ? PQresultStatus(raw) : PGRES_FATAL_ERROR;
    // A lost connection is not retried here: the caller decides (the pusher backs off).
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) fail("query failed");
    return result;
}

PgTransaction::~PgTransaction() {
    if (done_) return;
    try {
        c_.exec("ROLLBACK");
    } catch (const PgError&) {
        // The connection is gone: the server rolls back itself.
    }
}

void PgTransaction::commit() {
    c_.exec("COMMIT");
    done_ = true;
}

std::string pg_array(const std::vector<std::int64_t>& values) {
    std::string out = "{";
    for (std::size_t i = 0; i < values.size(); ++i) {
        if (i) out += ',';
        out += std::to_string(values[i]);
    }
    return out + "}";
}

std::string pg_bytea(const std::string& bytes) {
    static const char* const kHex = "0123456789abcdef";
    std::string out = "\\x";
    out.reserve(2 + 2 * bytes.size());
    for (unsigned char c : bytes) {
        out += kHex[c >> 4];
        out += kHex[c & 15];
    }
    return out;
}

}  // namespace rackprof::storage::fleet
