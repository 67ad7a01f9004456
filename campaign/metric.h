// Metrics: formulas over the primary counters (and over other metrics), with their dependency
// graph. A metric is evaluated on one function's inclusive primary counts (or a run's totals).
//
// Definitions are text, one a line (`#` starts a comment):
//
//     monotone instructions = CYCCNT - CPICNT - EXCCNT - SLEEPCNT - LSUCNT + FOLDCNT
//     cpi = CYCCNT / instructions
//
// `+ - * /`, parentheses, numbers, primary counter names and metrics defined on earlier or later
// lines. A name is defined once; a definition that depends on itself (through any chain) is
// refused with the chain. `monotone` declares that the metric counts events, so a function's
// value is at most the sum of its callers' (the ARC paper's bound, §3.5): only then can the
// planner prune with it. A monotone metric must be additive — sums and differences of monotone
// metrics and counters, times constants — so a ratio like `cpi` or `LSUCNT / CYCCNT` (the
// share of cycles stalled, §3.6) cannot be declared monotone.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "campaign/primary_counters.h"

namespace rackprof::campaign {

// A definition the text does not allow: `line` is 1-based (0: not tied to a line).
class MetricError : public std::runtime_error {
  public:
    MetricError(int line, const std::string& message)
        : std::runtime_error(line > 0 ? "line " + std::to_string(line) + ": " + message : message),
          line_(line) {}
    int line() const { return line_; }

  private:
    int line_;
};

struct MetricExpr;  // the parsed formula

struct Metric {
    std::string name;
    std::string formula;  // as written
    bool monotone = false;
    int line = 0;
    std::vector<std::string> depends_on;  // the metrics it names directly
    CounterMask primaries = 0;            // every primary counter it needs, through any metric
    std::shared_ptr<const MetricExpr> expr;
};

class MetricSet {
  public:
    // The built-in metrics (every primary under its own name is already usable):
    //   monotone cycles = CYCCNT
    //   monotone instructions = CYCCNT - CPICNT - EXCCNT - SLEEPCNT - LSUCNT + FOLDCNT
    //   monotone stall_cycles = CPICNT + LSUCNT
    //   monotone sleep_cycles = SLEEPCNT
    //   cpi = CYCCNT / instructions
    //   stall_fraction = stall_cycles / CYCCNT
    static MetricSet builtin();
    // Parses definitions (see above) and adds them; a name already defined is refused.
    // Throws MetricError.
    void add(std::string_view text);

    const Metric* find(std::string_view name) const;
    // A metric by name, or a primary counter's name as a monotone metric of itself.
    // Throws MetricError naming the metrics there are when unknown.
    const Metric& get(std::string_view name) const;
    // NaN when a division by zero happens.
    double evaluate(const Metric& metric, const CounterValues& counts) const;
    std::vector<std::string> names() const;

  private:
    void resolve();
    double eval(const MetricExpr& e, const CounterValues& counts) const;

    std::map<std::string, Metric, std::less<>> metrics_;
};

}  // namespace rackprof::campaign
