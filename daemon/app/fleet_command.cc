// `rackprof fleet`: the fleet store (PostgreSQL) from the command line, for CI: a selection's
// sessions, its merged profile or an export of it, and a diff of two selections. The merge is
// the one the daemon serves (service::fleet_input: merged_input over the SQL sum).
#include <unistd.h>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>

#include "daemon/app/commands.h"
#include "daemon/config/config.h"
#include "daemon/fleet/fleet_pusher.h"
#include "daemon/service/fleet_source.h"
#include "daemon/service/rack_service.h"
#include "daemon/service/selection.h"
#include "gmon/export.h"
#include "gmon/gmon_writer.h"
#include "gmon/profile_diff.h"
#include "gmon/profile_pipeline.h"
#include "gmon/report.h"
#include "storage/fleet/fleet_store.h"

namespace rackprof::daemon::app {
namespace {

constexpr const char* kFleetAbout =
    R"(Reads the fleet store: the PostgreSQL database many benches push their completed sessions to
([fleet] in the daemon's configuration). A SELECTION is the API's, plus bench=: e.g.
'build_id=3f2a…', 'bench=lab-a,lab-b&board=m4-1', 'tag=nightly&from=1700000000000000000'.
The merge is done by the server; functions are named from the firmware the benches pushed.

fleet prune (retention, for a daily cron job): removes the sessions that ended more than N days
ago with their aggregates (N: --keep-sessions-days, else [fleet] keep_sessions_days of
--config; 0 or none: nothing to do). A month's partitions are dropped whole once all of it is
that old, other rows deleted; benches do not push such sessions again. Raw bytes are never in
the fleet store (each bench's own retention, [storage] keep_raw_days, governs those).

exit status: 0 ok (fleet diff: no gate tripped), 1 a diff gate tripped or the store failed,
2 usage errors and empty selections.
)";

// The connection (declared on `fleet`) and each command's own options.
struct FleetArgs {
    std::optional<std::string> url, password_file, sslmode, sslrootcert, config;
    std::string select;
    std::string report = "text";
    std::uint64_t top = 0;
    std::optional<std::string> export_format;
    std::string output = "-";
    std::string a, b;
    std::vector<std::string> fail_on;
    std::optional<double> alpha;
    bool json = false;
    std::optional<std::int64_t> keep_sessions_days;
    bool by_name = false;  // fleet diff --merge by_name
};

storage::fleet::FleetConnection connection_of(const FleetArgs& cl) {
    config::FleetConfig f;
    if (cl.config) f = config::load_config(*cl.config).fleet;
    if (const char* env = std::getenv("RACKPROF_FLEET_URL"); env && f.url.empty()) f.url = env;
    if (cl.url) f.url = *cl.url;
    if (cl.password_file) f.password_file = *cl.password_file;
    if (cl.sslmode) f.sslmode = *cl.sslmode;
    if (cl.sslrootcert) f.sslrootcert = *cl.sslrootcert;
    if (f.url.empty()) throw UsageError("no fleet store: give --url URL (or RACKPROF_FLEET_URL)");
    try {
        storage::fleet::check_fleet_url(f.url);
    } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("--url: ") + e.what());
    }
    return fleet::fleet_connection(f);
}

service::Selection selection_of(const std::string& text) {
    try {
        return service::parse_selection(service::parse_query_string(text));
    } catch (const service::ServiceError& e) {
        throw UsageError(e.what());
    }
}

// A selection merged: an empty one is the job's fault (2), an unreachable store a failure (1).
std::shared_ptr<gmon::ExportInput> input_of(service::FleetSource& fleet, const std::string& text) {
    try {
        return service::fleet_input(fleet, selection_of(text));
    } catch (const service::ServiceError& e) {
        if (e.failure() == service::Failure::kNotReady) throw std::runtime_error(e.what());
        throw UsageError(e.what());
    }
}

std::filesystem::path elf_dir() {
    return std::filesystem::temp_directory_path() /
           ("rackprof-fleet-firmware-" + std::to_string(::getuid()));
}

int run_sessions(service::FleetSource& fleet, const FleetArgs& cl) {
    std::vector<storage::SessionInfo> sessions;
    try {
        sessions = fleet.select(selection_of(cl.select));
    } catch (const service::ServiceError& e) {
        if (e.failure() == service::Failure::kNotReady) throw std::runtime_error(e.what());
        throw UsageError(e.what());
    }
    nlohmann::json out = nlohmann::json::array();
    for (const auto& s : sessions) {
        out.push_back({{"id", s.id},
                       {"board", s.spec.board},
                       {"origin", s.spec.link},
                       {"build_id", service::build_id_of(s)},
                       {"state", s.state},
                       {"started_ns", s.spec.started_ns},
                       {"arcs", s.counters.arcs},
                       {"pc_samples", s.counters.pc_samples}});
    }
    std::cout << out.dump(2) << "\n";
    return 0;
}

int run_profile(service::FleetSource& fleet, const FleetArgs& cl) {
    const auto input = input_of(fleet, cl.select);
    const auto& summary = input->summary;
    std::cerr << "rackprof: merged " << summary["sessions"].size() << " fleet session(s) of "
              << summary["boards"].size() << " board(s)\n";
    if (const auto& format = cl.export_format) {
        if (!gmon::find_export_format(*format) || gmon::find_export_format(*format)->paged)
            throw UsageError("--export: not a selection's format: " + *format);
        const std::string& out = cl.output;
        if (out == "-") {
            gmon::export_to(*format, input, [](std::string_view chunk) {
                std::cout.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
            });
        } else {
            std::vector<std::uint8_t> bytes;
            gmon::export_to(*format, input, [&](std::string_view chunk) {
                bytes.insert(bytes.end(), chunk.begin(), chunk.end());
            });
            gmon::write_file_atomically(out, bytes);
            std::cerr << "rackprof: wrote " << out << "\n";
        }
        return 0;
    }
    if (!input->source.elf) throw std::runtime_error("no firmware in the fleet names functions");
    const gmon::Profile profile = gmon::profile_of(input->source, input->profile_options);
    if (cl.report == "text") {
        std::cout << gmon::render_gprof_text(profile);
        return 0;
    }
    gmon::JsonReportOptions options;
    options.top = cl.top;
    options.more_fields = [&](gmon::JsonStream& out) { out.field("selection", summary); };
    std::string text;
    gmon::JsonStream out(text, -1, 0, gmon::JsonStream::ErrorHandler::replace);
    gmon::write_profile_json(out, profile, options);
    std::cout << text << "\n";
    return 0;
}

int run_fleet_diff(service::FleetSource& fleet, const FleetArgs& cl) {
    gmon::DiffOptions options;
    for (const auto& rule : cl.fail_on) {
        try {
            options.gates.push_back(gmon::parse_gate_rule(rule));
        } catch (const std::invalid_argument& e) {
            throw UsageError(e.what());
        }
    }
    if (cl.alpha) options.alpha = *cl.alpha;
    const auto a = input_of(fleet, cl.a);
    const auto b = input_of(fleet, cl.b);
    if (!a->source.elf || !b->source.elf)
        throw std::runtime_error("no firmware in the fleet names functions");
    try {  // the service's rule, as rackprof diff and GET /api/v1/diff apply it
        service::require_one_build(a->summary, b->summary,
                                   cl.by_name || a->summary.value("matched_by_name", false) ||
                                       b->summary.value("matched_by_name", false),
                                   cl.a, cl.b);
    } catch (const service::ServiceError& e) {
        throw UsageError(std::string(e.what()) + " (rackprof fleet diff: --merge by_name)");
    }
    gmon::ProfileDiff diff;
    try {
        diff =
            gmon::diff_profiles(gmon::profile_of(a->source), gmon::profile_of(b->source), options);
    } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("cannot compare: ") + e.what());
    }
    if (cl.json) {
        std::cout << gmon::diff_json(diff, a->summary, b->summary).dump(2) << "\n";
    } else {
        std::cout << gmon::render_diff_text(diff, cl.a, cl.b);
    }
    return diff.failed() ? 1 : 0;
}

