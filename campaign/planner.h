// The campaign planner (the ARC paper, §3.5): find every function whose share of a metric is at
// least n % when one run can measure only K functions. It descends the call graph from its
// roots: for a monotone metric M(f) <= sum of M(p) over f's callers p, so once the callers are
// measured (or bounded) below the threshold, f is pruned without a run. A non-monotone metric
// gives no bound: every function is measured (ceil(N / K) runs).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "campaign/metric.h"

namespace rackprof::campaign {

// The static call graph: functions and, per function, the functions that call it.
struct CallGraph {
    struct Function {
        std::string name;
        std::uint32_t addr = 0;
    };
    std::vector<Function> functions;
    std::vector<std::vector<std::size_t>> callers;  // by callee index; duplicates ignored

    std::size_t add(std::string name, std::uint32_t addr);
    void add_call(std::size_t caller, std::size_t callee);
};

struct PlannerOptions {
    std::size_t slots = 4;           // functions measured per run (K)
    double threshold_percent = 5.0;  // find every function with a share >= this (n)
};

// One run's configuration.
struct RunPlan {
    std::uint16_t run = 0;
    CounterMask counters = 0;
    std::vector<std::size_t> functions;  // indices into the call graph
};

// What a run measured: per function of its plan, the inclusive counts; the run's totals.
struct RunResult {
    std::uint16_t run = 0;
    std::vector<std::pair<std::size_t, CounterValues>> functions;
    std::vector<std::uint64_t> calls;  // parallel to functions
    CounterValues totals{};
};

enum class FunctionState { kOpen, kMeasured, kPruned };

struct FunctionVerdict {
    FunctionState state = FunctionState::kOpen;
    double value = 0;         // measured: the metric's value
    double bound = 0;         // pruned (or open): the bound that was known
    std::uint64_t calls = 0;  // measured
    std::uint16_t run = 0;    // the run that measured it
};

class Planner {
  public:
    // Throws std::invalid_argument for no slots, a threshold outside (0, 100], or a metric
    // needing a counter the core lacks (`available`).
    Planner(const CallGraph& graph, const MetricSet& metrics, const Metric& metric,
            CounterMask available, PlannerOptions options);

    // The next run, or nothing when every function is measured or pruned.
    std::optional<RunPlan> next();
    // Records a run's measurements (its plan's functions; others are ignored) and prunes.
    // Throws std::invalid_argument for a result of no outstanding run.
    void record(const RunResult& result);

    bool done() const;
    bool prunes() const { return metric_.monotone; }
    int runs() const { return runs_; }
    // Runs needed to measure every function without pruning: ceil(N / K).
    int runs_without_pruning() const;
    double total() const { return total_.value_or(0); }  // the metric over the whole run
    double threshold_value() const;
    const std::vector<FunctionVerdict>& verdicts() const { return verdicts_; }
    // Functions measured at or above the threshold, the largest first.
    std::vector<std::size_t> found() const;

  private:
    void update_bounds();

    const CallGraph& graph_;
    const MetricSet& metrics_;
    const Metric& metric_;
    PlannerOptions options_;
    std::vector<FunctionVerdict> verdicts_;
    std::vector<int> depth_;  // distance from a root (callers excluded self-calls)
    std::optional<double> total_;
    std::optional<RunPlan> outstanding_;
    int runs_ = 0;
};

// One run of the workload for a plan: what it measured (a board over the wire, a debugger).
using Measure = std::function<RunResult(const RunPlan&)>;

// Drives a planner to the end: each plan measured and recorded; `on_run` (if set) sees each
// plan with its result. Throws std::runtime_error for a result of another run.
void run_campaign(Planner& planner, const Measure& measure,
                  const std::function<void(const RunPlan&, const RunResult&)>& on_run = {});

}  // namespace rackprof::campaign
