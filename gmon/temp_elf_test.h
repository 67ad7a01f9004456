// For gmon's unit tests: a synthetic ELF in the temporary folder, removed with the object.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "gmon/synthetic_elf.h"

namespace rackprof::gmon {

class TempElf {
  public:
    TempElf(const std::vector<SyntheticFunction>& functions, std::uint32_t code_low,
            std::uint32_t code_high)
        : path(std::filesystem::temp_directory_path() /
               ("rackprof-gmon-test-" + std::to_string(::getpid()) + "-" +
                std::to_string(counter_++) + ".elf")) {
        write_synthetic_elf(path, functions, code_low, code_high);
    }
    ~TempElf() { std::filesystem::remove(path); }
    TempElf(const TempElf&) = delete;
    TempElf& operator=(const TempElf&) = delete;

    const std::filesystem::path path;

  private:
    static inline std::atomic<int> counter_ = 0;
};

}  // namespace rackprof::gmon
