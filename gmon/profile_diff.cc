#include "gmon/profile_diff.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <system_error>

#include "gmon/decimal_text.h"
#include "gmon/sampling_stats.h"

namespace rackprof::gmon {
namespace {

std::uint64_t rounded(double samples) {
    return samples > 0 ? static_cast<std::uint64_t>(std::llround(samples)) : 0;
}

// What a symbol is matched by: its name; in line mode its name, file and line ("loop
// (WAIT1.c:154)"), the same wherever the line's code lies, so two builds compare by line too.
std::string key_of(const Profile& p, const ProfileSymbol& s) {
    if (!p.lines || s.file.empty()) return s.name;
    return s.name + " (" + source_file_name(s.file) + ":" + std::to_string(s.line) + ")";
}

// Each named function's samples and calls (static functions of the same name add up: a diff
// across builds can only match by name); by line in line mode.
std::map<std::string, FunctionSide> sides_of(const Profile& p) {
    std::map<std::string, FunctionSide> out;
    for (std::size_t i = 0; i < p.symbols.size(); ++i) {
        const auto& node = p.nodes[i];
        const std::uint64_t calls = node.ncalls + node.self_calls;
        if (node.self_time <= 0 && node.child_time <= 0 && calls == 0) continue;
        auto& side = out[key_of(p, p.symbols[i])];
        side.self_samples += rounded(node.self_time);
        side.total_samples += rounded(node.self_time + node.child_time);
        side.calls += calls;
    }
    return out;
}

std::uint64_t total_calls(const Profile& p) {
    std::uint64_t calls = 0;
    for (const auto& node : p.nodes) calls += node.ncalls + node.self_calls;
    return calls;
}

std::optional<double> relative(double a, double b) {
    if (a <= 0) return std::nullopt;
    return b / a - 1.0;
}

double rate_change_limit(const GateRule& rule) {
    return 1.0 + rule.fraction;
}

}  // namespace

GateRule parse_gate_rule(std::string_view text) {
    const auto bad = [&](const std::string& why) {
        return std::invalid_argument("--fail-on '" + std::string(text) + "': " + why +
                                     " (e.g. 'self>+5%', 'total>+10%', 'calls>+0%', 'self<-20%')");
    };
    GateRule rule;
    rule.text = std::string(text);
    const auto op = text.find_first_of("<>");
    if (op == std::string_view::npos) throw bad("no '>' or '<'");
    const std::string_view metric = text.substr(0, op);
    if (metric == "self") {
        rule.metric = GateRule::Metric::kSelf;
    } else if (metric == "total") {
        rule.metric = GateRule::Metric::kTotal;
    } else if (metric == "calls") {
        rule.metric = GateRule::Metric::kCalls;
    } else {
        throw bad("the metric is self, total or calls");
    }
    rule.rise = text[op] == '>';
    std::string value(text.substr(op + 1));
    if (value.empty() || value.back() != '%') throw bad("the change ends in '%'");
    value.pop_back();
    // One optional sign, then a plain decimal (decimal_text.h).
    const std::string_view digits = std::string_view(value).substr(
        !value.empty() && (value[0] == '+' || value[0] == '-') ? 1 : 0);
    double percent = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), percent);
    if (!is_plain_decimal(digits) || ec != std::errc() || end != digits.data() + digits.size() ||
        !std::isfinite(percent)) {
        throw bad("not a number");
    }
    rule.fraction = (value[0] == '-' ? -percent : percent) / 100.0;
    if (rule.fraction <= -1.0) throw bad("a change below -100% cannot happen");
    return rule;
}

bool ProfileDiff::failed() const {
    return std::any_of(gates.begin(), gates.end(),
                       [](const GateResult& g) { return !g.functions.empty(); });
}

namespace {

// Whether `rule` trips for function `f`: calls are counts, compared exactly; samples trip only
// beyond sampling error (the ratio exceeds the limit even allowing for it, at `per_test`).
bool gate_trips(const GateRule& rule, const FunctionDiff& f, const ProfileDiff& d, bool samples,
                double per_test) {
    if (rule.metric == GateRule::Metric::kCalls) {
        // As a share of all the program's calls (time is per call too): two runs of one build
        // that ran for different lengths have the same shares. Division rounds correctly, so
        // equal shares compare equal, and +0% trips on any real rise. A side with no calls at
        // all has no shares: its counts are compared as they are.
        const auto of = [&d](std::uint64_t calls, std::uint64_t all) {
            return d.per_call ? static_cast<long double>(calls) / static_cast<long double>(all)
                              : static_cast<long double>(calls);
        };
        const long double limit = of(f.a.calls, d.calls_a) * rate_change_limit(rule);
        const long double b = of(f.b.calls, d.calls_b);
        return rule.rise ? b > limit : b < limit;
    }
    if (!samples) return false;
    const bool self = rule.metric == GateRule::Metric::kSelf;
    const std::uint64_t ka = self ? f.a.self_samples : f.a.total_samples;
    const std::uint64_t kb = self ? f.b.self_samples : f.b.total_samples;
    const double p =
        rule.rise ? rate_ratio_above(ka, d.exposure_a, kb, d.exposure_b, rate_change_limit(rule))
                  : rate_ratio_below(ka, d.exposure_a, kb, d.exposure_b, rate_change_limit(rule));
    return p < per_test;
}

}  // namespace

