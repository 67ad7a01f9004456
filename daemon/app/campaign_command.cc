// `rackprof campaign`: a counter campaign (framed protocol v3) against a simulated board: the
// planner's configurations go down the wire as COUNTER_CONFIG frames, the board's answers come
// back through the real decoder, until every function is measured or bounded below n %.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "campaign/host_wire.h"
#include "campaign/metric.h"
#include "campaign/planner.h"
#include "daemon/app/command_line.h"
#include "daemon/app/commands.h"
#include "daemon/sim/counter_board.h"

namespace rackprof::daemon {

namespace {

constexpr const char* kUsage = R"(usage: rackprof campaign [options]

Finds every function whose share of a metric is at least n % on a board with few counters
(the ARC paper, §3.5): each run measures K functions' inclusive counts; a callee whose callers
bound it below n % (M(f) <= sum of M(callers), for a monotone metric) is never measured.
The board is simulated (counts exact); every configuration and answer crosses the framed
protocol v3 encoding (COUNTER_CONFIG down, FUNCTION_COUNTS and RUN_TOTALS up).

options:
  --sim MODEL        the simulated board's counter model (default: layers)
  --functions N      layers: how many functions (default: 60)
  --seed N           the model's seed (default: 1)
  --core ARCH        the counters the core has: armv7-m | armv7e-m | armv8-m.main (all six
                     DWT counters) | armv6-m | armv8-m.base (none) (default: armv7-m)
  --metric NAME      a metric (default: cycles; built in: cycles, instructions, stall_cycles,
                     sleep_cycles, cpi, stall_fraction, or a primary counter such as LSUCNT)
  --metrics FILE     more metric definitions, one a line: [monotone] NAME = FORMULA
  --threshold N      find every function with at least N % of the metric (default: 5)
  --slots K          functions measured per run (default: 4; at most the target's slots)
  --quiet            only the result and the summary, not every run
)";

std::string percent(double part, double whole) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%6.2f %%", whole > 0 ? 100.0 * part / whole : 0.0);
    return buf;
}

// A metric's value: whole counts as integers, anything else with six digits.
std::string value_text(double v) {
    char buf[48];
    if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15) {
        std::snprintf(buf, sizeof buf, "%.0f", v);
    } else {
        std::snprintf(buf, sizeof buf, "%.6g", v);
    }
    return buf;
}

}  // namespace

