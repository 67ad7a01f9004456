#include "campaign/planner.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <stdexcept>

namespace rackprof::campaign {

std::size_t CallGraph::add(std::string name, std::uint32_t addr) {
    functions.push_back({std::move(name), addr});
    callers.emplace_back();
    return functions.size() - 1;
}

void CallGraph::add_call(std::size_t caller, std::size_t callee) {
    auto& c = callers.at(callee);
    if (caller >= functions.size()) throw std::out_of_range("caller out of range");
    if (std::find(c.begin(), c.end(), caller) == c.end()) c.push_back(caller);
}

Planner::Planner(const CallGraph& graph, const MetricSet& metrics, const Metric& metric,
                 CounterMask available, PlannerOptions options)
    : graph_(graph),
      metrics_(metrics),
      metric_(metric),
      options_(options),
      verdicts_(graph.functions.size()) {
    if (options_.slots == 0) throw std::invalid_argument("a run needs at least one slot");
    if (options_.slots > 60) options_.slots = 60;  // what one COUNTER_CONFIG can name
    if (!(options_.threshold_percent > 0 && options_.threshold_percent <= 100))
        throw std::invalid_argument("the threshold is a share in (0, 100] %");
    if (metric_.primaries & ~available)
        throw std::invalid_argument(
            "metric '" + metric_.name + "' needs " + mask_names(metric_.primaries & ~available) +
            ", which the core does not have (it has " + mask_names(available) + ")");
    // Depth from the roots (functions nobody else calls), breadth first.
    const std::size_t n = graph_.functions.size();
    depth_.assign(n, std::numeric_limits<int>::max());
    std::vector<std::vector<std::size_t>> callees(n);
    std::deque<std::size_t> queue;
    for (std::size_t f = 0; f < n; ++f) {
        bool root = true;
        for (std::size_t p : graph_.callers[f]) {
            if (p != f) {
                root = false;
                callees[p].push_back(f);
            }
        }
        if (root) {
            depth_[f] = 0;
            queue.push_back(f);
        }
    }
    while (!queue.empty()) {
        const std::size_t f = queue.front();
        queue.pop_front();
        for (std::size_t c : callees[f]) {
            if (depth_[c] > depth_[f] + 1) {
                depth_[c] = depth_[f] + 1;
                queue.push_back(c);
            }
        }
    }
    for (auto& v : verdicts_) v.bound = std::numeric_limits<double>::infinity();
}

int Planner::runs_without_pruning() const {
    const std::size_t n = graph_.functions.size();
    return static_cast<int>((n + options_.slots - 1) / options_.slots);
}

double Planner::threshold_value() const {
    return total_ ? *total_ * options_.threshold_percent / 100.0
                  : std::numeric_limits<double>::infinity();
}

bool Planner::done() const {
    return std::none_of(verdicts_.begin(), verdicts_.end(),
                        [](const FunctionVerdict& v) { return v.state == FunctionState::kOpen; });
}

std::optional<RunPlan> Planner::next() {
    if (outstanding_) return outstanding_;
    std::vector<std::size_t> open;
    for (std::size_t f = 0; f < verdicts_.size(); ++f) {
        if (verdicts_[f].state == FunctionState::kOpen) open.push_back(f);
    }
    if (open.empty()) return std::nullopt;
    // Descend from the roots: first the functions whose callers are all measured (their bound
    // cannot tighten any more), then by depth, the largest bound first.
    auto frontier = [&](std::size_t f) {
        return std::all_of(graph_.callers[f].begin(), graph_.callers[f].end(), [&](std::size_t p) {
            return p == f || verdicts_[p].state == FunctionState::kMeasured;
        });
    };
    std::stable_sort(open.begin(), open.end(), [&](std::size_t a, std::size_t b) {
        const bool fa = frontier(a), fb = frontier(b);
        if (fa != fb) return fa;
        if (depth_[a] != depth_[b]) return depth_[a] < depth_[b];
        return verdicts_[a].bound > verdicts_[b].bound;
    });
    if (open.size() > options_.slots) open.resize(options_.slots);
    RunPlan plan;
    plan.run = static_cast<std::uint16_t>(runs_ + 1);
    plan.counters = metric_.primaries;
    plan.functions = std::move(open);
    outstanding_ = plan;
    return plan;
}

void Planner::record(const RunResult& result) {
    if (!outstanding_ || result.run != outstanding_->run)
        throw std::invalid_argument("run " + std::to_string(result.run) + " was not asked for");
    const double total = metrics_.evaluate(metric_, result.totals);
    // The first run's totals stand for the program; a deterministic workload repeats them.
    if (!total_) total_ = total;
    for (std::size_t i = 0; i < result.functions.size(); ++i) {
        const auto& [f, counts] = result.functions[i];
        if (std::find(outstanding_->functions.begin(), outstanding_->functions.end(), f) ==
            outstanding_->functions.end())
            continue;
        FunctionVerdict& v = verdicts_[f];
        v.state = FunctionState::kMeasured;
        v.value = metrics_.evaluate(metric_, counts);
        v.calls = i < result.calls.size() ? result.calls[i] : 0;
        v.run = result.run;
    }
    outstanding_.reset();
    ++runs_;
    if (metric_.monotone) update_bounds();
}

// Each open function's bound: the sum over its callers (itself excluded) of their measured
// values or bounds, at most the total. Iterated to a fixed point: every step uses valid upper
// bounds, so every result is one (cycles of open functions keep the total as theirs).
void Planner::update_bounds() {
    const double total = *total_;
    const std::size_t n = verdicts_.size();
    for (auto& v : verdicts_) {
        if (v.state == FunctionState::kOpen) v.bound = total;
    }
    for (std::size_t pass = 0; pass <= n; ++pass) {
        bool changed = false;
        for (std::size_t f = 0; f < n; ++f) {
            FunctionVerdict& v = verdicts_[f];
            if (v.state != FunctionState::kOpen) continue;
            bool has_caller = false;
            double sum = 0;
            for (std::size_t p : graph_.callers[f]) {
                if (p == f) continue;
                has_caller = true;
                const FunctionVerdict& pv = verdicts_[p];
                sum += pv.state == FunctionState::kMeasured ? std::max(0.0, pv.value) : pv.bound;
            }
            const double bound = has_caller ? std::min(total, sum) : total;
            if (bound < v.bound) {
                v.bound = bound;
                changed = true;
            }
        }
        if (!changed) break;
    }
    const double threshold = threshold_value();
    for (auto& v : verdicts_) {
        if (v.state == FunctionState::kOpen && v.bound < threshold)
            v.state = FunctionState::kPruned;
    }
}

std::vector<std::size_t> Planner::found() const {
    std::vector<std::size_t> out;
    const double threshold = threshold_value();
    for (std::size_t f = 0; f < verdicts_.size(); ++f) {
        if (verdicts_[f].state == FunctionState::kMeasured && verdicts_[f].value >= threshold)
            out.push_back(f);
    }
    std::stable_sort(out.begin(), out.end(), [&](std::size_t a, std::size_t b) {
        return verdicts_[a].value > verdicts_[b].value;
    });
    return out;
}

void run_campaign(Planner& planner, const Measure& measure,
                  const std::function<void(const RunPlan&, const RunResult&)>& on_run) {
    while (const auto plan = planner.next()) {
        const RunResult result = measure(*plan);
        if (result.run != plan->run)
            throw std::runtime_error("asked for run " + std::to_string(plan->run) +
                                     ", the target answered run " + std::to_string(result.run));
        planner.record(result);
        if (on_run) on_run(*plan, result);
    }
}

}  // namespace rackprof::campaign
