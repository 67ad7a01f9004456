#include "storage/integrity.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

namespace rackprof::storage {

namespace {

// A check's row as problems, one a line, without SQLite's "*** in database main ***" heading.
void add_lines(std::vector<std::string>& problems, const std::string& row) {
    std::size_t at = 0;
    while (at <= row.size()) {
        const std::size_t end = std::min(row.find('\n', at), row.size());
        const std::string line = row.substr(at, end - at);
        if (!line.empty() && line.rfind("*** in database", 0) != 0) problems.push_back(line);
        at = end + 1;
    }
}

// What a check pragma returned: its rows, except the single "ok" of a sound database.
std::vector<std::string> pragma_problems(Database& db, const std::string& sql) {
    std::vector<std::string> problems;
    try {
        Statement check = db.prepare(sql.c_str());
        while (check.step()) {
            const std::string row = check.column_text(0);
            if (row != "ok") add_lines(problems, row);
        }
    } catch (const StorageError& e) {
        if (!e.is_damage()) throw;  // the check could not read on: no verdict
        problems.push_back(e.what());  // damaged beyond reading on (e.g. its schema)
    }
    return problems;
}

std::int64_t pragma_number(Database& db, const char* sql) {
    Statement s = db.prepare(sql);
    s.step();
    return s.column_int(0);
}

// The header's sanity, as SQLite reads it: a page size it allows, a free list inside the file.
std::vector<std::string> header_problems(Database& db) {
    try {
        const std::int64_t page_size = pragma_number(db, "PRAGMA page_size");
        const std::int64_t pages = pragma_number(db, "PRAGMA page_count");
        const std::int64_t free = pragma_number(db, "PRAGMA freelist_count");
        if (page_size < 512 || page_size > 65536 || (page_size & (page_size - 1)) != 0)
            return {"header: page size " + std::to_string(page_size) + " is not one SQLite writes"};
        if (free < 0 || free >= pages)
            return {"header: " + std::to_string(free) + " free pages in a file of " +
                    std::to_string(pages)};
        return {};
    } catch (const StorageError& e) {
        if (!e.is_damage()) throw;
        return {std::string("header: ") + e.what()};
    }
}

// The small tables this database has (an old schema may lack some).
std::vector<std::string> small_tables(Database& db) {
    std::vector<std::string> tables;
    Statement s = db.prepare(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('sessions', 'boards', "
        "'session_gaps', 'session_exceptions')");
    while (s.step()) tables.push_back(s.column_text(0));
    return tables;
}

std::uint64_t size_of(const std::filesystem::path& path) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    return ec ? 0 : size;
}

// Runs a check; a failure to read (not damage: integrity.h) ends it with cannot_check and no
// problems, since what was found before it says nothing about the rest.
template <typename Check>
IntegrityReport checked(Check check) {
    IntegrityReport report;
    try {
        check(report);
    } catch (const StorageError& e) {
        if (e.is_damage()) {
            report.problems.push_back(e.what());
        } else {
            report.problems.clear();
            report.cannot_check = e.what();
        }
    }
    return report;
}

}  // namespace

IntegrityReport check_at_start(Database& db, int max_problems) {
    return checked([&](IntegrityReport& report) {
        report.problems = header_problems(db);
        if (!report.ok()) return;
        const std::string limit = std::to_string(max_problems);
        if (size_of(db.path()) <= kFullCheckAtStartBytes) {
            report.problems = pragma_problems(db, "PRAGMA quick_check(" + limit + ")");
            return;
        }
        report.whole_file = false;
        for (const std::string& table : small_tables(db)) {
            for (auto& p : pragma_problems(db, "PRAGMA quick_check(" + table + ")"))
                report.problems.push_back(table + ": " + p);
        }
    });
}

IntegrityReport integrity_check(Database& db, int max_problems) {
    return checked([&](IntegrityReport& report) {
        report.problems = header_problems(db);
        for (auto& p :
             pragma_problems(db, "PRAGMA integrity_check(" + std::to_string(max_problems) + ")"))
            report.problems.push_back(std::move(p));
    });
}

IntegrityReport check_at_start(const std::filesystem::path& path, int max_problems) {
    return checked([&](IntegrityReport& report) {
        Database db(path, Database::Mode::kReadOnly);
        report = check_at_start(db, max_problems);
    });
}

IntegrityReport integrity_check(const std::filesystem::path& path, int max_problems) {
    return checked([&](IntegrityReport& report) {
        Database db(path, Database::Mode::kReadOnly);
        report = integrity_check(db, max_problems);
    });
}

}  // namespace rackprof::storage
