#include "storage/sqlite.h"

namespace rackprof::storage {

bool StorageError::is_storage_failure() const {
    switch (sqlite_code_ & 0xFF) {  // the primary code
        case SQLITE_FULL:
        case SQLITE_IOERR:
        case SQLITE_CANTOPEN:
        case SQLITE_READONLY:
        case SQLITE_NOMEM:
        case SQLITE_BUSY:
        case SQLITE_LOCKED:
        case SQLITE_PROTOCOL:
        case SQLITE_CORRUPT:
        case SQLITE_NOTADB:
        case SQLITE_NOLFS:
            return true;
        default:
            return false;
    }
}

bool StorageError::is_damage() const {
    const int primary = sqlite_code_ & 0xFF;
    return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB;
}

Database::Database(const std::filesystem::path& path, Mode mode) : path_(path) {
    const int flags =
        mode == Mode::kReadOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    if (const int rc = sqlite3_open_v2(path.c_str(), &db_, flags | SQLITE_OPEN_NOMUTEX, nullptr);
        rc != SQLITE_OK) {
        const std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
        sqlite3_close(db_);
        db_ = nullptr;
        throw StorageError("cannot open database " + path.string() + ": " + why, rc);
    }
    sqlite3_busy_timeout(db_, 5000);
    sqlite3_extended_result_codes(db_, 1);
    if (mode == Mode::kReadWrite) {
        exec("PRAGMA page_size=16384");  // for new files: blobs of kilobytes; no-op otherwise
        exec("PRAGMA journal_mode=WAL");
        exec("PRAGMA synchronous=NORMAL");  // WAL: durable at each checkpoint, never corrupt
        // A checkpoint every 4 MiB of WAL (256 pages), not SQLite's 16 MiB: the writer does it
        // while capture goes on, so a stop does not have to copy up to 16 MiB back first (a
        // checkpoint is also when NORMAL commits become durable).
        exec("PRAGMA wal_autocheckpoint=256");
    }
    exec("PRAGMA foreign_keys=ON");
}

Database::~Database() {
    sqlite3_close_v2(db_);
}

void Database::exec(const char* sql) {
    char* message = nullptr;
    if (const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &message); rc != SQLITE_OK) {
        const std::string why = message ? message : sqlite3_errmsg(db_);
        sqlite3_free(message);
        throw StorageError(
            path_.string() + ": " + why + " (in: " + std::string(sql).substr(0, 80) + ")", rc);
    }
}

Statement Database::prepare(const char* sql) {
    return Statement(db_, sql);
}

void Database::fail(const std::string& what) const {
    throw StorageError(path_.string() + ": " + what + ": " + sqlite3_errmsg(db_),
                       sqlite3_extended_errcode(db_));
}

Statement::Statement(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr) != SQLITE_OK) {
        fail(std::string("cannot prepare ") + sql);
    }
}

Statement::~Statement() {
    sqlite3_finalize(stmt_);
}

Statement::Statement(Statement&& other) noexcept : db_(other.db_), stmt_(other.stmt_) {
    other.stmt_ = nullptr;
}

void Statement::fail(const std::string& what) const {
    throw StorageError(what + ": " + sqlite3_errmsg(db_), sqlite3_extended_errcode(db_));
}

Statement& Statement::bind(int index, std::int64_t value) {
    if (sqlite3_bind_int64(stmt_, index, value) != SQLITE_OK) fail("bind");
    return *this;
}

Statement& Statement::bind(int index, double value) {
    if (sqlite3_bind_double(stmt_, index, value) != SQLITE_OK) fail("bind");
    return *this;
}

Statement& Statement::bind(int index, std::string_view value) {
    if (sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()),
                          SQLITE_TRANSIENT) != SQLITE_OK) {
        fail("bind");
    }
    return *this;
}

Statement& Statement::bind_blob(int index, std::span<const std::uint8_t> value) {
    // SQLITE_STATIC: callers keep the bytes alive until the statement has run.
    if (sqlite3_bind_blob64(stmt_, index, value.data(), value.size(), SQLITE_STATIC) != SQLITE_OK)
        fail("bind");
    return *this;
}

Statement& Statement::bind_null(int index) {
    if (sqlite3_bind_null(stmt_, index) != SQLITE_OK) fail("bind");
    return *this;
}

bool Statement::step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    const std::string what = std::string("step ") + sqlite3_sql(stmt_) + ": " + sqlite3_errmsg(db_);
    sqlite3_reset(stmt_);  // ready for reuse after the failure
    throw StorageError(what, rc);
}

void Statement::run() {
    while (step()) {
    }
    reset();
}

void Statement::reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
}

std::string Statement::column_text(int index) const {
    const auto* text = sqlite3_column_text(stmt_, index);
    return text ? std::string(reinterpret_cast<const char*>(text),
                              static_cast<std::size_t>(sqlite3_column_bytes(stmt_, index)))
                : std::string();
}

std::span<const std::uint8_t> Statement::column_blob(int index) const {
    const void* data = sqlite3_column_blob(stmt_, index);
    const int size = sqlite3_column_bytes(stmt_, index);
    return {static_cast<const std::uint8_t*>(data), static_cast<std::size_t>(size)};
}

Transaction::Transaction(Database& db) : db_(db) {
    db_.exec("BEGIN IMMEDIATE");
}

Transaction::~Transaction() {
    if (!done_) {
        try {
            db_.exec("ROLLBACK");
        } catch (const StorageError&) {
            // Nothing more to do: the connection reports the failure on its next use.
        }
    }
}

void Transaction::commit() {
    db_.exec("COMMIT");
    done_ = true;
}

}  // namespace rackprof::storage
