// A rack of simulated boards on pseudo-terminals, each sending a known run, and a real
// `rackprof serve` capturing them: the daemon suites' fixture.
#pragma once

#include <signal.h>

#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "gmon/aggregate.h"
#include "tests/integration/test_support.h"

namespace rackprof::testing {

struct SimBoard {
    std::string name;
    std::vector<std::string> simulate_args;  // model, format, ... (no --pty / --truth)
    std::string format = "bin";
    int addr_bytes = 3;
    std::string protocol = "legacy";
    std::string elf = "";  // the board's configured ELF (none by default)
};

// What the simulator needs to send a board's wire: format, width and protocol.
inline std::vector<std::string> wire_args(const SimBoard& b) {
    std::vector<std::string> args = {"--addr-bytes", std::to_string(b.addr_bytes)};
    if (b.protocol == "framed") {
        args.insert(args.end(), {"--protocol", "framed"});
    } else {
        args.insert(args.end(), {"--format", b.format});
    }
    return args;
}

inline gmon::Aggregate aggregate_of(const nlohmann::json& truth) {
    gmon::Aggregate a;
    for (const auto& arc : truth["arcs"]) {
        a.add_arc(std::stoull(arc["from"].get<std::string>(), nullptr, 16),
                  std::stoull(arc["self"].get<std::string>(), nullptr, 16),
                  arc["count"].get<std::uint64_t>());
    }
    for (const auto& pc : truth["pc_samples"]) {
        a.add_pc(std::stoull(pc["pc"].get<std::string>(), nullptr, 16),
                 pc["count"].get<std::uint64_t>());
    }
    return a;
}

// A board that unplugs 20 times during its run: 60 ms away after every 120 records.
inline SimBoard unplugging_board(const std::string& name) {
    return {name,
            {"--model", "deterministic", "--iterations", "220", "--rate", "60000", "--unplug-every",
             "120", "--unplug-for", "60", "--unplugs", "20"}};
}

class Rack {
  public:
    // `database`: where it goes (default: rack.db in the rack's temp dir).
    explicit Rack(std::vector<SimBoard> boards, const std::string& extra_config = "",
                  std::filesystem::path database = {})
        : boards_(std::move(boards)),
          db_(database.empty() ? dir_ / "rack.db" : std::move(database)) {
        std::ofstream config(dir_ / "rack.toml");
        config << "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\npath = \"" << db().string()
               << "\"\n[links]\nreconnect_min_ms = 20\nreconnect_max_ms = 100\n"
               << extra_config;
        for (const auto& b : boards_) {
            config << "[[boards]]\nname = \"" << b.name << "\"\nlink = \"serial://"
                   << (dir_ / b.name).string() << "\"\nformat = \"" << b.format
                   << "\"\naddr_bytes = " << b.addr_bytes << "\nprotocol = \"" << b.protocol
                   << "\"\n";
            if (!b.elf.empty()) config << "elf = \"" << b.elf << "\"\n";
        }
    }

    const std::filesystem::path& db() const { return db_; }
    std::filesystem::path path(const std::string& name) const { return dir_ / name; }

    // Every board sends its whole run into a daemon, which then stops cleanly.
    void capture_all() {
        start_boards();
        start_daemon();
        wait_boards();
        stop_daemon();
    }

    void start_boards() {
        for (const auto& b : boards_) {
            auto args = b.simulate_args;
            for (const std::string& a :
                 {std::string("--pty"), (dir_ / b.name).string(), std::string("--truth"),
                  (dir_ / (b.name + ".truth.json")).string()}) {
                args.push_back(a);
            }
            for (const std::string& a : wire_args(b)) args.push_back(a);
            args.insert(args.begin(), "simulate");
            sims_.push_back(
                std::make_unique<Process>(rackprof_argv(args), dir_ / (b.name + ".log")));
        }
        for (const auto& b : boards_) {
            REQUIRE_MESSAGE(eventually([&] { return std::filesystem::exists(dir_ / b.name); },
                                       std::chrono::seconds(10)),
                            read_text(dir_ / (b.name + ".log")));
        }
    }

    // Starts the boards and the daemon, and waits until `board` is connected and settled.
    void start_connected(const std::string& board) {
        start_boards();
        start_daemon();
        REQUIRE(
            eventually([&] { return log().find("[" + board + "] connected") != std::string::npos; },
                       std::chrono::seconds(10)));
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    // Waits for every board's run to end and the daemon's last reconnect attempts to settle.
    void wait_boards_settled() {
        wait_boards();
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }

    void start_daemon() {
        daemon_ = std::make_unique<Process>(
            rackprof_argv({"serve", "--config", (dir_ / "rack.toml").string()}),
            dir_ / "serve.log");
    }

    void wait_boards(std::chrono::seconds timeout = std::chrono::seconds(60)) {
        for (auto& sim : sims_) {
            REQUIRE(sim->wait(timeout) == 0);
        }
    }

    // SIGTERM: must exit 0 within 2 seconds.
    void stop_daemon() {
        const auto start = std::chrono::steady_clock::now();
        daemon_->signal(SIGTERM);
        const int code = daemon_->wait(std::chrono::seconds(5));
        const auto took = std::chrono::steady_clock::now() - start;
        INFO(log());
        CHECK(code == 0);
        CHECK(took < std::chrono::seconds(2));
    }

    nlohmann::json truth(const std::string& name) const {
        return nlohmann::json::parse(read_text(dir_ / (name + ".truth.json")));
    }
    std::string log() const { return read_text(dir_ / "serve.log"); }
    Process& daemon() { return *daemon_; }

    // The bytes a board sends, made again without a pty: the simulator is deterministic.
    std::string expected_bytes(const SimBoard& b) {
        auto args = b.simulate_args;
        args.insert(args.begin(), "simulate");
        args.push_back("-o");
        args.push_back((dir_ / (b.name + ".bytes")).string());
        for (const std::string& a : wire_args(b)) args.push_back(a);
        REQUIRE(rackprof(args).exit_code == 0);
        return read_text(dir_ / (b.name + ".bytes"));
    }

  private:
    TempDir dir_;
    std::vector<SimBoard> boards_;
    std::filesystem::path db_;
    std::vector<std::unique_ptr<Process>> sims_;
    std::unique_ptr<Process> daemon_;
};

}  // namespace rackprof::testing