ProfileDiff diff_profiles(const Profile& a, const Profile& b, const DiffOptions& options) {
    ProfileDiff d;
    d.alpha = options.alpha;
    d.samples_a = a.total_samples;
    d.samples_b = b.total_samples;
    d.calls_a = total_calls(a);
    d.calls_b = total_calls(b);
    d.seconds_per_sample_a = a.seconds_per_sample();
    d.seconds_per_sample_b = b.seconds_per_sample();
    if ((d.samples_a == 0 && d.calls_a == 0) || (d.samples_b == 0 && d.calls_b == 0))
        throw std::invalid_argument("a side of the diff has neither samples nor calls");
    d.per_call = d.calls_a > 0 && d.calls_b > 0;
    d.exposure_a = static_cast<double>(d.per_call ? d.calls_a : d.samples_a);
    d.exposure_b = static_cast<double>(d.per_call ? d.calls_b : d.samples_b);

    const auto sides_a = sides_of(a), sides_b = sides_of(b);
    std::map<std::string, FunctionDiff> by_name;
    for (const auto& [name, side] : sides_a) by_name[name].a = side;
    for (const auto& [name, side] : sides_b) by_name[name].b = side;
    for (const auto& [name, f] : by_name)
        if (f.a.self_samples + f.b.self_samples > 0) ++d.compared;
    const double per_test = d.alpha / static_cast<double>(std::max<std::size_t>(1, d.compared));
    const bool samples = d.exposure_a > 0 && d.exposure_b > 0 && d.samples_a && d.samples_b;

    const auto rate_change = [&](std::uint64_t ka, std::uint64_t kb) -> std::optional<double> {
        if (!samples || ka == 0) return std::nullopt;
        return (static_cast<double>(kb) / d.exposure_b) / (static_cast<double>(ka) / d.exposure_a) -
               1.0;
    };
    for (auto& [name, f] : by_name) {
        f.name = name;
        f.self_change = rate_change(f.a.self_samples, f.b.self_samples);
        f.total_change = rate_change(f.a.total_samples, f.b.total_samples);
        f.calls_change = relative(static_cast<double>(f.a.calls), static_cast<double>(f.b.calls));
        if (samples) {
            f.p_value = rate_ratio_two_sided(f.a.self_samples, d.exposure_a, f.b.self_samples,
                                             d.exposure_b);
        }
        if (f.p_value < per_test) {
            const double ra = static_cast<double>(f.a.self_samples) / d.exposure_a;
            const double rb = static_cast<double>(f.b.self_samples) / d.exposure_b;
            f.direction = rb > ra ? 1 : -1;
        }
    }

    for (const auto& rule : options.gates) {
        GateResult result{rule, {}};
        for (const auto& [name, f] : by_name) {
            if (gate_trips(rule, f, d, samples, per_test)) result.functions.push_back(name);
        }
        d.gates.push_back(std::move(result));
    }

    for (auto& [name, f] : by_name) d.functions.push_back(std::move(f));
    const auto moved = [&](const FunctionDiff& f) {
        return std::fabs(static_cast<double>(f.b.self_samples) * d.seconds_per_sample_b -
                         static_cast<double>(f.a.self_samples) * d.seconds_per_sample_a);
    };
    std::stable_sort(d.functions.begin(), d.functions.end(),
                     [&](const FunctionDiff& x, const FunctionDiff& y) {
                         if ((x.direction != 0) != (y.direction != 0)) return x.direction != 0;
                         return moved(x) > moved(y);
                     });
    return d;
}

std::string diff_test_description(const ProfileDiff& d) {
    char alpha[32];
    std::snprintf(alpha, sizeof alpha, "%g", d.alpha);
    return std::string(
               "exact conditional binomial test of two Poisson rates (a function's "
               "samples ") +
           (d.per_call ? "per call of the whole program" : "per sample") +
           " in a and in b: given both counts' sum, b's count is binomial under no change), "
           "two-sided, Bonferroni-corrected over the " +
           std::to_string(d.compared) + " functions with samples, family-wise alpha " + alpha +
           "; gates ask the one-sided question 'is the change beyond the threshold' with the "
           "same test; calls are compared exactly, as shares of all the program's calls";
}

