// `rackprof campaign`: a counter campaign (framed protocol v3) against a simulated board: the
// planner's configurations go down the wire as COUNTER_CONFIG frames, the board's answers come
// back through the real decoder, until every function is measured or bounded below n %.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "campaign/host_wire.h"
#include "campaign/metric.h"
#include "campaign/planner.h"
#include "daemon/app/commands.h"
#include "daemon/sim/counter_board.h"

namespace rackprof::daemon::app {

namespace {

constexpr const char* kCampaignAbout =
    R"(Finds every function whose share of a metric is at least n % on a board with few counters
(the ARC paper, §3.5): each run measures K functions' inclusive counts; a callee whose callers
bound it below n % (M(f) <= sum of M(callers), for a monotone metric) is never measured.
The board is simulated (counts exact); every configuration and answer crosses the framed
protocol v3 encoding (COUNTER_CONFIG down, FUNCTION_COUNTS and RUN_TOTALS up).
)";

struct CampaignArgs {
    std::string sim = "layers";
    std::uint64_t functions = 60;
    std::uint64_t seed = 1;
    std::string core = "armv7-m";
    std::string metric = "cycles";
    std::optional<std::string> metrics;
    double threshold = 5;
    std::uint64_t slots = 4;
    bool quiet = false;
};

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

// The built-in metrics and those of --metrics FILE.
campaign::MetricSet metrics_of(const CampaignArgs& cl) {
    campaign::MetricSet metrics = campaign::MetricSet::builtin();
    if (const auto& file = cl.metrics) {
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
    return metrics;
}

// One run's configuration and answers, and what the planner knows after it.
void print_run(const campaign::RunPlan& plan, const campaign::RunResult& result,
               const campaign::MetricSet& metrics, const campaign::Metric& metric,
               const campaign::CallGraph& graph, const campaign::Planner& planner) {
    const double total = metrics.evaluate(metric, result.totals);
    std::cout << "run " << plan.run << ": COUNTER_CONFIG " << campaign::mask_names(plan.counters)
              << " ->";
    for (std::size_t f : plan.functions) std::cout << " " << graph.functions[f].name;
    std::cout << "\n";
    for (std::size_t i = 0; i < result.functions.size(); ++i) {
        const auto& [f, counts] = result.functions[i];
        const double v = metrics.evaluate(metric, counts);
        std::cout << "    " << graph.functions[f].name << ": " << value_text(v) << " ("
                  << percent(v, total) << "), " << result.calls[i] << " calls\n";
    }
    std::size_t open = 0, pruned = 0;
    for (const auto& v : planner.verdicts()) {
        open += v.state == campaign::FunctionState::kOpen;
        pruned += v.state == campaign::FunctionState::kPruned;
    }
    std::cout << "    -> " << pruned << " pruned, " << open << " still open\n";
}

int run_campaign(const CampaignArgs& cl) {
    const std::string& core = cl.core;
    const auto available = campaign::core_counters(core);
    if (!available)
        throw UsageError("unknown core '" + core + "' (known: " + campaign::core_names() + ")");
    const campaign::MetricSet metrics = metrics_of(cl);
    const campaign::Metric* metric = nullptr;
    try {
        metric = &metrics.get(cl.metric);
    } catch (const campaign::MetricError& e) {
        throw UsageError(e.what());
    }
    const double threshold = cl.threshold;
    const std::uint64_t slots = cl.slots;

    sim::CounterModelOptions board_options;
    board_options.model = cl.sim;
    board_options.functions = cl.functions;
    board_options.seed = cl.seed;
    board_options.counters = *available;
    sim::CounterBoard board(board_options);

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
    const bool quiet = cl.quiet;
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
            if (!quiet) print_run(plan, result, metrics, *metric, graph, planner);
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

}  // namespace

CommandRun add_campaign_command(CLI::App& root) {
    auto args = std::make_shared<CampaignArgs>();
    CLI::App& app = add_command(
        root, "campaign",
        "a counter campaign: find every function above n % of a metric, K per run", kCampaignAbout);
    app.add_option("--sim", args->sim, "the simulated board's counter model (default: layers)")
        ->type_name("MODEL");
    add_count(app, "--functions", args->functions, "layers: how many functions (default: 60)")
        ->type_name("N");
    add_count(app, "--seed", args->seed, "the model's seed (default: 1)")->type_name("N");
    app.add_option("--core", args->core,
                   "the counters the core has: armv7-m | armv7e-m | armv8-m.main (all six\n"
                   "DWT counters) | armv6-m | armv8-m.base (none) (default: armv7-m)")
        ->type_name("ARCH");
    app.add_option("--metric", args->metric,
                   "a metric (default: cycles; built in: cycles, instructions, stall_cycles,\n"
                   "sleep_cycles, cpi, stall_fraction, or a primary counter such as LSUCNT)")
        ->type_name("NAME");
    app.add_option("--metrics", args->metrics,
                   "more metric definitions, one a line: [monotone] NAME = FORMULA")
        ->type_name("FILE");
    app.add_option("--threshold", args->threshold,
                   "find every function with at least N % of the metric (default: 5)")
        ->type_name("N")
        ->check(in_range(0, 100, "a percentage"));
    add_count(app, "--slots", args->slots,
              "functions measured per run (default: 4; at most the target's slots)")
        ->type_name("K");
    app.add_flag("--quiet", args->quiet, "only the result and the summary, not every run");
    return [args] { return run_campaign(*args); };
}

}  // namespace rackprof::daemon::app
