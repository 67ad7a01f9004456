#include "storage/database_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <string>
#include <system_error>

namespace rackprof::storage {
namespace {

int open_lock_file(const std::filesystem::path& path) {
    // O_CLOEXEC: a child (a simulated board, QEMU) must not inherit and outlive the lock.
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        throw std::system_error(errno, std::generic_category(),
                                "cannot open the lock file " + path.string());
    }
    return fd;
}

std::optional<long> pid_in(int fd) {
    char text[32] = {};
    const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
    if (n <= 0) return std::nullopt;
    long pid = 0;
    const auto [end, ec] = std::from_chars(text, text + n, pid);
    if (ec != std::errc() || end == text || pid <= 0) return std::nullopt;
    return pid;
}

void write_pid(int fd) {
    const std::string text = std::to_string(::getpid()) + "\n";
    // The pid is for messages only: a failed write leaves the lock as good.
    if (::ftruncate(fd, 0) == 0) {
        [[maybe_unused]] const ssize_t n = ::pwrite(fd, text.data(), text.size(), 0);
    }
}

}  // namespace

std::filesystem::path lock_path_of(const std::filesystem::path& database) {
    return database.string() + ".lock";
}

DatabaseLock::DatabaseLock(const std::filesystem::path& database)
    : path_(lock_path_of(database)), fd_(open_lock_file(path_)) {
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
        const int error = errno;
        const std::optional<long> holder = pid_in(fd_);
        ::close(fd_);
        if (error != EWOULDBLOCK) {
            throw std::system_error(error, std::generic_category(),
                                    "cannot lock " + path_.string());
        }
        throw DatabaseLocked(
            database.string() + " is in use by another rackprof serve" +
                (holder ? " (pid " + std::to_string(*holder) + ")" : std::string()) +
                "; stop it first, or give this one another database (--db or [storage] path)",
            holder);
    }
    write_pid(fd_);
}

DatabaseLock::~DatabaseLock() {
    // The file stays: removing it would let a third process lock a new file while a second
    // one waits on the old one's inode.
    ::close(fd_);
}

std::optional<long> database_lock_holder(const std::filesystem::path& database) {
    const int fd = ::open(lock_path_of(database).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    std::optional<long> holder;
    if (::flock(fd, LOCK_SH | LOCK_NB) != 0) {
        holder = pid_in(fd);
    } else {
        ::flock(fd, LOCK_UN);
    }
    ::close(fd);
    return holder;
}

}  // namespace rackprof::storage
