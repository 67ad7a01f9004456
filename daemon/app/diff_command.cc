// `rackprof diff A B`: two profiles compared function by function, and the CI regression gate
// (--fail-on). A and B are read as convert reads its input (daemon/app/profile_inputs.h); the
// comparison is gmon/profile_diff.h's, the same the API's /diff serves.
#include <iostream>
#include <stdexcept>

#include "daemon/app/command_line.h"
#include "daemon/app/commands.h"
#include "daemon/app/profile_inputs.h"
#include "gmon/profile_diff.h"
#include "gmon/profile_pipeline.h"
#include "gmon/sync_check.h"

namespace rackprof::daemon {
namespace {

constexpr const char* kUsage = R"(usage: rackprof diff A B [options]

Compares two profiles function by function: self and total time, calls, their changes, and
whether each change is beyond sampling error. A and B are each a capture file, a gmon.out, or
(with --db) a selection of stored sessions such as 'build_id=3f2a…&board=b1' (the API's syntax).
They may be different builds: functions are matched by name.

Self and total time are compared per call of the whole program when both sides have calls (so
runs of different lengths compare, and one function's slowdown does not make the others look
faster), else as shares of the samples; the test is the exact conditional binomial test of two
Poisson rates, Bonferroni-corrected over the functions compared. Calls are counts: compared
exactly.

options:
  --fail-on RULE   a CI gate (repeatable, or comma-separated): self>+5%, total>+10%,
                   calls>+0%, self<-20%. Trips for a function whose change is past the
                   threshold beyond sampling error (calls: exactly).
  --alpha X        family-wise significance level (default 0.01)
  --json           print the diff as JSON (schema rackprof.diff/1) instead of the text report
  --elf FILE       the firmware's ELF (for capture files and gmon.out; a selection's sessions
                   name theirs)
  --db FILE        the daemon's database, for selections; --config FILE for tag=
  --protocol, --format, --addr-bytes, --rate, --bin-bytes, --tpiu, --tpiu-stream,
  --framed-port, --orbstat-port, --console-port, --force: as for rackprof convert

exit status: 0 no gate tripped, 1 a gate tripped (the functions are named), 2 usage errors and
inputs that cannot be read or compared (no such file or session, an empty selection, mixed
builds without merge=by_name), so a CI job tells a regression from a broken job.
)";

std::vector<gmon::GateRule> gate_rules(const CommandLine& cl) {
    std::vector<gmon::GateRule> rules;
    for (const auto& value : cl.get_all("--fail-on")) {
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

double alpha_of(const CommandLine& cl) {
    const auto text = cl.get("--alpha");
    if (!text) return 0.01;
    try {
        std::size_t used = 0;
        const double alpha = std::stod(*text, &used);
        if (used == text->size() && alpha > 0 && alpha < 1) return alpha;
    } catch (const std::exception&) {
    }
    throw UsageError("--alpha must be a number between 0 and 1");
}

std::string label_of(const std::string& argument, const nlohmann::json& summary) {
    if (!summary.contains("sessions")) return argument;
    return argument + " (" + std::to_string(summary["sessions"].size()) + " session(s))";
}

constexpr const char* kSyncUsage = R"(usage: rackprof check-sync FIXED DITHERED [options]

The synchronisation alarm. A sampling period that divides the program's own period samples the
same few PCs every time, and the histogram shows the phase, not the time, however long it runs.
Capture the program twice: FIXED with the target's fixed sampling period, DITHERED with its
period dithered (target-fw: -DRACKPROF_SAMPLE_DITHER=64; the simulator: --dither N). Each
function's share of the samples is compared between the two (exact conditional binomial test,
Bonferroni over the functions); shares that differ beyond sampling error mean the fixed-period
profile is synchronised with the program: trust the dithered one. FIXED and DITHERED are read as
for rackprof diff (capture files, gmon.out, or with --db selections).

options:
  --alpha X        family-wise significance level (default 0.01)
  --json           print the check as JSON (schema rackprof.sync-check/1)
  --elf FILE, --db FILE, --protocol, --format, ...: as for rackprof diff

exit status: 0 no synchronisation, 1 synchronised (the functions are named), 2 usage errors and
inputs that cannot be read or compared.
)";

// An input that cannot be read is the job's fault, not a finding: exit 2, not 1.
std::shared_ptr<gmon::ExportInput> readable_input(const std::string& argument,
                                                  const CommandLine& cl) {
    try {
        return profile_input_of(argument, cl);
    } catch (const UsageError&) {
        throw;
    } catch (const std::exception& e) {
        throw UsageError(e.what());
    }
}

}  // namespace

