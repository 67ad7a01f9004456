// Running on a bench: the systemd unit verifies, the notify protocol is spoken (READY after
// storage opens, WATCHDOG pings, STOPPING on SIGTERM), SIGHUP reloads boards without
// dropping the others, and the install tree and the .deb hold what they should.
#include <grp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <regex>
#include <thread>

#include "storage/session_store.h"
#include "tests/integration/test_support.h"

namespace rackprof {
namespace {

using namespace std::chrono_literals;

// The socket systemd gives a Type=notify service: datagrams of KEY=VALUE lines.
class NotifySocket {
  public:
    explicit NotifySocket(std::filesystem::path path) : path_(std::move(path)) {
        fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::strncpy(addr.sun_path, path_.c_str(), sizeof addr.sun_path - 1);
        REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    }
    ~NotifySocket() { ::close(fd_); }
    // Everything received so far, in order, one message per entry.
    const std::vector<std::string>& messages() {
        char buffer[4096];
        ssize_t n;
        while ((n = ::recv(fd_, buffer, sizeof buffer, 0)) > 0)
            messages_.emplace_back(buffer, static_cast<std::size_t>(n));
        return messages_;
    }
    std::size_t count(const std::string& key) {
        std::size_t n = 0;
        for (const auto& m : messages()) n += m.find(key) != std::string::npos;
        return n;
    }
    std::size_t first(const std::string& key) {
        const auto& all = messages();
        for (std::size_t i = 0; i < all.size(); ++i) {
            if (all[i].find(key) != std::string::npos) return i;
        }
        return all.size();
    }

