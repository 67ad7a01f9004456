// `rackprof fleet`: the fleet store (PostgreSQL) from the command line, for CI: a selection's
// sessions, its merged profile or an export of it, and a diff of two selections. The merge is
// the one the daemon serves (service::fleet_input: merged_input over the SQL sum).
#include <unistd.h>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "daemon/app/command_line.h"
#include "daemon/app/commands.h"
#include "daemon/config/config.h"
#include "daemon/fleet/fleet_pusher.h"
#include "daemon/service/fleet_source.h"
#include "daemon/service/rack_service.h"
#include "gmon/export.h"
#include "gmon/gmon_writer.h"
#include "gmon/profile_diff.h"
#include "gmon/profile_pipeline.h"
#include "gmon/report.h"
#include "storage/fleet/fleet_store.h"

namespace rackprof::daemon {
namespace {

constexpr const char* kUsage = R"(usage: rackprof fleet sessions --select SELECTION [connection]
       rackprof fleet profile --select SELECTION [--report text|json] [--top N]
                              [--export FORMAT -o FILE] [connection]
       rackprof fleet diff A B [--json] [--fail-on RULE] [--alpha P] [connection]
       rackprof fleet prune [--keep-sessions-days N] [connection]

Reads the fleet store: the PostgreSQL database many benches push their completed sessions to
([fleet] in the daemon's configuration). A SELECTION is the API's, plus bench=: e.g.
'build_id=3f2a…', 'bench=lab-a,lab-b&board=m4-1', 'tag=nightly&from=1700000000000000000'.
The merge is done by the server; functions are named from the firmware the benches pushed.

fleet prune (retention, for a daily cron job): removes the sessions that ended more than N days
ago with their aggregates (N: --keep-sessions-days, else [fleet] keep_sessions_days of
--config; 0 or none: nothing to do). A month's partitions are dropped whole once all of it is
that old, other rows deleted; benches do not push such sessions again. Raw bytes are never in
the fleet store (each bench's own retention, [storage] keep_raw_days, governs those).

connection:
  --url URL              postgresql://user@host:port/db (default: RACKPROF_FLEET_URL); no
                         password in it
  --password-file FILE   the password (first line); else PGPASSWORD, PGPASSFILE or ~/.pgpass
  --sslmode MODE, --sslrootcert FILE   passed to libpq
  --config FILE          take all of these from a daemon configuration's [fleet]

exit status: 0 ok (fleet diff: no gate tripped), 1 a diff gate tripped or the store failed,
2 usage errors and empty selections.
)";

fleet::FleetConnection connection_of(const CommandLine& cl) {
    FleetConfig f;
    if (const auto config = cl.get("--config")) f = load_config(*config).fleet;
    if (const char* env = std::getenv("RACKPROF_FLEET_URL"); env && f.url.empty()) f.url = env;
    if (const auto url = cl.get("--url")) f.url = *url;
    if (const auto p = cl.get("--password-file")) f.password_file = *p;
    if (const auto m = cl.get("--sslmode")) f.sslmode = *m;
    if (const auto c = cl.get("--sslrootcert")) f.sslrootcert = *c;
    if (f.url.empty()) throw UsageError("no fleet store: give --url URL (or RACKPROF_FLEET_URL)");
    try {
        fleet::check_fleet_url(f.url);
    } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("--url: ") + e.what());
    }
    return fleet_connection(f);
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

int run_sessions(service::FleetSource& fleet, const CommandLine& cl) {
    std::vector<storage::SessionInfo> sessions;
    try {
        sessions = fleet.select(selection_of(cl.get("--select", "")));
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

int run_profile(service::FleetSource& fleet, const CommandLine& cl) {
    const auto input = input_of(fleet, cl.get("--select", ""));
    const auto& summary = input->summary;
    std::cerr << "rackprof: merged " << summary["sessions"].size() << " fleet session(s) of "
              << summary["boards"].size() << " board(s)\n";
    if (const auto format = cl.get("--export")) {
        if (!gmon::find_export_format(*format) || gmon::find_export_format(*format)->paged)
            throw UsageError("--export: not a selection's format: " + *format);
        const std::string out = cl.get("-o", "-");
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
    if (cl.choice("--report", "text", {"text", "json"}) == "text") {
        std::cout << gmon::render_gprof_text(profile);
        return 0;
    }
    gmon::JsonReportOptions options;
    options.top = cl.get_uint("--top", 0);
    options.more_fields = [&](gmon::JsonStream& out) { out.field("selection", summary); };
    std::string text;
    gmon::JsonStream out(text, -1, 0, gmon::JsonStream::ErrorHandler::replace);
    gmon::write_profile_json(out, profile, options);
    std::cout << text << "\n";
    return 0;
}

int run_fleet_diff(service::FleetSource& fleet, const CommandLine& cl) {
    if (cl.positionals().size() != 3) throw UsageError("fleet diff needs two selections, A and B");
    gmon::DiffOptions options;
    for (const auto& rule : cl.get_all("--fail-on")) {
        try {
            options.gates.push_back(gmon::parse_gate_rule(rule));
        } catch (const std::invalid_argument& e) {
            throw UsageError(e.what());
        }
    }
    if (const auto alpha = cl.get("--alpha")) options.alpha = cl.get_rate("--alpha");
    const auto a = input_of(fleet, cl.positionals()[1]);
    const auto b = input_of(fleet, cl.positionals()[2]);
    if (!a->source.elf || !b->source.elf)
        throw std::runtime_error("no firmware in the fleet names functions");
    gmon::ProfileDiff diff;
    try {
        diff =
            gmon::diff_profiles(gmon::profile_of(a->source), gmon::profile_of(b->source), options);
    } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("cannot compare: ") + e.what());
    }
    if (cl.has("--json")) {
        std::cout << gmon::diff_json(diff, a->summary, b->summary).dump(2) << "\n";
    } else {
        std::cout << gmon::render_diff_text(diff, cl.positionals()[1], cl.positionals()[2]);
    }
    return diff.failed() ? 1 : 0;
}

// `fleet prune`: one pass of fleet retention, what it removed on stdout as JSON.
int run_fleet_prune(const CommandLine& cl) {
    std::int64_t days = 0;
    if (const auto config = cl.get("--config"))
        days = load_config(*config).fleet.keep_sessions_days;
    if (const auto given = cl.get("--keep-sessions-days")) {
        try {
            std::size_t end = 0;
            days = std::stoll(*given, &end);
            if (end != given->size()) throw std::invalid_argument("trailing text");
        } catch (const std::exception&) {
            days = -1;
        }
        if (days < 0 || days > kMaxRetentionDays)
            throw UsageError("--keep-sessions-days must be a number of days from 1 to " +
                             std::to_string(kMaxRetentionDays) + " (0: keep forever)");
    }
    if (days == 0) {
        std::cerr << "rackprof: fleet prune: keep_sessions_days is 0 (keep forever): nothing to "
                     "do\n";
        return 0;
    }
    fleet::FleetStore store(connection_of(cl));
    const std::int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
    const std::int64_t before = now - days * 86'400'000'000'000;
    const fleet::FleetPruned pruned = store.prune(before, days);
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

}  // namespace

int run_fleet(const std::vector<std::string>& args) {
    const CommandLine cl(
        args,
        {"--url", "--password-file", "--sslmode", "--sslrootcert", "--config", "--select",
         "--report", "--top", "--export", "-o", "--fail-on", "--alpha", "--keep-sessions-days"},
        {"--json", "--help", "-h"});
    if (cl.has("--help") || cl.has("-h")) {
        std::cout << kUsage;
        return 0;
    }
    if (cl.positionals().empty())
        throw UsageError("fleet needs sessions, profile, diff or prune\n" + std::string(kUsage));
    const std::string what = cl.positionals()[0];
    if (what == "prune") return run_fleet_prune(cl);
    if (what != "sessions" && what != "profile" && what != "diff")
        throw UsageError("fleet: unknown command '" + what + "'\n" + std::string(kUsage));
    if (what != "diff" && !cl.has("--select")) throw UsageError(what + " needs --select SELECTION");
    service::FleetSource fleet(connection_of(cl), elf_dir());
    if (what == "sessions") return run_sessions(fleet, cl);
    if (what == "profile") return run_profile(fleet, cl);
    return run_fleet_diff(fleet, cl);
}

}  // namespace rackprof::daemon