int run_check_sync(const std::vector<std::string>& args) {
    auto valued = kProfileInputValued;
    valued.insert("--alpha");
    auto flags = kProfileInputFlags;
    flags.insert({"--json", "--help", "-h"});
    const CommandLine cl(args, valued, flags);
    if (cl.has("--help") || cl.has("-h")) {
        std::cout << kSyncUsage;
        return 0;
    }
    if (cl.positionals().size() != 2)
        throw UsageError("check-sync needs two profiles, FIXED and DITHERED\n" +
                         std::string(kSyncUsage));
    const auto& fixed = cl.positionals()[0];
    const auto& dithered = cl.positionals()[1];
    const auto input_fixed = readable_input(fixed, cl);
    const auto input_dithered = readable_input(dithered, cl);
    gmon::SyncCheck check;
    try {
        check = gmon::check_sync(
            gmon::profile_of(input_fixed->source, input_fixed->profile_options),
            gmon::profile_of(input_dithered->source, input_dithered->profile_options),
            alpha_of(cl));
    } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("cannot compare ") + fixed + " and " + dithered + ": " +
                         e.what());
    }
    if (cl.has("--json")) {
        std::cout << gmon::sync_check_json(check).dump(2) << "\n";
    } else {
        std::cout << gmon::render_sync_check_text(check, fixed, dithered);
    }
    std::cout.flush();
    if (!check.synchronised()) return 0;
    std::cerr << "rackprof: " << gmon::sync_warning(check) << "\n";
    return 1;
}

int run_diff(const std::vector<std::string>& args) {
    auto valued = kProfileInputValued;
    valued.insert({"--fail-on", "--alpha"});
    auto flags = kProfileInputFlags;
    flags.insert({"--json", "--help", "-h"});
    const CommandLine cl(args, valued, flags);
    if (cl.has("--help") || cl.has("-h")) {
        std::cout << kUsage;
        return 0;
    }
    if (cl.positionals().size() != 2)
        throw UsageError("diff needs two profiles, A and B\n" + std::string(kUsage));
    gmon::DiffOptions options;
    options.gates = gate_rules(cl);
    options.alpha = alpha_of(cl);
    const auto& a = cl.positionals()[0];
    const auto& b = cl.positionals()[1];
    // An input that cannot be read is the job's fault, not a regression: exit 2, not 1.
    const auto input_of = [&cl](const std::string& argument) {
        try {
            return profile_input_of(argument, cl);
        } catch (const UsageError&) {
            throw;
        } catch (const std::exception& e) {
            throw UsageError(e.what());
        }
    };
    const auto input_a = input_of(a);
    const auto input_b = input_of(b);
    const gmon::Profile profile_a = gmon::profile_of(input_a->source, input_a->profile_options);
    const gmon::Profile profile_b = gmon::profile_of(input_b->source, input_b->profile_options);
    gmon::ProfileDiff diff;
    try {
        diff = gmon::diff_profiles(profile_a, profile_b, options);
    } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("cannot compare ") + a + " and " + b + ": " + e.what());
    }
    if (cl.has("--json")) {
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

}  // namespace rackprof::daemon
