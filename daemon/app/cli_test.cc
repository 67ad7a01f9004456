// The command line's declarations (daemon/app/cli.h): values parsed into each command's options,
// ranges and choices refused as they are parsed, unknown options refused, help generated.
#include "daemon/app/cli.h"

#include <sstream>

#include <doctest/doctest.h>

namespace rackprof::daemon::app {
namespace {

// Parses `args` on a fresh root; the commands are declared but not run.
struct Parsed {
    explicit Parsed(const std::vector<std::string>& args) {
        std::vector<std::string> reversed(args.rbegin(), args.rend());
        cli.root.parse(reversed);
    }
    CLI::Option& option(const std::string& command, const std::string& name) {
        return *cli.root.get_subcommand(command)->get_option(name);
    }
    Cli cli;
};

struct Run {
    explicit Run(const std::vector<std::string>& args) : code(run_cli(args, out, err)) {}
    std::ostringstream out, err;
    int code;
};

TEST_CASE("options, values and positionals") {
    Parsed p({"convert", "in.txt", "--elf", "a.elf", "--rate=500", "-o", "out", "--intervals"});
    CHECK(p.option("convert", "CAPTURE").as<std::string>() == "in.txt");
    CHECK(p.option("convert", "--elf").as<std::string>() == "a.elf");
    CHECK(p.option("convert", "--rate").as<std::uint32_t>() == 500);
    CHECK(p.option("convert", "-o").as<std::string>() == "out");
    CHECK(p.option("convert", "--intervals").count() == 1);
    CHECK(p.option("convert", "--force").count() == 0);
}

TEST_CASE("sizes and repeated options") {
    Parsed p({"simulate", "--bytes", "200M", "--iterations=64k", "--seed", "3", "--seed", "4"});
    CHECK(p.option("simulate", "--bytes").as<std::uint64_t>() == 200ull << 20);
    CHECK(p.option("simulate", "--iterations").as<std::uint64_t>() == 64ull << 10);
    CHECK(p.option("simulate", "--seed").as<std::uint64_t>() == 4);  // the last one
    Parsed d({"diff", "a", "b", "--fail-on", "self>+5%", "--fail-on=calls>+0%,total>+1%"});
    CHECK(d.option("diff", "--fail-on").as<std::vector<std::string>>() ==
          std::vector<std::string>{"self>+5%", "calls>+0%,total>+1%"});
    CHECK(d.option("diff", "A").as<std::string>() == "a");
    CHECK(d.option("diff", "B").as<std::string>() == "b");
}

TEST_CASE("fleet: the connection before or after the command") {
    Parsed p({"fleet", "--url", "postgresql://u@h/db", "prune", "--keep-sessions-days", "30"});
    CHECK(p.option("fleet", "--url").as<std::string>() == "postgresql://u@h/db");
    Parsed q({"fleet", "sessions", "--select", "bench=a", "--url", "postgresql://u@h/db"});
    CHECK(q.option("fleet", "--url").as<std::string>() == "postgresql://u@h/db");
}

TEST_CASE("ranges and choices are refused as they are parsed: exit 2, the option named") {
    for (const auto& refusal : std::vector<std::pair<std::vector<std::string>, std::string>>{
             {{"convert", "x", "--addr-bytes", "5"}, "--addr-bytes"},
             {{"convert", "x", "--protocol", "itm", "--console-port", "256"}, "0..255"},
             {{"convert", "x", "--rate", "fast"}, "needs a whole number"},
             {{"convert", "x", "--rate", "0"}, "--rate"},
             {{"convert", "x", "--bin-bytes", "3"}, "even"},
             {{"convert", "x", "--protocol", "morse"}, "--protocol"},
             {{"convert", "x", "--export", "nope"}, "--export"},
             {{"simulate", "--drop", "2", "-o", "x"}, "probability"},
             {{"simulate", "--dither", "1000", "-o", "x"}, "--dither"},
             {{"simulate", "--boards", "0", "--pty-dir", "d"}, "1..4096"},
             {{"diff", "a", "b", "--alpha", "1"}, "--alpha"},
             {{"diff", "a"}, "B"},
             {{"fleet", "prune", "--keep-sessions-days", "-3"}, "--keep-sessions-days"},
             {{"serve", "--log-level", "loud"}, "--log-level"},
             {{"serve", "--log-level", "verbose"}, "must be trace, debug, info, warn or error"},
             {{"check"}, "--db FILE or --config FILE"},
             {{"check", "--db", "a", "--config", "b"}, "--db FILE or --config FILE"},
         }) {
        const auto& [args, says] = refusal;
        CAPTURE(refusal.second);  // CAPTURE takes no structured bindings (clang 14)
        const Run r(args);
        CHECK(r.code == 2);
        CHECK(r.err.str().find(says) != std::string::npos);
        CHECK(r.out.str().empty());
    }
}

TEST_CASE("unknown options, arguments and commands are refused") {
    const Run option({"convert", "x", "--frobnicate"});
    CHECK(option.code == 2);
    CHECK(option.err.str().find("unknown option --frobnicate") != std::string::npos);
    const Run argument({"serve", "extra"});
    CHECK(argument.code == 2);
    CHECK(argument.err.str().find("unexpected argument 'extra'") != std::string::npos);
    const Run command({"frobnicate"});
    CHECK(command.code == 2);
    CHECK(command.err.str().find("unknown command 'frobnicate'") != std::string::npos);
    const Run fleet({"fleet", "vacuum"});
    CHECK(fleet.code == 2);
    CHECK(Run({"convert", "--version"}).code == 2);
    CHECK(Run({}).code == 2);  // the help, but not a success
}

TEST_CASE("help is generated from the declarations and exits 0") {
    const Run root({"--help"});
    CHECK(root.code == 0);
    for (const char* command : {"serve", "convert", "diff", "check-sync", "simulate", "demo",
                                "fleet", "campaign", "check"}) {
        CAPTURE(command);
        CHECK(root.out.str().find(command) != std::string::npos);
        const Run help({command, "--help"});
        CHECK(help.code == 0);
        CHECK(help.out.str().find("Usage: rackprof " + std::string(command)) != std::string::npos);
        CHECK(Run({command, "-h"}).code == 0);
    }
    const Run convert({"convert", "--help"});
    for (const char* text : {"--addr-bytes", "the firmware's ELF", "pprof", "callgrind", "itm"})
        CHECK(convert.out.str().find(text) != std::string::npos);
    // serve's help gives the address it listens on when nothing says otherwise.
    const Run serve({"serve", "--help"});
    CHECK(serve.out.str().find("default: 127.0.0.1:8080") != std::string::npos);
    const Run prune({"fleet", "prune", "--help"});
    CHECK(prune.code == 0);
    CHECK(prune.out.str().find("--keep-sessions-days") != std::string::npos);
    const Run version({"--version"});
    CHECK(version.code == 0);
    CHECK(version.out.str().starts_with("rackprof "));
}

TEST_CASE("sizes") {
    CHECK(parse_size("200M") == 200ull << 20);
    CHECK(parse_size("64k") == 64ull << 10);
    CHECK(parse_size("7") == 7);
    CHECK_THROWS_AS(parse_size("12X"), UsageError);
    CHECK_THROWS_AS(parse_size(""), UsageError);
}

}  // namespace
}  // namespace rackprof::daemon::app
