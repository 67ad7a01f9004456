#include "gmon/sync_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <stdexcept>

#include "gmon/sampling_stats.h"

namespace rackprof::gmon {
namespace {

// Each named function's self samples (gprof's overlap credit, rounded: the test counts).
std::map<std::string, std::uint64_t> self_samples_by_name(const Profile& p) {
    std::map<std::string, std::uint64_t> out;
    for (std::size_t i = 0; i < p.symbols.size(); ++i) {
        const double self = p.nodes[i].self_time;
        if (self <= 0) continue;
        out[p.symbols[i].name] += static_cast<std::uint64_t>(std::llround(self));
    }
    return out;
}

std::uint64_t credited(const std::map<std::string, std::uint64_t>& by_name) {
    std::uint64_t n = 0;
    for (const auto& entry : by_name) n += entry.second;
    return n;
}

std::pair<double, double> percent_interval(std::uint64_t k, std::uint64_t n) {
    const auto [low, high] = wilson_interval(k, n);
    return {100 * low, 100 * high};
}

nlohmann::json interval_json(const std::pair<double, double>& interval) {
    return nlohmann::json::array({interval.first, interval.second});
}

}  // namespace

bool SyncCheck::synchronised() const {
    return flagged() > 0;
}

std::size_t SyncCheck::flagged() const {
    return static_cast<std::size_t>(std::count_if(functions.begin(), functions.end(),
                                                  [](const SyncFunction& f) { return f.flagged; }));
}

SyncCheck check_sync(const Profile& fixed, const Profile& dithered, double alpha) {
    const auto a = self_samples_by_name(fixed), b = self_samples_by_name(dithered);
    SyncCheck check;
    check.alpha = alpha;
    // Shares of the samples credited to functions (what the flat profile's % shows).
    check.fixed_samples = credited(a);
    check.dithered_samples = credited(b);
    if (check.fixed_samples == 0 || check.dithered_samples == 0)
        throw std::invalid_argument("a side of the synchronisation check has no PC samples");
    std::map<std::string, SyncFunction> by_name;
    for (const auto& [name, k] : a) by_name[name].fixed_samples = k;
    for (const auto& [name, k] : b) by_name[name].dithered_samples = k;
    check.compared = by_name.size();
    const double per_test = alpha / static_cast<double>(std::max<std::size_t>(1, check.compared));
    const auto na = static_cast<double>(check.fixed_samples);
    const auto nb = static_cast<double>(check.dithered_samples);
    for (auto& [name, f] : by_name) {
        f.name = name;
        f.fixed_percent = share_percent(f.fixed_samples, check.fixed_samples);
        f.dithered_percent = share_percent(f.dithered_samples, check.dithered_samples);
        f.fixed_interval = percent_interval(f.fixed_samples, check.fixed_samples);
        f.dithered_interval = percent_interval(f.dithered_samples, check.dithered_samples);
        // Given both counts' sum, the dithered count is binomial when the shares are equal.
        f.p_value = rate_ratio_two_sided(f.fixed_samples, na, f.dithered_samples, nb);
        f.flagged = f.p_value < per_test;
        check.functions.push_back(std::move(f));
    }
    std::stable_sort(check.functions.begin(), check.functions.end(),
                     [](const SyncFunction& x, const SyncFunction& y) {
                         if (x.flagged != y.flagged) return x.flagged;
                         return std::fabs(x.dithered_percent - x.fixed_percent) >
                                std::fabs(y.dithered_percent - y.fixed_percent);
                     });
    return check;
}

std::string sync_warning(const SyncCheck& check) {
    if (!check.synchronised()) return {};
    std::string names;
    std::size_t listed = 0;
    for (const auto& f : check.functions) {
        if (!f.flagged || listed == 3) continue;
        char share[96];
        std::snprintf(share, sizeof share, " (%.1f %% fixed, %.1f %% dithered)", f.fixed_percent,
                      f.dithered_percent);
        names += (listed ? ", " : "") + f.name + share;
        ++listed;
    }
    if (check.flagged() > listed) names += ", ...";
    return "sampling synchronised with the program? " + std::to_string(check.flagged()) + " of " +
           std::to_string(check.compared) +
           " functions hold shares that differ beyond sampling error between the fixed and the "
           "dithered sampling period: " +
           names + ". Trust the dithered profile.";
}

nlohmann::json sync_check_json(const SyncCheck& check) {
    nlohmann::json functions = nlohmann::json::array();
    for (const auto& f : check.functions) {
        functions.push_back({{"name", f.name},
                             {"fixed",
                              {{"self_samples", f.fixed_samples},
                               {"self_percent", f.fixed_percent},
                               {"self_percent_interval", interval_json(f.fixed_interval)}}},
                             {"dithered",
                              {{"self_samples", f.dithered_samples},
                               {"self_percent", f.dithered_percent},
                               {"self_percent_interval", interval_json(f.dithered_interval)}}},
                             {"p_value", f.p_value},
                             {"flagged", f.flagged}});
    }
    const std::string warning = sync_warning(check);
    return {{"schema", "rackprof.sync-check/1"},
            {"synchronised", check.synchronised()},
            {"warning", warning.empty() ? nlohmann::json(nullptr) : nlohmann::json(warning)},
            {"fixed", {{"total_samples", check.fixed_samples}}},
            {"dithered", {{"total_samples", check.dithered_samples}}},
            {"test",
             {{"name", "exact conditional binomial test of two shares, Bonferroni"},
              {"alpha", check.alpha},
              {"functions_compared", check.compared},
              {"flagged", check.flagged()}}},
            {"functions", std::move(functions)}};
}

std::string render_sync_check_text(const SyncCheck& check, const std::string& fixed,
                                   const std::string& dithered) {
    std::string out = "fixed period:    " + fixed + " (" + std::to_string(check.fixed_samples) +
                      " samples)\ndithered period: " + dithered + " (" +
                      std::to_string(check.dithered_samples) + " samples)\n";
    char line[512];
    std::snprintf(line, sizeof line,
                  "test: exact conditional binomial test of each function's two shares, "
                  "Bonferroni over %zu functions, family-wise alpha %g\n\n",
                  check.compared, check.alpha);
    out += line;
    std::snprintf(line, sizeof line, "%8s %19s %9s %19s %9s  %-7s %s\n", "fixed %", "95% interval",
                  "dither %", "95% interval", "p", "flag", "name");
    out += line;
    for (const auto& f : check.functions) {
        std::snprintf(line, sizeof line,
                      "%8.2f  [%6.2f, %6.2f] %9.2f  [%6.2f, %6.2f] %9.2g  %-7s %s\n",
                      f.fixed_percent, f.fixed_interval.first, f.fixed_interval.second,
                      f.dithered_percent, f.dithered_interval.first, f.dithered_interval.second,
                      f.p_value, f.flagged ? "SYNC" : "", f.name.c_str());
        out += line;
    }
    const std::string warning = sync_warning(check);
    out += warning.empty() ? "\nno synchronisation: the shares agree within sampling error\n"
                           : "\nWARNING: " + warning + "\n";
    return out;
}

}  // namespace rackprof::gmon
