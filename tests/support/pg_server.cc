#include "tests/support/pg_server.h"

#include <iostream>

#include <unistd.h>

namespace rackprof::testing {

std::unique_ptr<PgServer> PgServer::start_or_skip(const std::filesystem::path& dir,
                                                  std::string_view what) {
    if (!installed()) {
        std::cout << "SKIP: " << what << ": PostgreSQL 15 is not installed (" << bin_dir().string()
                  << ")\n";
        return nullptr;
    }
    auto server = std::make_unique<PgServer>(dir);
    if (!server->ok()) {
        std::cout << "SKIP: " << what << ": PostgreSQL could not be started: " << server->why()
                  << "\n";
        return nullptr;
    }
    return server;
}

PgServer::PgServer(const std::filesystem::path& dir) : dir_(dir / "pg") {
    std::filesystem::create_directories(dir_);
    if (::getuid() == 0) {
        // postgres will not run as root: the folder becomes nobody's, the server too.
        std::filesystem::permissions(dir, std::filesystem::perms::owner_all |
                                              std::filesystem::perms::others_exec |
                                              std::filesystem::perms::group_exec);
        ok_ = run({"chown", "nobody", dir_.string()}).exit_code == 0;
    }
    port_ = std::to_string(50000 + ::getpid() % 10000);  // only names the socket file
    const auto r = run_pg({(bin_dir() / "initdb").string(), "-D", (dir_ / "data").string(), "-U",
                           "rackprof", "--auth=trust", "-E", "UTF8", "--no-sync"});
    ok_ = ok_ && r.exit_code == 0;
    if (!ok_) why_ = r.out + r.err;
    ok_ = ok_ && start();
}

PgServer::~PgServer() {
    if (ok_) stop();
}

std::string PgServer::url() const {
    return "postgresql:///postgres?host=" + dir_.string() + "&port=" + port_ + "&user=rackprof";
}

bool PgServer::start() {
    const auto r = run_pg({(bin_dir() / "pg_ctl").string(), "-D", (dir_ / "data").string(), "-o",
                           "-p " + port_ + " -k " + dir_.string() + " -c listen_addresses=''", "-l",
                           log().string(), "-w", "start"});
    if (r.exit_code != 0) why_ = r.out + r.err + read_text(log());
    return r.exit_code == 0;
}

bool PgServer::stop() {
    return run_pg({(bin_dir() / "pg_ctl").string(), "-D", (dir_ / "data").string(), "-m", "fast",
                   "-w", "stop"})
               .exit_code == 0;
}

CommandResult PgServer::run_pg(std::vector<std::string> argv) const {
    // From the server's folder: nobody may not be allowed into the caller's working directory.
    if (::getuid() == 0)
        argv.insert(argv.begin(), {"runuser", "-u", "nobody", "--", "env", "-C", dir_.string()});
    return run(argv);
}

}  // namespace rackprof::testing
