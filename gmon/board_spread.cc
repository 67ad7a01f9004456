#include "gmon/board_spread.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string_view>

#include "gmon/sampling_stats.h"

namespace rackprof::gmon {
namespace {

nlohmann::json percent_interval(std::uint64_t k, std::uint64_t n) {
    const auto [lo, hi] = wilson_interval(k, n);
    return nlohmann::json::array({100.0 * lo, 100.0 * hi});
}

double percent(std::uint64_t k, std::uint64_t n) {
    return n ? 100.0 * static_cast<double>(k) / static_cast<double>(n) : 0.0;
}

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

nlohmann::json board_spread_json(const std::vector<std::string>& names,
                                 std::size_t functions_omitted,
                                 const std::vector<BoardSamples>& boards, double alpha) {
    std::vector<const std::map<std::string, std::uint64_t>*> per_board;
    std::uint64_t fleet_samples = 0;
    nlohmann::json board_list = nlohmann::json::array();
    for (const auto& b : boards) {
        per_board.push_back(&b.function);
        fleet_samples += b.samples;
        board_list.push_back({{"board", b.board},
                              {"calls", b.calls},
                              {"samples", b.samples},
                              {"sessions", b.sessions}});
    }
    const double per_test =
        alpha / static_cast<double>(std::max<std::size_t>(1, names.size() * boards.size()));
    nlohmann::json functions = nlohmann::json::array();
    for (const auto& name : names) {
        std::uint64_t fleet_k = 0;
        for (const auto& counts : per_board) {
            const auto it = counts->find(name);
            if (it != counts->end()) fleet_k += it->second;
        }
        // The reference is the median board's share, not the pooled rest: one deviating board
        // would otherwise pull the rest's share and make every other board look deviant.
        std::vector<double> shares;
        for (std::size_t i = 0; i < boards.size(); ++i) {
            const auto it = per_board[i]->find(name);
            const std::uint64_t n = boards[i].samples;
            if (n)
                shares.push_back(
                    (it == per_board[i]->end() ? 0.0 : static_cast<double>(it->second)) /
                    static_cast<double>(n));
        }
        const double reference = median(shares);
        nlohmann::json rows = nlohmann::json::array();
        double sum = 0, low = 100, high = 0;
        for (std::size_t i = 0; i < boards.size(); ++i) {
            const auto it = per_board[i]->find(name);
            const std::uint64_t k = it == per_board[i]->end() ? 0 : it->second;
            const std::uint64_t n = boards[i].samples;
            const double share = percent(k, n);
            sum += share;
            low = std::min(low, share);
            high = std::max(high, share);
            // Is this board's count a plausible draw at the typical board's share?
            const double p = boards.size() > 1 && n > 0 ? binomial_two_sided(k, n, reference) : 1.0;
            rows.push_back({{"board", boards[i].board},
                            {"interval", percent_interval(k, n)},
                            {"outside", p < per_test},
                            {"p_value", p},
                            {"percent", share},
                            {"samples", k}});
        }
        const double count = static_cast<double>(std::max<std::size_t>(1, boards.size()));
        functions.push_back({{"boards", std::move(rows)},
                             {"fleet_interval", percent_interval(fleet_k, fleet_samples)},
                             {"fleet_percent", percent(fleet_k, fleet_samples)},
                             {"max_percent", boards.empty() ? 0.0 : high},
                             {"mean_percent", sum / count},
                             {"min_percent", boards.empty() ? 0.0 : low},
                             {"name", name}});
    }
    return {{"boards", std::move(board_list)},
            {"functions", std::move(functions)},
            {"functions_omitted", functions_omitted},
            {"interval", "Wilson score interval, 95 %"},
            {"test",
             "exact binomial test of each board's samples against the median board's share "
             "(one deviating board cannot move it), Bonferroni-corrected over boards x "
             "functions, alpha " +
                 std::to_string(alpha).substr(0, 4)}};
}

}  // namespace rackprof::gmon