int run_campaign(const std::vector<std::string>& args) {
    const CommandLine cl(args,
                         {"--sim", "--functions", "--seed", "--core", "--metric", "--metrics",
                          "--threshold", "--slots"},
                         {"--quiet", "--help"});
    if (cl.has("--help")) {
        std::cout << kUsage;
        return 0;
    }
    if (!cl.positionals().empty())
        throw UsageError("unexpected argument '" + cl.positionals()[0] + "'");
    const std::string core = cl.get("--core", "armv7-m");
    const auto available = campaign::core_counters(core);
    if (!available)
        throw UsageError("unknown core '" + core + "' (known: " + campaign::core_names() + ")");
    campaign::MetricSet metrics = campaign::MetricSet::builtin();
    if (const auto file = cl.get("--metrics")) {
        std::ifstream in(*file);
        if (!in) throw UsageError("cannot read " + *file);
        std::stringstream text;
        text << in.rdbuf();
        try {
            metrics.add(text.str());
        } catch (const campaign::MetricError& e) {
            throw UsageError(*file + ": " + e.what());
        }
    }
    const campaign::Metric* metric = nullptr;
    try {
        metric = &metrics.get(cl.get("--metric", "cycles"));
    } catch (const campaign::MetricError& e) {
        throw UsageError(e.what());
    }
    double threshold = 0;
    try {
        threshold = std::stod(cl.get("--threshold", "5"));
    } catch (const std::exception&) {
        throw UsageError("--threshold: a percentage, e.g. 5");
    }
    const std::uint64_t slots = cl.get_uint("--slots", 4);

    CounterModelOptions board_options;
    board_options.model = cl.get("--sim", "layers");
    board_options.functions = cl.get_uint("--functions", 60);
    board_options.seed = cl.get_uint("--seed", 1);
    board_options.counters = *available;
    CounterBoard board(board_options);

    // The static call graph, as the firmware's code gives it.
    campaign::CallGraph graph;
    for (const auto& f : board.functions()) graph.add(f.name, f.addr);
    for (std::size_t f = 0; f < board.functions().size(); ++f) {
        for (const auto& [callee, times] : board.functions()[f].calls) graph.add_call(f, callee);
    }

    campaign::HostWire wire(graph);
    wire.feed(board.start());
    if (!wire.capabilities())
        throw std::runtime_error("the board did not announce its counters (no COUNTERS item)");
    const auto caps = *wire.capabilities();
    const std::size_t k = std::min<std::size_t>(slots, caps.slots);
    campaign::Planner planner(graph, metrics, *metric, caps.counters, {k, threshold});
    const bool quiet = cl.has("--quiet");
    std::cout << "board: " << board_options.model << ", " << graph.functions.size()
              << " functions, core " << core << " (" << campaign::mask_names(caps.counters) << "), "
              << static_cast<int>(caps.slots) << " slots\n"
              << "metric: " << metric->name << " = " << metric->formula
              << (metric->monotone ? " (monotone: pruning)" : " (not monotone: no pruning)")
              << ", counters " << campaign::mask_names(metric->primaries) << "\n"
              << "threshold: " << threshold << " %, " << k << " functions per run\n";
    std::uint64_t config_bytes = 0, answer_bytes = 0;
    campaign::run_campaign(
        planner, wire,
        [&](const std::vector<std::uint8_t>& frame) {
            config_bytes += frame.size();
            auto answer = board.receive(frame);
            answer_bytes += answer.size();
            return answer;
        },
        [&](const campaign::RunPlan& plan, const campaign::RunResult& result) {
            if (quiet) return;
            const double total = metrics.evaluate(*metric, result.totals);
            std::cout << "run " << plan.run << ": COUNTER_CONFIG "
                      << campaign::mask_names(plan.counters) << " ->";
            for (std::size_t f : plan.functions) std::cout << " " << graph.functions[f].name;
            std::cout << "\n";
            for (std::size_t i = 0; i < result.functions.size(); ++i) {
                const auto& [f, counts] = result.functions[i];
                const double v = metrics.evaluate(*metric, counts);
                std::cout << "    " << graph.functions[f].name << ": " << value_text(v) << " ("
                          << percent(v, total) << "), " << result.calls[i] << " calls\n";
            }
            std::size_t open = 0, pruned = 0;
            for (const auto& v : planner.verdicts()) {
                open += v.state == campaign::FunctionState::kOpen;
                pruned += v.state == campaign::FunctionState::kPruned;
            }
            std::cout << "    -> " << pruned << " pruned, " << open << " still open\n";
        });
    const double total = planner.total();
    std::cout << "\nfunctions with at least " << threshold << " % of " << metric->name << " ("
              << value_text(total) << " in all):\n";
    for (std::size_t f : planner.found()) {
        const auto& v = planner.verdicts()[f];
        std::cout << "  " << percent(v.value, total) << "  " << value_text(v.value) << "  "
                  << graph.functions[f].name << " (run " << v.run << ", " << v.calls << " calls)\n";
    }
    std::size_t measured = 0, pruned = 0;
    for (const auto& v : planner.verdicts()) {
        measured += v.state == campaign::FunctionState::kMeasured;
        pruned += v.state == campaign::FunctionState::kPruned;
    }
    std::cout << "\nruns needed with pruning: " << planner.runs() << " (" << measured
              << " functions measured, " << pruned << " pruned)\n"
              << "runs to measure every function (ceil(N/K) = ceil(" << graph.functions.size()
              << "/" << k << ")): " << planner.runs_without_pruning() << "\n"
              << "wire: " << config_bytes << " bytes down, " << answer_bytes << " bytes up, "
              << wire.stats().frames_bad << " bad frames\n";
    return 0;
}

}  // namespace rackprof::daemon
