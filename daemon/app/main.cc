// rackprof: gprof for a rack of microcontrollers. One binary, one subcommand per job.
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "daemon/app/command_line.h"
#include "daemon/app/commands.h"

namespace {

constexpr const char* kUsage = R"(usage: rackprof COMMAND [options]

commands:
  serve      run the capture daemon (embedded default: a simulated rack, ./var/rackprof.db)
  convert    decode a capture into gmon.out and print the profile
  diff       compare two profiles function by function; a CI gate with --fail-on
  check-sync the synchronisation alarm: a fixed-period and a dithered-period profile compared
  simulate   run a virtual board: write the wire bytes it sends, and its ground truth
  demo       simulate a board, convert its capture and print the profile (no hardware needed)
  fleet      read the shared fleet store (PostgreSQL): sessions, merged profiles, diffs
  campaign   a counter campaign: find every function above n % of a metric, K per run
  check      check a configuration (--config FILE) or a database's integrity (--db FILE)

`rackprof COMMAND --help` describes a command's options; `rackprof --version` prints the version.
)";

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
        std::cout << kUsage;
        return args.empty() ? 2 : 0;
    }
    if (args[0] == "--version" || args[0] == "version") {
        std::cout << "rackprof " << RACKPROF_VERSION << "\n";
        return 0;
    }
    const std::string command = args[0];
    args.erase(args.begin());
    try {
        if (command == "convert") return rackprof::daemon::run_convert(args);
        if (command == "diff") return rackprof::daemon::run_diff(args);
        if (command == "check-sync") return rackprof::daemon::run_check_sync(args);
        if (command == "simulate") return rackprof::daemon::run_simulate(args);
        if (command == "demo") return rackprof::daemon::run_demo(args);
        if (command == "serve") return rackprof::daemon::run_serve(args);
        if (command == "check") return rackprof::daemon::run_check(args);
        if (command == "fleet") return rackprof::daemon::run_fleet(args);
        if (command == "campaign") return rackprof::daemon::run_campaign(args);
        std::cerr << "rackprof: unknown command '" << command << "'\n" << kUsage;
        return 2;
    } catch (const rackprof::daemon::UsageError& e) {
        std::cerr << "rackprof " << command << ": " << e.what() << "\n";
        return 2;
    } catch (const std::exception& e) {
        std::cerr << "rackprof " << command << ": error: " << e.what() << "\n";
        return 1;
    }
}
