// The `rackprof` command line, declared with CLI11: one subcommand per command, each command's
// file declaring its own options (commands.h). Help is generated from the declarations; values
// are checked by validators as they are parsed. Usage errors exit 2, failures 1, --help 0.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace rackprof::daemon::app {

// A mistake in the command line that no validator can see alone (options that exclude each
// other, a file that is not a selection, …): the command exits 2.
class UsageError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

// "200M", "64k", "1G", "1000": bytes. Throws UsageError.
std::uint64_t parse_size(const std::string& text);

// A whole number with an optional size suffix (k, M, G: parse_size), handed on as the number.
CLI::Validator size_transform();

// Inclusive bounds, said as "MIN..MAX" in the help and in the error ("must be WHAT, MIN..MAX");
// a max of infinity says "at least MIN".
CLI::Validator in_range(double min, double max, const std::string& what = {});
inline CLI::Validator at_least(double min, const std::string& what = {}) {
    return in_range(min, std::numeric_limits<double>::infinity(), what);
}

// A probability in [0, 1].
CLI::Validator probability();

// Declares a whole-number option (sizes allowed: --bytes 200M, --iterations 10k).
template <typename T>
CLI::Option* add_count(CLI::App& app, const std::string& name, T& value,
                       const std::string& description) {
    return app.add_option(name, value, description)->transform(size_transform());
}

// A command's subcommand of `root`: its one-line summary in the list of commands, and its
// footer, the longer explanation its help prints after the options.
inline CLI::App& add_command(CLI::App& root, const std::string& name, const std::string& summary,
                             const std::string& footer) {
    CLI::App& app = *root.add_subcommand(name, summary);
    app.footer(footer);
    return app;
}

// What runs a command once its options are parsed; returns the exit code.
using CommandRun = std::function<int()>;

// The whole command line: every command declared on one root.
struct Cli {
    Cli();
    CLI::App root;
    std::map<std::string, CommandRun> runs;  // by command name
};

// Parses `args` (argv without argv[0]) and runs the command. Help and the version go to `out`,
// usage errors to `err`; returns the exit code.
int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace rackprof::daemon::app
