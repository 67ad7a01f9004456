// For storage's tests: a database path under the temp dir, removed with its WAL files.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

namespace rackprof::storage {

struct TempDb {
    std::filesystem::path path = std::filesystem::temp_directory_path() /
                                 ("rackprof-storage-test-" + std::to_string(::getpid()) + "-" +
                                  std::to_string(next++) + ".db");
    ~TempDb() {
        for (const char* suffix : {"", "-wal", "-shm"})
            std::filesystem::remove(path.string() + suffix);
    }
    static inline int next = 0;
};

}  // namespace rackprof::storage
