#include "daemon/app/cli.h"

#include <cctype>
#include <iostream>
#include <sstream>

#include "daemon/app/commands.h"

namespace rackprof::daemon::app {

namespace {

constexpr const char* kDescription =
    "rackprof: gprof for a rack of microcontrollers. One binary, one command per job.";

constexpr const char* kFooter =
    "`rackprof COMMAND --help` describes a command's options; `rackprof --version` prints the "
    "version.";

// "0..255" for whole bounds, "0..1" for a probability, "at least 1" with no upper bound.
std::string bounds_text(double min, double max) {
    std::ostringstream out;
    if (max == std::numeric_limits<double>::infinity()) {
        out << "at least " << min;
    } else {
        out << min << ".." << max;
    }
    return out.str();
}

// Unknown options and stray arguments, named as the old reader named them.
std::string extras_message(const CLI::App& root) {
    std::string message;
    for (const auto& extra : root.remaining(true)) {
        if (!message.empty()) message += "; ";
        message += extra.size() > 1 && extra[0] == '-' ? "unknown option " + extra
                                                       : "unexpected argument '" + extra + "'";
    }
    return message;
}

// A parse error as one line on stderr, and where the command's options are described.
int usage_error(const CLI::App& root, const CLI::ParseError& e, const std::string& command,
                std::ostream& err) {
    std::string message = e.what();
    if (dynamic_cast<const CLI::ExtrasError*>(&e)) message = extras_message(root);
    const std::string name = command.empty() ? "rackprof" : "rackprof " + command;
    err << name << ": " << message << "\n"
        << "(`" << name << " --help` describes the options)\n";
    return 2;
}

}  // namespace

std::uint64_t parse_size(const std::string& text) {
    std::size_t digits = 0;
    while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
    if (digits == 0 || digits > 18) throw UsageError("not a number: '" + text + "'");
    std::uint64_t value = std::stoull(text.substr(0, digits));
    const std::string suffix = text.substr(digits);
    if (suffix.empty()) return value;
    if (suffix == "k" || suffix == "K") return value << 10;
    if (suffix == "M") return value << 20;
    if (suffix == "G") return value << 30;
    throw UsageError("unknown size suffix in '" + text + "' (use k, M or G)");
}

CLI::Validator size_transform() {
    return CLI::Validator(
        [](std::string& value) {
            try {
                value = std::to_string(parse_size(value));
            } catch (const UsageError&) {
                return "needs a whole number (k, M, G suffixes allowed), not '" + value + "'";
            }
            return std::string();
        },
        "", "SIZE");
}

CLI::Validator in_range(double min, double max, const std::string& what) {
    const std::string bounds = bounds_text(min, max);
    CLI::Validator v(
        [min, max, bounds, what](std::string& value) {
            double number = 0;
            std::size_t used = 0;
            try {
                number = std::stod(value, &used);
            } catch (const std::exception&) {
                used = 0;
            }
            if (used == value.size() && number >= min && number <= max) return std::string();
            return "must be " + (what.empty() ? "" : what + ", ") + bounds + ", not '" + value +
                   "'";
        },
        bounds, "RANGE");
    return v;
}

CLI::Validator probability() {
    return in_range(0.0, 1.0, "a probability");
}

Cli::Cli() : root(kDescription, "rackprof") {
    root.footer(kFooter);
    root.set_version_flag("--version", std::string("rackprof ") + RACKPROF_VERSION,
                          "print the version and exit");
    root.set_help_flag("-h,--help", "print this help and exit");
    root.require_subcommand(1);
    // A repeated option takes its last value (repeatable ones say so: TakeAll).
    root.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    auto formatter = std::make_shared<CLI::Formatter>();
    formatter->column_width(26);
    root.formatter(formatter);
    runs["serve"] = add_serve_command(root);
    runs["convert"] = add_convert_command(root);
    runs["diff"] = add_diff_command(root);
    runs["check-sync"] = add_check_sync_command(root);
    runs["simulate"] = add_simulate_command(root);
    runs["demo"] = add_demo_command(root);
    runs["fleet"] = add_fleet_command(root);
    runs["campaign"] = add_campaign_command(root);
    runs["check"] = add_check_command(root);
    runs["annotate"] = add_annotate_command(root);
}

int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
    Cli cli;
    if (args.empty()) {
        out << cli.root.help();
        return 2;
    }
    if (args.size() == 1 && args[0] == "help") {
        out << cli.root.help();
        return 0;
    }
    if (args.size() == 1 && args[0] == "version") {
        out << "rackprof " << RACKPROF_VERSION << "\n";
        return 0;
    }
    const std::string command = cli.runs.count(args[0]) ? args[0] : "";
    if (command.empty() && !args[0].starts_with("-")) {
        err << "rackprof: unknown command '" << args[0] << "'\n\n" << cli.root.help();
        return 2;
    }
    try {
        std::vector<std::string> reversed(args.rbegin(), args.rend());
        cli.root.parse(reversed);
    } catch (const CLI::Success& e) {  // --help, --version
        return cli.root.exit(e, out, err);
    } catch (const CLI::ParseError& e) {
        return usage_error(cli.root, e, command, err);
    }
    try {
        return cli.runs.at(command)();
    } catch (const UsageError& e) {
        err << "rackprof " << command << ": " << e.what() << "\n";
        return 2;
    } catch (const std::exception& e) {
        err << "rackprof " << command << ": error: " << e.what() << "\n";
        return 1;
    }
}

}  // namespace rackprof::daemon::app
