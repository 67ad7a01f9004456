#include "storage/fleet/pg.h"

#include <poll.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <charconv>
#include <memory>

namespace rackprof::storage::fleet {

namespace {

std::string trimmed(std::string message) {
    while (!message.empty() && (message.back() == '\n' || message.back() == ' '))
        message.pop_back();
    return message;
}

using ResultPtr = std::unique_ptr<PGresult, void (*)(PGresult*)>;

}  // namespace

std::size_t PgResult::cell(int row, int column) const {
    if (row < 0 || row >= rows_ || column < 0 || column >= columns_) {
        throw PgReplyError("postgresql: a reply of " + std::to_string(rows_) + " rows and " +
                           std::to_string(columns_) + " columns has no row " + std::to_string(row) +
                           ", column " + std::to_string(column));
    }
    return static_cast<std::size_t>(row) * static_cast<std::size_t>(columns_) +
           static_cast<std::size_t>(column);
}

std::string_view PgResult::view(int row, int column) const {
    const std::size_t i = cell(row, column);
    const std::size_t begin = i == 0 ? 0 : ends_[i - 1];
    return std::string_view(data_).substr(begin, ends_[i] - begin);
}

std::int64_t PgResult::integer(int row, int column) const {
    if (is_null(row, column)) return 0;
    const std::string_view text = view(row, column);
    std::int64_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size() || text.empty()) {
        throw PgReplyError("postgresql: a reply holds \"" + std::string(text.substr(0, 40)) +
                           "\" where an integer belongs");
    }
    return value;
}

std::string PgResult::bytes(int row, int column) const {
    const std::string text = this->text(row, column);
    std::size_t length = 0;
    unsigned char* raw =
        PQunescapeBytea(reinterpret_cast<const unsigned char*>(text.c_str()), &length);
    if (!raw) throw PgReplyError("postgresql: cannot decode a bytea value");
    std::string out(reinterpret_cast<const char*>(raw), length);
    PQfreemem(raw);
    return out;
}

std::string PgResult::add_row(const PGresult* row) {
    const int width = PQnfields(row);
    if (rows_ == 0) columns_ = width;
    if (width != columns_) {
        return "a reply's rows have " + std::to_string(columns_) + " and " + std::to_string(width) +
               " columns";
    }
    for (int c = 0; c < width; ++c) {
        const bool null = PQgetisnull(row, 0, c);
        if (!null)
            data_.append(PQgetvalue(row, 0, c), static_cast<std::size_t>(PQgetlength(row, 0, c)));
        ends_.push_back(data_.size());
        nulls_.push_back(null);
    }
    ++rows_;
    return {};
}

PgConnection::PgConnection(const std::vector<std::pair<std::string, std::string>>& parameters,
                           PgLimits limits)
    : limits_(limits) {
    std::vector<const char*> keywords, values;
    for (const auto& [keyword, value] : parameters) {
        keywords.push_back(keyword.c_str());
        values.push_back(value.c_str());
    }
    keywords.push_back(nullptr);
    values.push_back(nullptr);
    conn_ = PQconnectdbParams(keywords.data(), values.data(), 1);
    if (!conn_) throw PgConnectError("postgresql: out of memory");
    if (PQstatus(conn_) != CONNECTION_OK) {
        const std::string message = trimmed(PQerrorMessage(conn_));
        PQfinish(conn_);
        conn_ = nullptr;
        throw PgConnectError("postgresql: cannot connect: " + message);
    }
    // Notices (e.g. "relation exists, skipping") are not errors: keep them out of stderr.
    PQsetNoticeProcessor(
        conn_, [](void*, const char*) {}, nullptr);
}

PgConnection::~PgConnection() {
    if (conn_) PQfinish(conn_);
}

void PgConnection::fail(const std::string& what) const {
    if (!conn_) throw PgConnectError("postgresql: " + what + ": the connection was closed");
    const std::string message = "postgresql: " + what + ": " + trimmed(PQerrorMessage(conn_));
    // A connection lost is an outage; an error on a sound one is the server's answer.
    if (PQstatus(conn_) != CONNECTION_OK) throw PgConnectError(message);
    throw PgError(message);
}

void PgConnection::refuse(const std::string& why) {
    // Mid-reply: the rest of it would be read as the next query's answer.
    PQfinish(conn_);
    conn_ = nullptr;
    throw PgReplyError("postgresql: " + why + " (the connection is closed)");
}

// Waits for the socket, then reads what arrived. `received` counts the bytes read off the
// socket: libpq buffers a whole message before handing it over, so one huge row must be
// bounded here, before it is a row.
void PgConnection::wait_for_input(std::chrono::steady_clock::time_point deadline,
                                  std::size_t& received) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{PQsocket(conn_), POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) == 0) {
        refuse("no complete reply within " + std::to_string(limits_.reply_timeout.count() / 1000) +
               " s");
    }
    int before = 0, after = 0;
    ::ioctl(p.fd, FIONREAD, &before);
    if (!PQconsumeInput(conn_)) fail("query failed");
    ::ioctl(p.fd, FIONREAD, &after);
    received += static_cast<std::size_t>(std::max(0, before - after));
    if (received > 2 * limits_.max_reply_bytes) {
        refuse("a reply larger than " + std::to_string(limits_.max_reply_bytes >> 20) + " MiB");
    }
}

PgResult PgConnection::read_reply() {
    PQsetSingleRowMode(conn_);
    const auto deadline = std::chrono::steady_clock::now() + limits_.reply_timeout;
    std::size_t received = 0;
    PgResult out;
    std::string error;
    while (true) {
        while (PQisBusy(conn_)) wait_for_input(deadline, received);
        const ResultPtr r(PQgetResult(conn_), &PQclear);
        if (!r) break;
        switch (PQresultStatus(r.get())) {
            case PGRES_SINGLE_TUPLE:
                if (!error.empty()) break;
                if (const std::string wrong = out.add_row(r.get()); !wrong.empty()) refuse(wrong);
                if (out.size_bytes() > limits_.max_reply_bytes) {
                    refuse("a reply larger than " + std::to_string(limits_.max_reply_bytes >> 20) +
                           " MiB");
                }
                break;
            case PGRES_TUPLES_OK:  // the end of a statement's rows (its width, when none)
                if (out.rows_ == 0) out.columns_ = PQnfields(r.get());
                break;
            case PGRES_COMMAND_OK:
            case PGRES_EMPTY_QUERY:
                break;
            default:  // read on to the reply's end: the connection stays usable
                if (error.empty()) error = trimmed(PQresultErrorMessage(r.get()));
                if (error.empty()) error = "an unexpected reply";
        }
    }
    if (!error.empty()) throw PgError("postgresql: query failed: " + error);
    return out;
}

void PgConnection::exec(const std::string& sql) {
    if (!conn_ || !PQsendQuery(conn_, sql.c_str())) fail("statement failed");
    read_reply();
}

PgResult PgConnection::query(const std::string& sql, const std::vector<PgParam>& params) {
    std::vector<const char*> values;
    values.reserve(params.size());
    for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
    // A lost connection is not retried here: the caller decides (the pusher backs off).
    if (!conn_ || !PQsendQueryParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr,
                                     values.data(), nullptr, nullptr, 0))
        fail("query failed");
    return read_reply();
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
