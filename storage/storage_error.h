// What every storage failure throws: SQLite's errors, a database from a newer rackprof, a
// corrupt record blob.
#pragma once

#include <stdexcept>
#include <string>

namespace rackprof::storage {

class StorageError : public std::runtime_error {
  public:
    explicit StorageError(const std::string& what, int sqlite_code = 0)
        : std::runtime_error(what), sqlite_code_(sqlite_code) {}
    // SQLite's extended result code; 0 when the failure is not SQLite's.
    int sqlite_code() const { return sqlite_code_; }
    // The database as a whole cannot take writes now (disk full, I/O error, read-only, locked,
    // damaged): nothing the operation itself did wrong, so it may succeed later.
    bool is_storage_failure() const;
    // The file's contents are not a sound database (SQLITE_CORRUPT, SQLITE_NOTADB), as opposed
    // to a failure to read or write it (an I/O error, a full disk, no memory, a lock).
    bool is_damage() const;

  private:
    int sqlite_code_;
};

}  // namespace rackprof::storage
