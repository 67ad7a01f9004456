// Whole sessions' profiles, kept between requests: the dashboard asks for the same one again
// and again while a session is open.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "gmon/elf_fit.h"
#include "gmon/profile_pipeline.h"

namespace rackprof::daemon::service {

// Profiles of whole sessions, kept while the aggregate they were computed from is still the one
// served (a commit replaces it, which ends the entry) and the ELF is the same; the 4 most recently
// used. A large profile takes long to compute; a kept one is served at once.
class ProfileCache {
  public:
    explicit ProfileCache(std::size_t capacity = 4) : capacity_(capacity) {}
    // A session's profile, and how its capture fits the ELF's code (gmon/elf_fit.h), both
    // computed once per aggregate.
    struct Computed {
        gmon::Profile profile;
        gmon::ElfFit fit;
    };
    static Computed compute(const gmon::ProfileSource& source);
    // Throws what gmon::profile_of throws.
    std::shared_ptr<const Computed> get(std::int64_t session, const gmon::ProfileSource& source);

  private:
    struct Entry {
        std::int64_t session = 0;
        std::weak_ptr<const gmon::Aggregate> aggregate;
        std::weak_ptr<const gmon::Symbolizer> elf;
        std::optional<gmon::CodeRange> announced_range;
        std::shared_ptr<const Computed> profile;
        // The aggregate cache merges a commit's delta into its aggregate in place when no
        // reader holds it: the same pointer then holds more counts than this profile.
        std::uint64_t total_calls = 0;
        std::uint64_t total_samples = 0;

        bool serves(std::int64_t id, const gmon::ProfileSource& source) const;
    };
    std::size_t capacity_;
    std::mutex mutex_;
    std::vector<Entry> entries_;  // most recently used first
};

}  // namespace rackprof::daemon::service
