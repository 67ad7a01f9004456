#include "storage/database_lock.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "storage/temp_db_test.h"

namespace rackprof::storage {
namespace {

struct TempLock {
    TempDb db;
    ~TempLock() { std::filesystem::remove(lock_path_of(db.path)); }
};

// A child that takes the lock the way another daemon would (async-signal-safe calls only:
// the test process has threads) and waits to be killed. Returns its pid once it holds it.
pid_t child_holding(const std::filesystem::path& lock_file) {
    int ready[2];
    REQUIRE(::pipe(ready) == 0);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        const int fd = ::open(lock_file.c_str(), O_RDWR | O_CREAT, 0600);
        if (fd < 0 || ::flock(fd, LOCK_EX) != 0) ::_exit(1);
        char text[24];
        int n = 0;
        char digits[24];
        for (long pid = ::getpid(); pid > 0; pid /= 10)
            digits[n++] = static_cast<char>('0' + pid % 10);
        for (int i = 0; i < n; ++i) text[i] = digits[n - 1 - i];
        if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, text, static_cast<std::size_t>(n), 0) != n)
            ::_exit(1);
        if (::write(ready[1], "x", 1) != 1) ::_exit(1);
        for (;;) ::pause();
    }
    ::close(ready[1]);
    char byte = 0;
    REQUIRE(::read(ready[0], &byte, 1) == 1);
    ::close(ready[0]);
    return child;
}

}  // namespace

TEST_CASE("a database is locked by one holder at a time, and free again when it lets go") {
    TempLock t;
    CHECK_FALSE(database_lock_holder(t.db.path));
    {
        DatabaseLock first(t.db.path);
        CHECK(first.path() == lock_path_of(t.db.path));
        REQUIRE(database_lock_holder(t.db.path) == ::getpid());
        try {
            DatabaseLock second(t.db.path);
            FAIL("a second lock of one database was granted");
        } catch (const DatabaseLocked& e) {
            CHECK(e.holder_pid() == ::getpid());
            const std::string what = e.what();
            CHECK(what.find("pid " + std::to_string(::getpid())) != std::string::npos);
            CHECK(what.find(t.db.path.string()) != std::string::npos);
        }
        CHECK(database_lock_holder(t.db.path) == ::getpid());  // the refusal took nothing
    }
    CHECK_FALSE(database_lock_holder(t.db.path));
    DatabaseLock again(t.db.path);
    CHECK(database_lock_holder(t.db.path) == ::getpid());
}

TEST_CASE(
    "another process's lock refuses this one with its pid; kill -9 of it leaves no stale lock") {
    TempLock t;
    const pid_t child = child_holding(lock_path_of(t.db.path));
    CHECK(database_lock_holder(t.db.path) == child);
    try {
        DatabaseLock refused(t.db.path);
        FAIL("the lock of a database another process holds was granted");
    } catch (const DatabaseLocked& e) {
        CHECK(e.holder_pid() == child);
    }
    REQUIRE(::kill(child, SIGKILL) == 0);
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(WIFSIGNALED(status));
    CHECK_FALSE(database_lock_holder(t.db.path));
    DatabaseLock taken(t.db.path);  // the pid the dead holder left is overwritten
    CHECK(database_lock_holder(t.db.path) == ::getpid());
}

TEST_CASE("a lock file that cannot be created is an error naming it, not a lock") {
    const std::filesystem::path database = "/nonexistent-rackprof-dir/rackprof.db";
    CHECK_THROWS_WITH_AS(DatabaseLock{database}, doctest::Contains("/nonexistent-rackprof-dir"),
                         std::system_error);
}

}  // namespace rackprof::storage
