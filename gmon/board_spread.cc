#include "gmon/board_spread.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string_view>

#include "gmon/sampling_stats.h"

namespace rackprof::gmon {
namespace {

double median(std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    const std::size_t mid = v.size() / 2;
    return v.size() % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

}  // namespace

std::size_t default_spread_limit(std::size_t boards) {
    constexpr std::size_t kTests = 20000, kFewest = 20;
    return std::max(kFewest, kTests / std::max<std::size_t>(1, boards));
}

std::vector<std::string> spread_functions(const Profile& p, const JsonReportOptions& trim,
                                          std::size_t limit, std::size_t* omitted) {
    std::vector<std::string> names;
    std::set<std::string_view> seen;  // a name twice (static functions): one row
    std::size_t left_out = 0;
    const double total = p.total_time > 0 ? p.total_time : 1.0;
    for (const std::size_t s : p.flat_order) {
        const ProfileNode& n = p.nodes[s];
        if (n.self_time <= 0) continue;
        if (100 * n.self_time / total < trim.min_percent) continue;
        if (trim.top && names.size() + left_out >= trim.top) break;
        if (!seen.insert(p.symbols[s].name).second) continue;
        if (limit && names.size() >= limit) {
            ++left_out;
        } else {
            names.push_back(p.symbols[s].name);
        }
    }
    if (omitted) *omitted = left_out;
    return names;
}

nlohmann::json board_spread_json(const Profile& fleet, const std::vector<BoardSamples>& boards,
                                 const JsonReportOptions& trim, double alpha) {
    std::size_t omitted = 0;
    const auto names = spread_functions(fleet, trim, default_spread_limit(boards.size()), &omitted);
    return board_spread_json(names, omitted, boards, alpha);
}

void write_board_spread(JsonStream& out, const std::vector<std::string>& names,
                        std::size_t functions_omitted, const std::vector<BoardSamples>& boards,
                        double alpha) {
    const auto interval = [&out](std::uint64_t k, std::uint64_t n) {
        const auto [lo, hi] = wilson_interval(k, n);
        out.begin_array().value(100.0 * lo).value(100.0 * hi).end_array();
    };
    std::uint64_t fleet_samples = 0;
    // Keys in alphabetical order, as nlohmann::json's objects print them.
    out.begin_object().key("boards").begin_array();
    for (const auto& b : boards) {
        fleet_samples += b.samples;
        out.begin_object().field("board", b.board).field("calls", b.calls);
        out.field("samples", b.samples).key("sessions").begin_array();
        for (const auto id : b.sessions) out.value(id);
        out.end_array().end_object();
    }
    out.end_array();
    const double per_test =
        alpha / static_cast<double>(std::max<std::size_t>(1, names.size() * boards.size()));
    std::vector<std::uint64_t> counts(boards.size());
    std::vector<double> shares;
    out.key("functions").begin_array();
    for (const auto& name : names) {
        std::uint64_t fleet_k = 0;
        shares.clear();
        for (std::size_t i = 0; i < boards.size(); ++i) {
            const auto it = boards[i].function.find(name);
            counts[i] = it == boards[i].function.end() ? 0 : it->second;
            fleet_k += counts[i];
            if (const std::uint64_t n = boards[i].samples)
                shares.push_back(static_cast<double>(counts[i]) / static_cast<double>(n));
        }
        // The reference is the median board's share, not the pooled rest: one deviating board
        // would otherwise pull the rest's share and make every other board look deviant.
        const double reference = median(shares);
        double sum = 0, low = 100, high = 0;
        out.begin_object().key("boards").begin_array();
        for (std::size_t i = 0; i < boards.size(); ++i) {
            const std::uint64_t k = counts[i], n = boards[i].samples;
            const double share = share_percent(k, n);
            sum += share;
            low = std::min(low, share);
            high = std::max(high, share);
            // Is this board's count a plausible draw at the typical board's share?
            const double p = boards.size() > 1 && n > 0 ? binomial_two_sided(k, n, reference) : 1.0;
            out.begin_object().field("board", boards[i].board).key("interval");
            interval(k, n);
            out.field("outside", p < per_test).field("p_value", p).field("percent", share);
            out.field("samples", k).end_object();
        }
        out.end_array().key("fleet_interval");
        interval(fleet_k, fleet_samples);
        const double count = static_cast<double>(std::max<std::size_t>(1, boards.size()));
        out.field("fleet_percent", share_percent(fleet_k, fleet_samples))
            .field("max_percent", boards.empty() ? 0.0 : high)
            .field("mean_percent", sum / count)
            .field("min_percent", boards.empty() ? 0.0 : low)
            .field("name", name)
            .end_object();
    }
    out.end_array().field("functions_omitted", std::uint64_t{functions_omitted});
    out.field("interval", "Wilson score interval, 95 %");
    out.field("test",
              "exact binomial test of each board's samples against the median board's share "
              "(one deviating board cannot move it), Bonferroni-corrected over boards x "
              "functions, alpha " +
                  std::to_string(alpha).substr(0, 4));
    out.end_object();
}

nlohmann::json board_spread_json(const std::vector<std::string>& names,
                                 std::size_t functions_omitted,
                                 const std::vector<BoardSamples>& boards, double alpha) {
    std::string text;
    JsonStream out(text, -1, 0, JsonStream::ErrorHandler::replace);
    write_board_spread(out, names, functions_omitted, boards, alpha);
    return nlohmann::json::parse(text);
}

}  // namespace rackprof::gmon
