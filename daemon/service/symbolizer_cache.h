// ELF images by path, for every view that names functions: loading a large firmware's symbols
// takes long, and each profile of its sessions would load it again.
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gmon/symbolizer.h"

namespace rackprof::daemon::service {

// Firmware images by path, loaded once and shared while their file is unchanged; the 16 most
// recently used are kept.
class SymbolizerCache {
  public:
    explicit SymbolizerCache(std::size_t capacity = 16) : capacity_(capacity) {}
    // Throws what gmon::Symbolizer::load throws.
    std::shared_ptr<const gmon::Symbolizer> get(const std::string& path);

  private:
    struct Entry {
        std::string path;
        std::filesystem::file_time_type modified;
        std::shared_ptr<const gmon::Symbolizer> elf;
    };
    std::size_t capacity_;
    std::mutex mutex_;
    std::vector<Entry> entries_;  // most recently used first
};

}  // namespace rackprof::daemon::service
