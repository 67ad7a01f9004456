// A small RAII wrapper over the SQLite C API: a connection, prepared statements, and
// transactions. Every failure throws StorageError with SQLite's message.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "storage/storage_error.h"

namespace rackprof::storage {

class Statement;

class Database {
  public:
    enum class Mode { kReadWrite, kReadOnly };
    // Opens (creating in read-write mode) the database; WAL, foreign keys, a busy timeout.
    Database(const std::filesystem::path& path, Mode mode = Mode::kReadWrite);
    ~Database();
    Database(const Database&) = delete;
    Database& operator=(const Database&) = delete;

    void exec(const char* sql);
    Statement prepare(const char* sql);
    std::int64_t last_insert_id() const { return sqlite3_last_insert_rowid(db_); }
    int changes() const { return sqlite3_changes(db_); }
    sqlite3* handle() const { return db_; }
    const std::filesystem::path& path() const { return path_; }

  private:
    [[noreturn]] void fail(const std::string& what) const;

    sqlite3* db_ = nullptr;
    std::filesystem::path path_;
};

class Statement {
  public:
    Statement(sqlite3* db, const char* sql);
    ~Statement();
    Statement(Statement&& other) noexcept;
    Statement& operator=(Statement&&) = delete;
    Statement(const Statement&) = delete;

    // Binds are 1-based, like SQLite's.
    Statement& bind(int index, std::int64_t value);
    Statement& bind(int index, std::uint64_t value) {
        return bind(index, static_cast<std::int64_t>(value));
    }
    Statement& bind(int index, int value) { return bind(index, static_cast<std::int64_t>(value)); }
    Statement& bind(int index, double value);
    Statement& bind(int index, std::string_view value);
    Statement& bind(int index, const char* value) { return bind(index, std::string_view(value)); }
    Statement& bind(int index, const std::string& value) {
        return bind(index, std::string_view(value));
    }
    Statement& bind_blob(int index, std::span<const std::uint8_t> value);
    Statement& bind_null(int index);

    // Steps once: true while a row is available.
    bool step();
    // Steps to completion (for statements that return no rows) and resets for reuse.
    void run();
    void reset();

    std::int64_t column_int(int index) const { return sqlite3_column_int64(stmt_, index); }
    double column_double(int index) const { return sqlite3_column_double(stmt_, index); }
    bool column_is_null(int index) const {
        return sqlite3_column_type(stmt_, index) == SQLITE_NULL;
    }
    std::string column_text(int index) const;
    std::span<const std::uint8_t> column_blob(int index) const;

  private:
    [[noreturn]] void fail(const std::string& what) const;

    sqlite3* db_ = nullptr;
    sqlite3_stmt* stmt_ = nullptr;
};

// BEGIN IMMEDIATE ... COMMIT, rolled back if not committed.
class Transaction {
  public:
    explicit Transaction(Database& db);
    ~Transaction();
    Transaction(const Transaction&) = delete;
    Transaction& operator=(const Transaction&) = delete;
    void commit();

  private:
    Database& db_;
    bool done_ = false;
};

}  // namespace rackprof::storage
