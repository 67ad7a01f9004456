// `rackprof diff A B`: two profiles compared function by function, and the CI regression gate
// (--fail-on). A and B are read as convert reads its input (daemon/app/profile_inputs.h); the
// comparison is gmon/profile_diff.h's, the same the API's /diff serves.
#include <iostream>
#include <stdexcept>

#include "daemon/app/commands.h"
#include "daemon/app/profile_inputs.h"
#include "daemon/service/rack_service.h"
#include "daemon/service/selection.h"
#include "gmon/profile_diff.h"
#include "gmon/profile_pipeline.h"
#include "gmon/sync_check.h"

namespace rackprof::daemon::app {
namespace {

constexpr const char* kDiffAbout =
    R"(Compares two profiles function by function: self and total time, calls, their changes, and
whether each change is beyond sampling error. A and B are each a capture file, a gmon.out, or
(with --db) a selection of stored sessions such as 'build_id=3f2a…&board=b1' (the API's syntax).
Two builds are refused (exit 2, naming both build-ids) unless --merge by_name matches their
functions by name (the same name may be other code; a warning says so).

Self and total time are compared per call of the whole program when both sides have calls (so
runs of different lengths compare, and one function's slowdown does not make the others look
faster), else as shares of the samples; the test is the exact conditional binomial test of two
Poisson rates, Bonferroni-corrected over the functions compared. Calls are counts: compared
exactly. The decoding options are convert's; --elf names the functions of capture files and
gmon.out (a selection's sessions name theirs).

exit status: 0 no gate tripped, 1 a gate tripped (the functions are named), 2 usage errors and
inputs that cannot be read or compared (no such file or session, an empty selection, mixed
builds without merge=by_name), so a CI job tells a regression from a broken job.
)";

// diff's and check-sync's options.
struct DiffArgs {
    ProfileInputArgs input;
    std::string a, b;
    std::vector<std::string> fail_on;
    double alpha = 0.01;
    bool json = false;
    bool by_name = false;  // --merge by_name
    bool lines = false;    // --lines: by source line
};

std::vector<gmon::GateRule> gate_rules(const std::vector<std::string>& fail_on) {
    std::vector<gmon::GateRule> rules;
    for (const auto& value : fail_on) {
        for (std::size_t start = 0; start <= value.size();) {
            const auto comma = std::min(value.find(',', start), value.size());
            if (comma > start) {
                try {
                    rules.push_back(gmon::parse_gate_rule(value.substr(start, comma - start)));
                } catch (const std::invalid_argument& e) {
                    throw UsageError(e.what());
                }
            }
            start = comma + 1;
        }
    }
    return rules;
}

std::string label_of(const std::string& argument, const nlohmann::json& summary) {
    if (!summary.contains("sessions")) return argument;
    return argument + " (" + std::to_string(summary["sessions"].size()) + " session(s))";
}

constexpr const char* kSyncAbout =
    R"(The synchronisation alarm. A sampling period that divides the program's own period samples the
same few PCs every time, and the histogram shows the phase, not the time, however long it runs.
Capture the program twice, one build: FIXED with the target's fixed sampling period, DITHERED
with its period dithered (target-fw: -DRACKPROF_SAMPLE_DITHER=64; the simulator: --dither N);
captures of different builds are refused (exit 2). Each
function's share of the samples is compared between the two (exact conditional binomial test,
Bonferroni over the functions); shares that differ beyond sampling error mean the fixed-period
profile is synchronised with the program: trust the dithered one. FIXED and DITHERED are read as
for rackprof diff (capture files, gmon.out, or with --db selections).

exit status: 0 no synchronisation, 1 synchronised (the functions are named), 2 usage errors and
inputs that cannot be read or compared.
)";

using service::build_id_in;

// An input that cannot be read is the job's fault, not a finding: exit 2, not 1.
std::shared_ptr<gmon::ExportInput> readable_input(const std::string& argument,
                                                  const ProfileInputArgs& args) {
    try {
        return profile_input_of(argument, args);
    } catch (const UsageError&) {
        throw;
    } catch (const std::exception& e) {
        throw UsageError(e.what());
    }
}

int run_check_sync(const DiffArgs& cl) {
    const auto& fixed = cl.a;
    const auto& dithered = cl.b;
    const auto input_fixed = readable_input(fixed, cl.input);
    const auto input_dithered = readable_input(dithered, cl.input);
    // Another build's shares differ for reasons of its own: every function would be flagged.
    const std::string a = build_id_in(input_fixed->summary);
    const std::string b = build_id_in(input_dithered->summary);
    if (!a.empty() && !b.empty() && a != b) {
        throw UsageError("cannot compare " + fixed + " and " + dithered +
                         ": they are different builds (" + a + ", " + b +
                         "); the check compares two captures of one build");
    }
    gmon::SyncCheck check;
    try {
        check = gmon::check_sync(
            gmon::profile_of(input_fixed->source, input_fixed->profile_options),
            gmon::profile_of(input_dithered->source, input_dithered->profile_options), cl.alpha);
    } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("cannot compare ") + fixed + " and " + dithered + ": " +
                         e.what());
    }
    if (cl.json) {
        std::cout << gmon::sync_check_json(check).dump(2) << "\n";
    } else {
        std::cout << gmon::render_sync_check_text(check, fixed, dithered);
    }
    std::cout.flush();
    if (!check.synchronised()) return 0;
    std::cerr << "rackprof: " << gmon::sync_warning(check) << "\n";
    return 1;
}

