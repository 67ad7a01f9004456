// Two profiles compared function by function (matched by name, so two builds compare; two
// line-mode profiles, ProfileOptions::lines, by function, file and line): self
// and total time, calls, their changes, and whether each change is beyond sampling error; and
// the CI gate's rules ("self>+5%") judged on the same tests. JSON (rackprof.diff/1) and text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gmon/profile.h"

namespace rackprof::gmon {

// "self>+5%", "total>+10%", "calls>+0%", "self<-20%": the metric, the direction, the change.
struct GateRule {
    enum class Metric { kSelf, kTotal, kCalls };
    Metric metric = Metric::kSelf;
    bool rise = true;       // '>': trips on a rise past `fraction`; '<': on a fall past it
    double fraction = 0.0;  // +5% -> 0.05, -20% -> -0.20
    std::string text;       // as written
};
// Throws std::invalid_argument naming what is wrong.
GateRule parse_gate_rule(std::string_view text);

struct DiffOptions {
    double alpha = 0.01;  // family-wise: divided among the functions compared (Bonferroni)
    std::vector<GateRule> gates;
};

struct FunctionSide {
    std::uint64_t self_samples = 0;   // rounded from gprof's overlap-proportional credit
    std::uint64_t total_samples = 0;  // self + children as gprof propagates them, rounded
    std::uint64_t calls = 0;
};

struct FunctionDiff {
    std::string name;
    FunctionSide a, b;
    std::optional<double> self_change;  // relative change of the normalized rate (b/a - 1)
    std::optional<double> total_change;
    std::optional<double> calls_change;  // of the raw counts: exact
    double p_value = 1.0;                // self time, two-sided, r = 1
    int direction = 0;                   // +1 slower, -1 faster, 0 not significant
};

struct GateResult {
    GateRule rule;
    std::vector<std::string> functions;  // that trip it
};

struct ProfileDiff {
    // Self and total time are compared per unit of work: per call of the whole program when
    // both sides have calls (so runs of different lengths compare, and one function's slowdown
    // does not make every other function look faster), per sample otherwise (shares).
    bool per_call = false;
    double exposure_a = 0, exposure_b = 0;  // total calls, or total samples
    std::uint64_t samples_a = 0, samples_b = 0, calls_a = 0, calls_b = 0;
    double seconds_per_sample_a = 0, seconds_per_sample_b = 0;
    std::size_t compared = 0;  // functions with samples on either side (the Bonferroni count)
    double alpha = 0.01;
    std::vector<FunctionDiff> functions;  // significant first, then by self-time change
    std::vector<GateResult> gates;
    bool failed() const;
};

// Throws std::invalid_argument when the profiles cannot be compared (no samples and no calls
// on one side).
ProfileDiff diff_profiles(const Profile& a, const Profile& b, const DiffOptions& options = {});

// The diff as JSON (schema rackprof.diff/1); `a` and `b` describe the sides (a selection's
// summary, a file's name).
nlohmann::json diff_json(const ProfileDiff& diff, const nlohmann::json& a, const nlohmann::json& b);
// The same as a text report; `a` and `b` label the sides.
std::string render_diff_text(const ProfileDiff& diff, const std::string& a, const std::string& b);

// What the test is, in one sentence, for reports and the API.
std::string diff_test_description(const ProfileDiff& diff);

}  // namespace rackprof::gmon
