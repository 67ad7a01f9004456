// `rackprof check --db FILE`: the whole PRAGMA integrity_check of a database, read-only.
// `rackprof check --config FILE`: the configuration as `serve` would read it, boards listed.
#include <filesystem>
#include <iostream>
#include <optional>

#include "daemon/app/commands.h"
#include "daemon/config/config.h"
#include "storage/integrity.h"

namespace rackprof::daemon::app {

namespace {

constexpr const char* kCheckAbout = R"(rackprof check --db FILE | --config FILE

--db: checks a rackprof database for damage: every page, index and constraint (SQLite's
PRAGMA integrity_check), without writing to it. Prints "ok" and exits 0 for a sound file;
lists the problems found and exits 1 for a damaged one. When the check itself cannot read
the file (an I/O error, a disk too full for SQLite's files beside it) it says "cannot check"
and exits 3: no verdict, the file is not called damaged. It reads the whole file (about
1 s per GB from the page cache). The daemon refuses a damaged database at start.

--config: reads a configuration as `rackprof serve --config FILE` would, without starting
anything: prints the address, the database and every board, and exits 0; a configuration
serve would refuse prints the same error and exits 1. A board's ELF that cannot be found is
a warning (serve captures without it).
)";

std::string yes_no(bool b) {
    return b ? "yes" : "no";
}

int check_config(const std::filesystem::path& file) {
    config::DaemonConfig config;
    try {
        config = config::load_config(file);
    } catch (const config::ConfigError& e) {
        std::cout << "invalid configuration: " << e.what() << "\n";
        return 1;
    }
    config::make_paths_absolute(config);
    std::cout << file.string() << ": ok\n"
              << "  listen   " << config.listen
              << (config.token_file.empty() ? "" : ", token file ")
              << (config.token_file.empty() ? "" : config.token_file.string()) << "\n"
              << "  storage  " << config.storage_path.string() << "\n"
              << "  logging  " << config.log_level << "\n"
              << "  " << config.boards.size() << " board(s)\n";
    int missing_elves = 0;
    for (const config::BoardConfig& b : config.boards) {
        std::cout << "  - " << b.name << ": " << b.link << ", " << b.protocol;
        if (b.protocol == "legacy") std::cout << " " << b.format;
        std::cout << ", " << b.addr_bytes << "-byte addresses, autostart " << yes_no(b.autostart);
        if (!b.tags.empty()) {
            std::cout << ", tags";
            for (const auto& tag : b.tags) std::cout << " " << tag;
        }
        std::cout << "\n";
        if (b.elf.empty()) continue;
        std::cout << "      elf " << b.elf << "\n";
        std::error_code ec;
        if (!std::filesystem::is_regular_file(b.elf, ec)) {
            std::cout << "      warning: no such file; serve captures this board without symbols\n";
            ++missing_elves;
        }
    }
    if (missing_elves > 0) std::cout << missing_elves << " warning(s)\n";
    return 0;
}

int check_db(const std::filesystem::path& db) {
    if (!std::filesystem::is_regular_file(db))
        throw std::runtime_error("no such database: " + db.string());
    const storage::IntegrityReport report = storage::integrity_check(db);
    if (!report.cannot_check.empty()) {
        std::cout << db.string() << ": cannot check (I/O error: disk full?): "
                  << config::printable(report.cannot_check) << "\n";
        return 3;
    }
    if (report.ok()) {
        std::cout << db.string() << ": ok\n";
        return 0;
    }
    std::cout << db.string() << ": damaged, " << report.problems.size() << " problem(s):\n";
    for (const auto& problem : report.problems) std::cout << "  " << problem << "\n";
    return 1;
}

}  // namespace

CommandRun add_check_command(CLI::App& root) {
    struct Args {
        std::optional<std::string> db, config;
    };
    auto args = std::make_shared<Args>();
    CLI::App& app = add_command(
        root, "check",
        "check a configuration (--config FILE) or a database's integrity (--db FILE)", kCheckAbout);
    app.add_option("--db", args->db, "the database to check (read-only)")->type_name("FILE");
    app.add_option("--config", args->config, "the configuration to read as serve would")
        ->type_name("FILE");
    return [args] {
        if (args->db.has_value() == args->config.has_value())
            throw UsageError("check needs --db FILE or --config FILE");
        return args->config ? check_config(*args->config) : check_db(*args->db);
    };
}

}  // namespace rackprof::daemon::app
