// `rackprof check --db FILE`: the whole PRAGMA integrity_check of a database, read-only.
#include <filesystem>
#include <iostream>

#include "daemon/app/command_line.h"
#include "daemon/app/commands.h"
#include "storage/integrity.h"

namespace rackprof::daemon {

namespace {

constexpr const char* kUsage = R"(usage: rackprof check --db FILE

Checks a rackprof database for damage: every page, index and constraint (SQLite's
PRAGMA integrity_check), without writing to it. Prints "ok" and exits 0 for a sound file;
lists the problems found and exits 1 for a damaged one. It reads the whole file (about
1 s per GB from the page cache). The daemon refuses a damaged database at start.
)";

}  // namespace

int run_check(const std::vector<std::string>& args) {
    const CommandLine cl(args, {"--db"}, {"--help", "-h"});
    if (cl.has("--help") || cl.has("-h")) {
        std::cout << kUsage;
        return 0;
    }
    if (!cl.has("--db") || !cl.positionals().empty()) throw UsageError("check needs --db FILE");
    const std::filesystem::path db = cl.get("--db", "");
    if (!std::filesystem::is_regular_file(db))
        throw std::runtime_error("no such database: " + db.string());
    storage::Database database(db, storage::Database::Mode::kReadOnly);
    const storage::IntegrityReport report = storage::integrity_check(database);
    if (report.ok()) {
        std::cout << db.string() << ": ok\n";
        return 0;
    }
    std::cout << db.string() << ": damaged, " << report.problems.size() << " problem(s):\n";
    for (const auto& problem : report.problems) std::cout << "  " << problem << "\n";
    return 1;
}

}  // namespace rackprof::daemon
