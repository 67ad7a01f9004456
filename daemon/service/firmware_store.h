// Uploaded firmware images (ELF files), each kept once under its id: its build-id, or its
// SHA-256 when it has none. Over HTTP, boards and sessions name firmware only from here, never
// by a path of the caller's choosing (the daemon would read that file and serve it).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "daemon/service/rack_service.h"

namespace rackprof::daemon::service {

class FirmwareStore {
  public:
    explicit FirmwareStore(std::filesystem::path dir) : dir_(std::move(dir)) {}

    const std::filesystem::path& dir() const { return dir_; }

    // Keeps an upload (moved into the store unless that id is there already): the view is the
    // API's {id, build_id, sha256, functions, stored}. Throws ServiceError (kNotAnElf) for a
    // file that is not an ELF naming functions for gprof.
    Stored put(const std::filesystem::path& upload);

    // The stored image of `id`; none for an id that is not one or names nothing stored.
    std::optional<std::filesystem::path> find(const std::string& id) const;

    // The stored images, newest first, at most `limit`: [{id, bytes, stored_ns}], read from
    // the folder alone (no image is opened).
    nlohmann::json list(std::size_t limit = 1000) const;

    // Whether `elf` is one of the store's files.
    bool holds(const std::filesystem::path& elf) const;

    // Lower-case hex of at most 128 digits: what a build-id or SHA-256 is written as.
    static bool is_id(const std::string& id);

  private:
    std::filesystem::path dir_;
};

}  // namespace rackprof::daemon::service