// The service's rule (require_one_build): another build only with --merge by_name, and then
// said on stderr, as the dashboard says it, so the report (or its JSON) stays what it is.
void check_builds(const DiffArgs& cl, const nlohmann::json& a, const nlohmann::json& b) {
    try {
        service::require_one_build(a, b, cl.by_name, cl.a, cl.b);
    } catch (const service::ServiceError& e) {
        throw UsageError(std::string(e.what()) + " (rackprof diff: --merge by_name)");
    }
    const std::string build_a = build_id_in(a), build_b = build_id_in(b);
    if (build_a.empty() || build_b.empty() || build_a == build_b) return;
    std::cerr << "rackprof: warning: different firmware (build-id " << build_a.substr(0, 12)
              << " vs " << build_b.substr(0, 12)
              << "): functions matched by name; the same name may be different code\n";
}

int run_diff(const DiffArgs& cl) {
    gmon::DiffOptions options;
    options.gates = gate_rules(cl.fail_on);
    options.alpha = cl.alpha;
    const auto& a = cl.a;
    const auto& b = cl.b;
    const auto input_a = readable_input(a, cl.input);
    const auto input_b = readable_input(b, cl.input);
    check_builds(cl, input_a->summary, input_b->summary);
    input_a->profile_options.lines = cl.lines;
    input_b->profile_options.lines = cl.lines;
    const gmon::Profile profile_a = gmon::profile_of(input_a->source, input_a->profile_options);
    const gmon::Profile profile_b = gmon::profile_of(input_b->source, input_b->profile_options);
    gmon::ProfileDiff diff;
    try {
        diff = gmon::diff_profiles(profile_a, profile_b, options);
    } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("cannot compare ") + a + " and " + b + ": " + e.what());
    }
    if (cl.json) {
        std::cout << gmon::diff_json(diff, input_a->summary, input_b->summary).dump(2) << "\n";
    } else {
        std::cout << gmon::render_diff_text(diff, label_of(a, input_a->summary),
                                            label_of(b, input_b->summary));
    }
    std::cout.flush();
    if (!diff.failed()) return 0;
    for (const auto& gate : diff.gates) {
        if (gate.functions.empty()) continue;
        std::cerr << "rackprof: gate " << gate.rule.text << " tripped by";
        for (const auto& name : gate.functions) std::cerr << " " << name;
        std::cerr << "\n";
    }
    return 1;
}

// The options both declare: the profiles, the inputs' decoding, --alpha and --json.
std::shared_ptr<DiffArgs> add_diff_options(CLI::App& app, const char* a, const char* b,
                                           const char* json) {
    auto args = std::make_shared<DiffArgs>();
    app.add_option(a, args->a, "a capture file, a gmon.out, or with --db a selection")->required();
    app.add_option(b, args->b, "the same, to compare with")->required();
    app.add_option("--alpha", args->alpha, "family-wise significance level (default 0.01)")
        ->type_name("X")
        ->check(CLI::Validator(
            [](std::string& value) {
                std::size_t used = 0;
                double alpha = 0;
                try {
                    alpha = std::stod(value, &used);
                } catch (const std::exception&) {
                }
                return used == value.size() && alpha > 0 && alpha < 1
                           ? std::string()
                           : "must be a number between 0 and 1";
            },
            "0<X<1"));
    app.add_flag("--json", args->json, json);
    add_profile_input_options(app, args->input);
    return args;
}

}  // namespace

CommandRun add_diff_command(CLI::App& root) {
    CLI::App& app = add_command(
        root, "diff", "compare two profiles function by function; a CI gate with --fail-on",
        kDiffAbout);
    auto args = add_diff_options(
        app, "A", "B",
        "print the diff as JSON (schema rackprof.diff/1) instead of the text report");
    app.add_option("--fail-on", args->fail_on,
                   "a CI gate (repeatable, or comma-separated): self>+5%, total>+10%,\n"
                   "calls>+0%, self<-20%. Trips for a function whose change is past the\n"
                   "threshold beyond sampling error (calls: exactly).")
        ->type_name("RULE")
        ->expected(1)
        ->allow_extra_args(false)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    app.add_option_function<std::string>(
           "--merge",
           [args](const std::string& how) {
               if (how != "by_name")
                   throw CLI::ValidationError("--merge", "the only way is by_name");
               args->by_name = true;
           },
           "by_name: compare two builds with functions matched by name (else refused, exit 2)")
        ->type_name("by_name");
    app.add_flag("--lines", args->lines,
                 "compare by source line (gprof -l's symbols: function, file and line)");
    return [args] { return run_diff(*args); };
}

CommandRun add_check_sync_command(CLI::App& root) {
    CLI::App& app = add_command(
        root, "check-sync",
        "the synchronisation alarm: a fixed-period and a dithered-period profile compared",
        kSyncAbout);
    auto args = add_diff_options(app, "FIXED", "DITHERED",
                                 "print the check as JSON (schema rackprof.sync-check/1)");
    return [args] { return run_check_sync(*args); };
}

}  // namespace rackprof::daemon::app