  private:
    std::filesystem::path path_;
    int fd_ = -1;
    std::vector<std::string> messages_;
};

void write_config(const std::filesystem::path& path, const std::filesystem::path& db,
                  const std::string& boards) {
    std::ofstream(path) << "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\npath = \"" << db.string()
                        << "\"\n"
                        << boards;
}

TEST_CASE("systemd-analyze verifies the unit") {
    testing::TempDir dir;
    std::string unit =
        testing::read_text(std::filesystem::path(RACKPROF_SOURCE_DIR) / "deploy/rackprof.service");
    // verify checks that ExecStart's binary exists: point it at the one under test.
    unit = std::regex_replace(unit, std::regex("/usr/bin/rackprof"), RACKPROF_BINARY);
    std::ofstream(dir / "rackprof.service") << unit;
    const auto r = testing::run({"systemd-analyze", "verify", (dir / "rackprof.service").string()});
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.err.find("rackprof.service") == std::string::npos);  // no complaint about our unit
    CHECK(unit.find("Type=notify") != std::string::npos);
}

// The figure docs/security.md and deploy/README.md give: `systemd-analyze security --offline`
// scores the unit 1.5 ("OK"); hardening taken away later fails here.
TEST_CASE("the unit's exposure (systemd-analyze security --offline) is at most 1.5") {
    const auto unit = std::filesystem::path(RACKPROF_SOURCE_DIR) / "deploy/rackprof.service";
    const auto r = testing::run({"systemd-analyze", "security", "--offline=true", unit.string()});
    std::smatch m;
    const std::regex overall("Overall exposure level for rackprof\\.service: ([0-9]+\\.[0-9]+)");
    if (r.exit_code != 0 || !std::regex_search(r.out, m, overall)) {
        MESSAGE("SKIP: systemd-analyze security --offline=true gave no exposure here (exit "
                << r.exit_code << "; systemd 252 or later is needed): " << r.err);
        return;
    }
    const double exposure = std::stod(m[1].str());
    MESSAGE("exposure of deploy/rackprof.service: " << exposure);
    CHECK(exposure <= 1.5);
}

// What postinst runs: the API token the package creates at install.
TEST_CASE("the package's API token: 64 hex characters, mode 0640, the service's group, kept") {
    testing::TempDir dir;
    const auto script = std::filesystem::path(RACKPROF_SOURCE_DIR) / "deploy/debian/make-api-token";
    const std::string postinst =
        testing::read_text(std::filesystem::path(RACKPROF_SOURCE_DIR) / "deploy/debian/postinst");
    CHECK(postinst.find("/usr/lib/rackprof/make-api-token /etc/rackprof/api-token rackprof\n") !=
          std::string::npos);
    // As root any group will do (dialout stands in for rackprof); otherwise one's own.
    const ::group* own = ::getgrgid(::getgid());
    REQUIRE(own);
    std::string group = own->gr_name;
    if (::geteuid() == 0 && ::getgrnam("dialout")) group = "dialout";
    const ::gid_t gid = ::getgrnam(group.c_str())->gr_gid;

    const auto token = dir / "etc/rackprof/api-token";
    REQUIRE(testing::run({script.string(), token.string(), group}).exit_code == 0);
    const std::string first = testing::read_text(token);
    CHECK(std::regex_match(first, std::regex("[0-9a-f]{64}")));
    struct ::stat st {};
    REQUIRE(::stat(token.c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0640);
    CHECK(st.st_gid == gid);
    // A second run (an upgrade) keeps it; an empty one is replaced; nothing is left beside it.
    REQUIRE(testing::run({script.string(), token.string(), group}).exit_code == 0);
    CHECK(testing::read_text(token) == first);
    std::ofstream(token, std::ios::trunc).flush();
    REQUIRE(testing::run({script.string(), token.string(), group}).exit_code == 0);
    const std::string second = testing::read_text(token);
    CHECK(std::regex_match(second, std::regex("[0-9a-f]{64}")));
    CHECK(second != first);
    std::size_t files = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(token.parent_path()))
        ++files;
    CHECK(files == 1);
    // A group that does not exist: an error, and no token.
    const auto missing = dir / "other/api-token";
    CHECK(testing::run({script.string(), missing.string(), "no-such-group-rackprof"}).exit_code !=
          0);
    CHECK_FALSE(std::filesystem::exists(missing));
    CHECK(testing::run({script.string(), missing.string()}).exit_code == 2);
}

TEST_CASE("the notify protocol: READY once capturing, WATCHDOG pings, STOPPING on SIGTERM") {
    testing::TempDir dir;
    NotifySocket notify(dir / "notify");
    write_config(dir / "rack.toml", dir / "rack.db",
                 "[[boards]]\nname = \"sim\"\nlink = \"sim://blinky?rate=20000\"\n");
    testing::Process daemon(
        testing::rackprof_argv({"serve", "--config", (dir / "rack.toml").string()}),
        dir / "serve.log", {},
        {"NOTIFY_SOCKET=" + (dir / "notify").string(), "WATCHDOG_USEC=200000"});
    REQUIRE(testing::eventually([&] { return notify.count("READY=1") > 0; }, 10s));
    CHECK(std::filesystem::exists(dir / "rack.db"));  // storage was open before READY
    std::this_thread::sleep_for(700ms);
    CHECK(notify.count("WATCHDOG=1") >= 4);  // every 100 ms
    daemon.signal(SIGTERM);
    CHECK(daemon.wait(5s) == 0);
    CHECK(notify.count("STOPPING=1") == 1);
    CHECK(notify.first("READY=1") < notify.first("STOPPING=1"));
}

TEST_CASE("SIGHUP: new boards start, removed ones stop, the others keep their session") {
    testing::TempDir dir;
    const auto keep = "[[boards]]\nname = \"keep\"\nlink = \"sim://deterministic?rate=20000\"\n";
    write_config(dir / "rack.toml", dir / "rack.db",
                 std::string(keep) + "[[boards]]\nname = \"drop\"\nlink = \"sim://blinky\"\n");
    testing::Process daemon(
        testing::rackprof_argv({"serve", "--config", (dir / "rack.toml").string()}),
        dir / "serve.log");
    const auto log = [&] { return testing::read_text(dir / "serve.log"); };
    REQUIRE(testing::eventually([&] { return log().find("[drop] session") != std::string::npos; },
                                10s));

    write_config(dir / "rack.toml", dir / "rack.db",
                 std::string(keep) + "[[boards]]\nname = \"new\"\nlink = \"sim://conflation\"\n");
    daemon.signal(SIGHUP);
    REQUIRE(
        testing::eventually([&] { return log().find("[new] session") != std::string::npos; }, 10s));
    CHECK(log().find("[drop] removed") != std::string::npos);

    // A broken file on the next SIGHUP changes nothing.
    std::ofstream(dir / "rack.toml") << "[[boards]]\nname = 3\n";
    daemon.signal(SIGHUP);
    REQUIRE(testing::eventually(
        [&] { return log().find("keeping the running one") != std::string::npos; }, 10s));
    std::this_thread::sleep_for(300ms);
    daemon.signal(SIGTERM);
    REQUIRE(daemon.wait(5s) == 0);

    storage::SessionStore store(dir / "rack.db", storage::Database::Mode::kReadOnly);
    std::map<std::string, int> sessions;
    for (const auto& s : store.sessions()) {
        ++sessions[s.spec.board];
        CHECK(s.state == "completed");
        CHECK(s.counters.gaps == 0);
    }
    CHECK(sessions == std::map<std::string, int>{{"drop", 1}, {"keep", 1}, {"new", 1}});
}

TEST_CASE("cmake --install lays out the tree; the .deb holds it with its maintainer scripts") {
    testing::TempDir dir;
    const auto install = testing::run({"cmake", "--install", RACKPROF_BUILD_DIR},
                                      {"DESTDIR=" + (dir / "root").string()});
    INFO(install.err);
    REQUIRE(install.exit_code == 0);
    for (const char* path :
         {"usr/bin/rackprof", "usr/lib/systemd/system/rackprof.service",
          "usr/lib/rackprof/make-api-token", "usr/lib/udev/rules.d/99-rackprof.rules",
          "etc/rackprof/rackprof.toml", "usr/share/doc/rackprof/README.md",
          "usr/share/doc/rackprof/LICENSE"}) {
        CAPTURE(path);
        CHECK(std::filesystem::exists(dir / "root" / path));
    }
    // The dashboard is installed where `rackprof serve` looks for it (setup.sh builds it).
    const bool dashboard_built =
        std::filesystem::exists(std::filesystem::path(RACKPROF_SOURCE_DIR) / "web/dist/index.html");
    if (dashboard_built) {
        CHECK(std::filesystem::exists(dir / "root/usr/share/rackprof/web/index.html"));
    } else {
        MESSAGE("SKIP: web/dist is not built (./setup.sh builds it): not checking its install");
    }
    // The installed example configuration is valid: the daemon accepts it.
    const auto help = testing::run({(dir / "root/usr/bin/rackprof").string(), "--version"});
    CHECK(help.out.find("rackprof ") == 0);

    const auto pack =
        testing::run({"cpack", "-G", "DEB", "-B", (dir / "package").string(), "--config",
                      std::string(RACKPROF_BUILD_DIR) + "/CPackConfig.cmake"});
    INFO(pack.out << pack.err);
    REQUIRE(pack.exit_code == 0);
    std::filesystem::path deb;
    for (const auto& e : std::filesystem::directory_iterator(dir / "package")) {
        if (e.path().extension() == ".deb") deb = e.path();
    }
    REQUIRE_FALSE(deb.empty());
    const auto contents = testing::run({"dpkg-deb", "-c", deb.string()});
    for (const char* path :
         {"./usr/bin/rackprof", "./usr/lib/systemd/system/rackprof.service",
          "./usr/lib/rackprof/make-api-token", "./usr/lib/udev/rules.d/99-rackprof.rules",
          "./etc/rackprof/rackprof.toml"}) {
        CAPTURE(path);
        CHECK(contents.out.find(path) != std::string::npos);
    }
    if (dashboard_built)
        CHECK(contents.out.find("./usr/share/rackprof/web/index.html") != std::string::npos);
    const auto info = testing::run({"dpkg-deb", "-I", deb.string()});
    for (const char* part : {"postinst", "prerm", "postrm", "conffiles", "Depends: adduser"}) {
        CAPTURE(part);
        CHECK(info.out.find(part) != std::string::npos);
    }
}

TEST_CASE("the example configuration shipped in deploy/ is valid") {
    testing::TempDir dir;
    // It names a device that does not exist here: the daemon must start, retry, and stop cleanly.
    std::string config =
        testing::read_text(std::filesystem::path(RACKPROF_SOURCE_DIR) / "deploy/rackprof.toml");
    config = std::regex_replace(config, std::regex("/var/lib/rackprof/rackprof.db"),
                                (dir / "rack.db").string());
    config = std::regex_replace(config, std::regex("/etc/rackprof/api-token"),
                                (dir / "api-token").string());
    // As shipped it listens on 8080, which a user's own daemon may hold: no test takes a fixed
    // port.
    const auto listen = std::regex("listen = \"127\\.0\\.0\\.1:8080\"");
    REQUIRE(std::regex_search(config, listen));
    config = std::regex_replace(config, listen, "listen = \"127.0.0.1:0\"");
    std::ofstream(dir / "api-token") << "0123abcd\n";
    std::ofstream(dir / "rackprof.toml") << config;
    testing::Process daemon(
        testing::rackprof_argv({"serve", "--config", (dir / "rackprof.toml").string()}),
        dir / "serve.log");
    REQUIRE(testing::eventually(
        [&] {
            return testing::read_text(dir / "serve.log").find("cannot connect") !=
                   std::string::npos;
        },
        10s));
    daemon.signal(SIGTERM);
    CHECK(daemon.wait(5s) == 0);
}

}  // namespace
}  // namespace rackprof