// `fleet prune`: one pass of fleet retention, what it removed on stdout as JSON.
int run_fleet_prune(const FleetArgs& cl) {
    std::int64_t days = 0;
    if (cl.config) days = config::load_config(*cl.config).fleet.keep_sessions_days;
    if (cl.keep_sessions_days) days = *cl.keep_sessions_days;
    if (days == 0) {
        std::cerr << "rackprof: fleet prune: keep_sessions_days is 0 (keep forever): nothing to "
                     "do\n";
        return 0;
    }
    storage::fleet::FleetStore store(connection_of(cl));
    const std::int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
    const std::int64_t before = now - days * 86'400'000'000'000;
    const storage::fleet::FleetPruned pruned = store.prune(before, days);
    std::cerr << "rackprof: fleet prune: " << pruned.sessions_deleted
              << " session(s) that ended more than " << days << " day(s) ago removed ("
              << pruned.months_dropped.size() << " month partition(s) dropped whole)\n";
    std::cout << nlohmann::json{{"keep_sessions_days", days},
                                {"before_ns", before},
                                {"sessions_deleted", pruned.sessions_deleted},
                                {"months_dropped", pruned.months_dropped}}
                     .dump()
              << "\n";
    return 0;
}

// Where the fleet store is: declared on `fleet`, given before or after its command.
void add_connection_options(CLI::App& app, FleetArgs& args) {
    const std::string group = "connection";
    app.add_option("--url", args.url,
                   "postgresql://user@host:port/db (default: RACKPROF_FLEET_URL); no\n"
                   "password in it")
        ->type_name("URL")
        ->group(group);
    app.add_option("--password-file", args.password_file,
                   "the password (first line); else PGPASSWORD, PGPASSFILE or ~/.pgpass")
        ->type_name("FILE")
        ->group(group);
    app.add_option("--sslmode", args.sslmode, "passed to libpq")->type_name("MODE")->group(group);
    app.add_option("--sslrootcert", args.sslrootcert, "passed to libpq")
        ->type_name("FILE")
        ->group(group);
    app.add_option("--config", args.config,
                   "take all of these from a daemon configuration's [fleet] (and for\n"
                   "prune, keep_sessions_days)")
        ->type_name("FILE")
        ->group(group);
}

