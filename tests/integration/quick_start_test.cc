// The README's quick start as a new user runs it: `rackprof serve` on the embedded default in
// an empty folder, the README's curl lines against it, `rackprof convert --db` afterwards from
// somewhere else; and the commands that help before anything runs (check --config, --listen,
// --log-level).
#include <signal.h>

#include <doctest/doctest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "storage/sqlite.h"
#include "tests/integration/test_support.h"

namespace rackprof {
namespace {

using namespace std::chrono_literals;

// A shell word: 'text' with every ' escaped.
std::string quoted(const std::string& text) {
    return "'" + std::regex_replace(text, std::regex("'"), "'\\''") + "'";
}

// The commands between <!-- api-examples --> markers in README.md, continuation lines joined,
// end-of-line comments dropped.
std::vector<std::string> readme_api_examples() {
    const std::string readme =
        testing::read_text(std::filesystem::path(RACKPROF_SOURCE_DIR) / "README.md");
    const auto begin = readme.find("<!-- api-examples -->");
    const auto end = readme.find("<!-- /api-examples -->");
    REQUIRE(begin != std::string::npos);
    REQUIRE(end != std::string::npos);
    std::istringstream lines(readme.substr(begin, end - begin));
    std::vector<std::string> commands;
    std::string line;
    std::string pending;
    while (std::getline(lines, line)) {
        if (line.starts_with("<!--") || line.starts_with("```")) continue;
        line = std::regex_replace(line, std::regex(" +# [^']*$"), "");
        if (line.ends_with("\\")) {
            pending += line.substr(0, line.size() - 1);
            continue;
        }
        commands.push_back(pending + line);
        pending.clear();
    }
    return commands;
}

TEST_CASE(
    "quick start: the embedded default on --listen, the README's API lines, convert --db "
    "from another folder") {
    testing::TempDir dir;
    const auto log_path = dir / "serve.log";
    auto daemon = std::make_unique<testing::Process>(
        testing::rackprof_argv({"serve", "--listen", "127.0.0.1:0"}), log_path, dir.path());
    const std::string port = testing::wait_for_api_port(log_path);
    const std::string log = testing::read_text(log_path);
    INFO(log);
    // The first lines say where things went and where the dashboard is.
    CHECK(log.find("open the dashboard at http://127.0.0.1:" + port + "/") != std::string::npos);
    CHECK(log.find("firmware written to " + (dir / "var" / "firmware").string()) !=
          std::string::npos);
    REQUIRE(testing::eventually(
        [&] {
            const auto reply = testing::http_get(port, "/api/v1/sessions/1/profile?top=10");
            return reply.status == 200 && reply.body.find("WAIT1_") != std::string::npos;
        },
        10s));
    CHECK(testing::read_text(log_path).find("[sim-blinky] session 1 capturing") !=
          std::string::npos);

    // The README's examples, as written, with only the port changed; the files they upload
    // are the user's own in the README, here the demo firmware and a simulated hex capture.
    const auto work = dir / "work";
    std::filesystem::create_directories(work);
    std::filesystem::copy_file(dir / "var" / "firmware" / "blinky.elf", work / "app.elf");
    REQUIRE(testing::rackprof({"simulate", "--model", "blinky", "--format", "hex", "--iterations",
                               "5", "-o", (work / "capture.txt").string()})
                .exit_code == 0);
    const auto examples = readme_api_examples();
    CHECK(examples.size() >= 8);
    for (std::string command : examples) {
        command = std::regex_replace(command, std::regex("localhost:8080"), "127.0.0.1:" + port);
        CAPTURE(command);
        const auto r = testing::run(
            {"sh", "-c",
             "cd " + quoted(work.string()) + " && " + command + " -w '\\n%{http_code}'"});
        CAPTURE(r.out);
        CAPTURE(r.err);
        REQUIRE(r.exit_code == 0);
        const std::string status = r.out.substr(r.out.rfind('\n') + 1);
        CHECK(status.starts_with("2"));
    }
    CHECK(std::filesystem::exists(work / "sim-blinky-1.gmon.out"));

    daemon->signal(SIGTERM);
    REQUIRE(daemon->wait(10s) == 0);
    daemon.reset();

    // convert --db from another folder: the session's ELF is found (stored absolute), and the
    // session is the one the log named "session 1".
    const auto db = dir / "var" / "rackprof.db";
    const auto from_root = [&] {
        std::string argv;
        for (const auto& word : testing::rackprof_argv(
                 {"convert", "--db", db.string(), "--session", "1", "-o", "/dev/null"}))
            argv += quoted(word) + " ";
        return testing::run({"sh", "-c", "cd / && " + argv});
    };
    auto converted = from_root();
    CAPTURE(converted.err);
    REQUIRE(converted.exit_code == 0);
    CHECK(converted.err.find("session 1 (sim-blinky") != std::string::npos);
    CHECK(converted.out.find("WAIT1_WaitCycles") != std::string::npos);
    CHECK(converted.err.find("no --elf") == std::string::npos);

    // A database from before the paths were stored absolute named the ELF relative to the
    // daemon's folder: it is still found beside the database.
    {
        storage::Database database(db);
        database.exec("UPDATE sessions SET elf_path = 'var/firmware/blinky.elf' WHERE id = 1");
    }
    converted = from_root();
    CAPTURE(converted.err);
    REQUIRE(converted.exit_code == 0);
    CHECK(converted.out.find("WAIT1_WaitCycles") != std::string::npos);

    // An ELF that is gone is said by name, not as "no --elf given".
    std::filesystem::remove_all(dir / "var" / "firmware");
    converted = from_root();
    CHECK(converted.exit_code == 0);
    CHECK(converted.err.find("captured with the ELF var/firmware/blinky.elf, which is not there") !=
          std::string::npos);
    CHECK(converted.err.find("no --elf given") == std::string::npos);
}

TEST_CASE("serve: a port in use is named in the error; --log-level typos are refused") {
    testing::TempDir dir;
    const auto busy = testing::listen_loopback();
    const auto r = testing::rackprof({"serve", "--listen", "127.0.0.1:" + std::to_string(busy.port),
                                      "--config", "/nonexistent"});
    CHECK(r.exit_code == 2);  // the configuration is read first
    std::ofstream(dir / "rack.toml")
        << "[storage]\npath = \"" << (dir / "rack.db").string() << "\"\n";
    const auto in_use = testing::rackprof({"serve", "--config", (dir / "rack.toml").string(),
                                           "--listen", "127.0.0.1:" + std::to_string(busy.port)});
    CHECK(in_use.exit_code == 1);
    CHECK(in_use.err.find("cannot listen on 127.0.0.1:" + std::to_string(busy.port)) !=
          std::string::npos);
    const auto typo = testing::rackprof(
        {"serve", "--config", (dir / "rack.toml").string(), "--log-level", "verbose"});
    CHECK(typo.exit_code == 2);
    CHECK(typo.err.find("log level 'verbose': must be trace, debug, info, warn or error") !=
          std::string::npos);
    const auto bad_listen =
        testing::rackprof({"serve", "--config", (dir / "rack.toml").string(), "--listen", "x"});
    CHECK(bad_listen.exit_code == 2);
    CHECK(bad_listen.err.find("--listen: ") != std::string::npos);
    ::close(busy.fd);
}

TEST_CASE("check --config: a valid file lists its boards, a bad one exits 1 with serve's error") {
    testing::TempDir dir;
    std::ofstream(dir / "rack.toml")
        << "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\npath = \"rack.db\"\n"
        << "[[boards]]\nname = \"m4-1\"\nlink = \"serial:///dev/rackprof/A5?baud=1500000\"\n"
        << "protocol = \"framed\"\nelf = \"" << (dir / "missing.elf").string()
        << "\"\ntags = [\"bench-a\"]\n"
        << "[[boards]]\nname = \"blinky-1\"\nlink = \"tcp://127.0.0.1:3443\"\n";
    const auto ok = testing::rackprof({"check", "--config", (dir / "rack.toml").string()});
    CHECK(ok.exit_code == 0);
    CHECK(ok.out.find("2 board(s)") != std::string::npos);
    CHECK(ok.out.find("- m4-1: serial:///dev/rackprof/A5?baud=1500000, framed, 4-byte addresses, "
                      "autostart yes, tags bench-a") != std::string::npos);
    CHECK(ok.out.find("- blinky-1: tcp://127.0.0.1:3443, legacy bin, 3-byte addresses") !=
          std::string::npos);
    CHECK(ok.out.find("warning: no such file") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dir / "rack.db"));  // nothing started, nothing written

    std::ofstream(dir / "bad.toml") << "[[boards]]\nname = \"a\"\nlink = \"sim://blinky\"\n"
                                    << "addr_bytes = 4294967299\n";
    const auto bad = testing::rackprof({"check", "--config", (dir / "bad.toml").string()});
    CHECK(bad.exit_code == 1);
    CHECK(bad.out.find("bad.toml:4") != std::string::npos);
    CHECK(bad.out.find("addr_bytes") != std::string::npos);

    const auto neither = testing::rackprof({"check"});
    CHECK(neither.exit_code == 2);
    CHECK(neither.err.find("--db FILE or --config FILE") != std::string::npos);
}

}  // namespace
}  // namespace rackprof