namespace {

nlohmann::json side_json(const FunctionSide& s, double seconds_per_sample, std::uint64_t samples) {
    const auto percent = [&](std::uint64_t k) {
        return samples ? 100.0 * static_cast<double>(k) / static_cast<double>(samples) : 0.0;
    };
    // The share's sampling error (95 % Wilson score interval), for views that show each side.
    const auto [low, high] = wilson_interval(s.self_samples, samples);
    return {{"self_samples", s.self_samples},
            {"self_seconds", static_cast<double>(s.self_samples) * seconds_per_sample},
            {"self_percent", percent(s.self_samples)},
            {"self_percent_interval", {100.0 * low, 100.0 * high}},
            {"total_seconds", static_cast<double>(s.total_samples) * seconds_per_sample},
            {"total_percent", percent(s.total_samples)},
            {"calls", s.calls}};
}

nlohmann::json optional_json(const std::optional<double>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

const char* change_name(int direction) {
    return direction > 0 ? "slower" : direction < 0 ? "faster" : "none";
}

}  // namespace

nlohmann::json diff_json(const ProfileDiff& d, const nlohmann::json& a, const nlohmann::json& b) {
    nlohmann::json functions = nlohmann::json::array();
    for (const auto& f : d.functions) {
        auto sa = side_json(f.a, d.seconds_per_sample_a, d.samples_a);
        auto sb = side_json(f.b, d.seconds_per_sample_b, d.samples_b);
        const double delta = sb["self_percent"].get<double>() - sa["self_percent"].get<double>();
        functions.push_back({{"name", f.name},
                             {"a", std::move(sa)},
                             {"b", std::move(sb)},
                             {"self_change", optional_json(f.self_change)},
                             {"total_change", optional_json(f.total_change)},
                             {"calls_change", optional_json(f.calls_change)},
                             {"self_percent_delta", delta},
                             {"p_value", f.p_value},
                             {"significant", f.direction != 0},
                             {"change", change_name(f.direction)}});
    }
    nlohmann::json out = {{"schema", "rackprof.diff/1"},
                          {"a",
                           {{"selection", a},
                            {"total_samples", d.samples_a},
                            {"total_calls", d.calls_a},
                            {"seconds_per_sample", d.seconds_per_sample_a}}},
                          {"b",
                           {{"selection", b},
                            {"total_samples", d.samples_b},
                            {"total_calls", d.calls_b},
                            {"seconds_per_sample", d.seconds_per_sample_b}}},
                          {"normalization", d.per_call ? "per call" : "per sample"},
                          {"test",
                           {{"name", "exact conditional binomial test of two rates, Bonferroni"},
                            {"alpha", d.alpha},
                            {"functions_compared", d.compared},
                            {"description", diff_test_description(d)}}},
                          {"functions", std::move(functions)}};
    if (!d.gates.empty()) {
        nlohmann::json gates = nlohmann::json::array();
        for (const auto& g : d.gates)
            gates.push_back({{"rule", g.rule.text},
                             {"tripped", !g.functions.empty()},
                             {"functions", g.functions}});
        out["gates"] = std::move(gates);
        out["failed"] = d.failed();
    }
    return out;
}

namespace {

std::string format(const char* fmt, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, fmt, v);
    return buf;
}

std::string change_text(const std::optional<double>& change, bool exact_zero_new) {
    if (!change) return exact_zero_new ? "new" : "-";
    return format("%+.1f%%", *change * 100.0);
}

}  // namespace

std::string render_diff_text(const ProfileDiff& d, const std::string& a, const std::string& b) {
    std::string out;
    out += "a: " + a + "\n   " + std::to_string(d.samples_a) + " samples, " +
           std::to_string(d.calls_a) + " calls\n";
    out += "b: " + b + "\n   " + std::to_string(d.samples_b) + " samples, " +
           std::to_string(d.calls_b) + " calls\n";
    out += "test: " + diff_test_description(d) + "\n\n";
    char line[512];
    std::snprintf(line, sizeof line, "%10s %10s %9s %9s %12s %12s %9s %9s  %-7s %s\n", "self a/s",
                  "self b/s", "self", "total", "calls a", "calls b", "calls", "p", "change",
                  "name");
    out += line;
    for (const auto& f : d.functions) {
        std::snprintf(line, sizeof line, "%10.3f %10.3f %9s %9s %12llu %12llu %9s %9.2g  %-7s %s\n",
                      static_cast<double>(f.a.self_samples) * d.seconds_per_sample_a,
                      static_cast<double>(f.b.self_samples) * d.seconds_per_sample_b,
                      change_text(f.self_change, f.b.self_samples > 0).c_str(),
                      change_text(f.total_change, f.b.total_samples > 0).c_str(),
                      static_cast<unsigned long long>(f.a.calls),
                      static_cast<unsigned long long>(f.b.calls),
                      change_text(f.calls_change, f.b.calls > 0).c_str(), f.p_value,
                      change_name(f.direction), f.name.c_str());
        out += line;
    }
    for (const auto& g : d.gates) {
        out += "\ngate " + g.rule.text + ": ";
        if (g.functions.empty()) {
            out += "passed";
        } else {
            out += "TRIPPED by";
            for (const auto& name : g.functions) out += " " + name;
        }
    }
    if (!d.gates.empty()) out += "\n";
    return out;
}

}  // namespace rackprof::gmon
