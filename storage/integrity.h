// Whether a database file is sound: a bounded check at every start, and the full one that
// `rackprof check` runs.
//
// At start, PRAGMA quick_check reads the whole file: about 1 s per GB from the page cache and
// over ten times as long from a cold disk. So a database up to
// kFullCheckAtStartBytes gets the whole quick_check; a larger one only its header's sanity and
// the quick_check of its small tables (sessions, boards, gaps, exception counts: milliseconds),
// and the caller says the full check was skipped.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "storage/sqlite.h"

namespace rackprof::storage {

inline constexpr std::uint64_t kFullCheckAtStartBytes = 512ull << 20;

struct IntegrityReport {
    std::vector<std::string> problems;  // what the check found; empty: sound, when checked
    // Not empty: the check itself failed to read the file (an I/O error, a disk too full for
    // the files SQLite keeps beside it, no memory): no verdict either way, and not "damaged".
    std::string cannot_check;
    bool whole_file = true;  // false: only the header and the small tables
    bool ok() const { return problems.empty() && cannot_check.empty(); }
    bool damaged() const { return !problems.empty(); }
};

// The bounded check for a start (see above); at most `max_problems` listed.
IntegrityReport check_at_start(Database& db, int max_problems = 10);
// PRAGMA integrity_check: every page, index and constraint; at most `max_problems` listed.
IntegrityReport integrity_check(Database& db, int max_problems = 1000);
// The same on a file, opened read-only here: a file that cannot be opened is damaged (not a
// database) or not checked (it cannot be read), as a check that fails part way is.
IntegrityReport check_at_start(const std::filesystem::path& path, int max_problems = 10);
IntegrityReport integrity_check(const std::filesystem::path& path, int max_problems = 1000);

}  // namespace rackprof::storage
