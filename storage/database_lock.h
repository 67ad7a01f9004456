// One daemon per database: `DatabaseLock` holds an exclusive lock on `<database>.lock` for as
// long as it lives. `serve` takes it before it changes anything (the database, the firmware
// folder), so a second daemon started on the same file leaves the first one's sessions alone.
#pragma once

#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>

namespace rackprof::storage {

// Another process holds the database's lock; `holder_pid` is the pid it wrote, when readable.
class DatabaseLocked : public std::runtime_error {
  public:
    DatabaseLocked(const std::string& what, std::optional<long> holder_pid)
        : std::runtime_error(what), holder_pid_(holder_pid) {}
    std::optional<long> holder_pid() const { return holder_pid_; }

  private:
    std::optional<long> holder_pid_;
};

// An flock(2) on a file beside the database, so the kernel releases it when the holder dies
// (kill -9 leaves no stale lock), and the holder's pid written in it for the message.
class DatabaseLock {
  public:
    // Takes the lock or throws DatabaseLocked; a lock file it cannot create throws
    // std::system_error.
    explicit DatabaseLock(const std::filesystem::path& database);
    ~DatabaseLock();
    DatabaseLock(const DatabaseLock&) = delete;
    DatabaseLock& operator=(const DatabaseLock&) = delete;

    const std::filesystem::path& path() const { return path_; }

  private:
    std::filesystem::path path_;
    int fd_ = -1;
};

// The lock file of a database.
std::filesystem::path lock_path_of(const std::filesystem::path& database);

// The pid of the process holding the database's lock, or nullopt when nobody holds it (or the
// holder's pid is unreadable). Takes nothing.
std::optional<long> database_lock_holder(const std::filesystem::path& database);

}  // namespace rackprof::storage