CLI::App& add_fleet_subcommand(CLI::App& fleet, const std::string& name,
                               const std::string& description) {
    CLI::App& app = *fleet.add_subcommand(name, description);
    app.fallthrough();  // the connection's options after the command's name
    return app;
}

void add_select_option(CLI::App& app, FleetArgs& args) {
    app.add_option("--select", args.select, "the sessions: the API's selection, plus bench=")
        ->type_name("SELECTION")
        ->required();
}

void add_profile_options(CLI::App& app, FleetArgs& args) {
    add_select_option(app, args);
    app.add_option("--report", args.report, "text | json (default: text)")
        ->type_name("R")
        ->check(CLI::IsMember({"text", "json"}));
    add_count(app, "--top", args.top, "JSON: at most N flat-profile rows and call-graph entries")
        ->type_name("N");
    app.add_option("--export", args.export_format,
                   "write FORMAT (convert's, not the paged ones) instead of a report")
        ->type_name("FORMAT");
    app.add_option("-o", args.output, "where --export writes (default: - for standard output)")
        ->type_name("FILE");
}

void add_fleet_diff_options(CLI::App& app, FleetArgs& args) {
    app.add_option("A", args.a, "a selection")->required();
    app.add_option("B", args.b, "another selection, to compare with")->required();
    app.add_flag("--json", args.json, "print the diff as JSON (schema rackprof.diff/1)");
    app.add_option("--fail-on", args.fail_on, "a CI gate, as for rackprof diff (repeatable)")
        ->type_name("RULE")
        ->expected(1)
        ->allow_extra_args(false)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    app.add_option("--alpha", args.alpha, "family-wise significance level (default 0.01)")
        ->type_name("P")
        ->check(probability());
    app.add_option_function<std::string>(
           "--merge",
           [&args](const std::string& how) {
               if (how != "by_name")
                   throw CLI::ValidationError("--merge", "the only way is by_name");
               args.by_name = true;
           },
           "by_name: compare two builds with functions matched by name (else refused, exit 2)")
        ->type_name("by_name");
}

}  // namespace

CommandRun add_fleet_command(CLI::App& root) {
    auto args = std::make_shared<FleetArgs>();
    CLI::App& fleet = add_command(
        root, "fleet", "read the shared fleet store (PostgreSQL): sessions, merged profiles, diffs",
        kFleetAbout);
    fleet.require_subcommand(1);
    add_connection_options(fleet, *args);
    CLI::App& sessions = add_fleet_subcommand(fleet, "sessions", "a selection's sessions, as JSON");
    add_select_option(sessions, *args);
    CLI::App& profile =
        add_fleet_subcommand(fleet, "profile", "a selection's merged profile, or an export of it");
    add_profile_options(profile, *args);
    CLI::App& diff = add_fleet_subcommand(fleet, "diff", "two selections compared");
    add_fleet_diff_options(diff, *args);
    CLI::App& prune = add_fleet_subcommand(
        fleet, "prune", "remove the sessions that ended more than N days ago (retention)");
    prune
        .add_option("--keep-sessions-days", args->keep_sessions_days,
                    "N (else [fleet] keep_sessions_days of --config; 0 or none: nothing to do)")
        ->type_name("N")
        ->check(in_range(0, static_cast<double>(config::kMaxRetentionDays), "a number of days"));
    return [args, &prune, &sessions, &profile] {
        if (prune.parsed()) return run_fleet_prune(*args);
        service::FleetSource source(connection_of(*args), elf_dir());
        if (sessions.parsed()) return run_sessions(source, *args);
        if (profile.parsed()) return run_profile(source, *args);
        return run_fleet_diff(source, *args);
    };
}

}  // namespace rackprof::daemon::app
