// `rackprof campaign`: a counter campaign against a simulated board (framed protocol v3: the
// planner's configurations go down the wire as COUNTER_CONFIG frames, the board's answers come
// back through the real decoder) or, with --link gdb://, against any board through its debug
// probe (breakpoints, counters read at each stop), until every function is measured or
// bounded below n %.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "campaign/debugger_runs.h"
#include "campaign/host_wire.h"
#include "campaign/metric.h"
#include "campaign/planner.h"
#include "daemon/app/commands.h"
#include "daemon/capture/links.h"
#include "daemon/config/link_uri.h"
#include "daemon/sim/counter_board.h"
#include "gmon/static_calls.h"
#include "gmon/symbolizer.h"
#include "probe/firmware_identity.h"
#include "probe/gdb_client.h"

namespace rackprof::daemon::app {

namespace {

constexpr const char* kCampaignAbout =
    R"(Finds every function whose share of a metric is at least n % on a board with few counters
(the ARC paper, §3.5): each run measures K functions' inclusive counts; a callee whose callers
bound it below n % (M(f) <= sum of M(callers), for a monotone metric) is never measured.
The board is simulated (counts exact); every configuration and answer crosses the framed
protocol v3 encoding (COUNTER_CONFIG down, FUNCTION_COUNTS and RUN_TOTALS up).

With --link gdb://HOST:PORT (or gdb+serial:///dev/ttyACM0) and --elf, a real board through its
debug probe, firmware unchanged: the call graph is read from the ELF's code; each run resets
the core, breaks at the entries of its K functions, at their returns and at the workload's
end (--until), and reads the cycle counter at each stop: the board's counter (--clock), else
DWT CYCCNT, else none (--metric calls measures every function's calls).
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
    std::optional<std::string> link;
    std::optional<std::string> elf;
    std::string from = "main";
    std::optional<std::string> until;
    std::optional<std::string> reset_command;
    double run_timeout = 60;
    std::optional<std::uint32_t> clock;
    bool verify = true;
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

// A metric by name (a built-in, --metrics FILE's, or a primary counter's); a usage error if
// there is none.
const campaign::Metric& metric_named(const campaign::MetricSet& metrics, const std::string& name) {
    try {
        return metrics.get(name);
    } catch (const campaign::MetricError& e) {
        throw UsageError(e.what());
    }
}

// One run's configuration and answers, and what the planner knows after it.
void print_run(const campaign::RunPlan& plan, const campaign::RunResult& result,
               const campaign::MetricSet& metrics, const campaign::Metric& metric,
               const campaign::CallGraph& graph, const campaign::Planner& planner,
               const char* how) {
    const double total = metrics.evaluate(metric, result.totals);
    std::cout << "run " << plan.run << ": " << how << " " << campaign::mask_names(plan.counters)
              << " ->";
    for (std::size_t f : plan.functions) std::cout << " " << graph.functions[f].name;
    std::cout << "\n";
    for (std::size_t i = 0; i < result.functions.size(); ++i) {
        const auto& [f, counts] = result.functions[i];
        const double v = metrics.evaluate(metric, counts);
        std::cout << "    " << graph.functions[f].name << ": " << value_text(v) << " ("
                  << percent(v, total) << "), " << result.calls[i] << " calls\n";
    }
    std::cout << "    the run: " << value_text(total) << "\n";
    std::size_t open = 0, pruned = 0;
    for (const auto& v : planner.verdicts()) {
        open += v.state == campaign::FunctionState::kOpen;
        pruned += v.state == campaign::FunctionState::kPruned;
    }
    std::cout << "    -> " << pruned << " pruned, " << open << " still open\n";
}

// The functions found and what pruning saved.
void print_found(const campaign::Planner& planner, const campaign::Metric& metric,
                 const campaign::CallGraph& graph, double threshold, std::size_t k) {
    const double total = planner.total();
    std::cout << "\nfunctions with at least " << threshold << " % of " << metric.name << " ("
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
              << "/" << k << ")): " << planner.runs_without_pruning() << "\n";
}

int run_campaign(const CampaignArgs& cl) {
    const std::string& core = cl.core;
    const auto available = campaign::core_counters(core);
    if (!available)
        throw UsageError("unknown core '" + core + "' (known: " + campaign::core_names() + ")");
    const campaign::MetricSet metrics = metrics_of(cl);
    const campaign::Metric& metric = metric_named(metrics, cl.metric);
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
    campaign::Planner planner(graph, metrics, metric, caps.counters, {k, threshold});
    const bool quiet = cl.quiet;
    std::cout << "board: " << board_options.model << ", " << graph.functions.size()
              << " functions, core " << core << " (" << campaign::mask_names(caps.counters) << "), "
              << static_cast<int>(caps.slots) << " slots\n"
              << "metric: " << metric.name << " = " << metric.formula
              << (metric.monotone ? " (monotone: pruning)" : " (not monotone: no pruning)")
              << ", counters " << campaign::mask_names(metric.primaries) << "\n"
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
            if (!quiet) print_run(plan, result, metrics, metric, graph, planner, "COUNTER_CONFIG");
        });
    print_found(planner, metric, graph, threshold, k);
    std::cout << "wire: " << config_bytes << " bytes down, " << answer_bytes << " bytes up, "
              << wire.stats().frames_bad << " bad frames\n";
    return 0;
}

// The planner's call graph from the code: a function whose address the image holds may be
// called from where no instruction names it, so its direct callers bound nothing (it is a root).
campaign::CallGraph graph_of(const gmon::StaticCallGraph& code) {
    campaign::CallGraph graph;
    for (const auto& f : code.functions) graph.add(f.name, static_cast<std::uint32_t>(f.addr));
    for (const auto& [caller, callee] : code.calls) {
        if (!code.functions[callee].address_taken) graph.add_call(caller, callee);
    }
    return graph;
}

// The address of the first of `names` the ELF defines as a function; `option` is the option
// that named them, for the error.
std::uint32_t function_address(const gmon::Symbolizer& elf, const std::vector<std::string>& names,
                               const std::string& option) {
    for (const auto& name : names) {
        for (const auto& s : elf.symbols()) {
            if (s.function && s.defined && s.name == name)
                return static_cast<std::uint32_t>(s.addr);
        }
    }
    std::string list;
    for (const auto& name : names) list += (list.empty() ? "" : " or ") + name;
    throw UsageError("no function " + list + " in " + elf.path().string() + " (" + option + ")");
}

std::unique_ptr<probe::GdbClient> connect_probe(const config::LinkUri& uri) {
    probe::GdbClientOptions options;
    if (uri.scheme == "gdb") return probe::GdbClient::connect(uri.host, uri.port, options);
    return probe::GdbClient::attach(capture::open_serial_device(uri.path, 0), options);
}

// --metric calls: no pruning (calls bound nothing), every function measured, K a run.
void calls_only(campaign::DebuggerRuns& runs, const campaign::CallGraph& graph, std::size_t k,
                bool quiet) {
    std::vector<std::pair<std::uint64_t, std::size_t>> calls;
    std::uint16_t run = 0;
    for (std::size_t first = 0; first < graph.functions.size(); first += k) {
        campaign::RunPlan plan{++run, 0, {}};
        for (std::size_t f = first; f < std::min(first + k, graph.functions.size()); ++f)
            plan.functions.push_back(f);
        const campaign::RunResult result = runs.run(plan);
        if (!quiet) std::cout << "run " << run << ":";
        for (std::size_t i = 0; i < result.functions.size(); ++i) {
            calls.emplace_back(result.calls[i], result.functions[i].first);
            if (!quiet) std::cout << " " << graph.functions[result.functions[i].first].name;
        }
        if (!quiet) std::cout << "\n";
    }
    std::stable_sort(calls.begin(), calls.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    std::cout << "\ncalls per run of the workload (" << run << " runs):\n";
    for (const auto& [n, f] : calls)
        std::cout << "  " << n << "  " << graph.functions[f].name << "\n";
}

int run_debugger_campaign(const CampaignArgs& cl) {
    if (!cl.elf) throw UsageError("--link needs --elf FILE: the firmware the board runs");
    config::LinkUri uri;
    try {
        uri = config::parse_link_uri(*cl.link);
    } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("--link: ") + e.what());
    }
    if (!uri.is_probe())
        throw UsageError(
            "--link takes a debug probe's GDB server: gdb://HOST:PORT or "
            "gdb+serial:///dev/ttyACM0");
    const auto elf = gmon::Symbolizer::load(*cl.elf);
    if (!elf->arm()) throw UsageError(*cl.elf + " is not Cortex-M firmware (ELF machine ARM)");
    const gmon::StaticCallGraph code = gmon::static_call_graph(*elf);
    const campaign::CallGraph graph = graph_of(code);
    campaign::DebuggerRunOptions options;
    options.from = function_address(*elf, {cl.from}, "--from");
    options.until = function_address(
        *elf,
        cl.until ? std::vector<std::string>{*cl.until} : std::vector<std::string>{"exit", "_exit"},
        "--until names the function whose start ends the workload");
    options.reset_command = cl.reset_command;
    options.clock = cl.clock;
    options.run_timeout =
        std::chrono::milliseconds(static_cast<std::int64_t>(cl.run_timeout * 1000));

    const auto gdb = connect_probe(uri);
    gdb->halt();
    const probe::IdentityCheck identity = probe::check_identity(*gdb, *cl.elf);
    if (!identity.matches()) {
        const std::string why = identity.mismatch(std::filesystem::path(*cl.elf).filename());
        if (cl.verify) throw std::runtime_error(why + " (or --no-verify)");
        std::cout << "warning: " << why << "\n";
    }
    campaign::DebuggerRuns runs(*gdb, graph, options);
    std::size_t taken = 0;
    for (const auto& f : code.functions) taken += f.address_taken;
    std::cout << "board: " << *cl.link << ", " << graph.functions.size() << " functions in "
              << *cl.elf << " (" << code.calls.size() << " direct calls, " << taken
              << " with their address taken, " << code.indirect_calls << " indirect call sites)\n"
              << "cycles: " << runs.source_text() << "\n";
    const std::size_t k = std::max<std::uint64_t>(1, cl.slots);
    if (cl.metric == "calls") {
        calls_only(runs, graph, k, cl.quiet);
    } else {
        const campaign::MetricSet metrics = metrics_of(cl);
        const campaign::Metric& metric = metric_named(metrics, cl.metric);
        if (metric.primaries & ~runs.counters())
            throw UsageError("metric '" + metric.name + "' needs " +
                             campaign::mask_names(metric.primaries) + "; through a debugger " +
                             (runs.counters() ? "only CYCCNT (the DWT's other counters are 8 bits "
                                                "and wrap unseen between two stops)"
                                              : "this target counts no cycles: --metric calls"));
        campaign::Planner planner(graph, metrics, metric, runs.counters(), {k, cl.threshold});
        std::cout << "metric: " << metric.name << " = " << metric.formula
                  << (metric.monotone ? " (monotone: pruning)" : " (not monotone: no pruning)")
                  << "\nthreshold: " << cl.threshold << " %, " << k << " functions per run\n";
        campaign::run_campaign(
            planner, [&](const campaign::RunPlan& plan) { return runs.run(plan); },
            [&](const campaign::RunPlan& plan, const campaign::RunResult& result) {
                if (!cl.quiet)
                    print_run(plan, result, metrics, metric, graph, planner, "breakpoints,");
            });
        print_found(planner, metric, graph, cl.threshold, k);
    }
    const auto& stats = runs.stats();
    std::cout << "debugger: " << stats.stops << " breakpoint stops, " << stats.steps
              << " single steps\n";
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
                   "sleep_cycles, cpi, stall_fraction, or a primary counter such as LSUCNT;\n"
                   "with --link: cycles, CYCCNT, or calls)")
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
    app.add_option("--link", args->link,
                   "a real board through its debug probe's GDB server: gdb://HOST:PORT or\n"
                   "gdb+serial:///dev/ttyACM0 (instead of --sim)")
        ->type_name("URI");
    app.add_option("--elf", args->elf, "with --link: the firmware the board runs")
        ->type_name("FILE");
    app.add_option("--from", args->from,
                   "with --link: the function whose start starts the workload, where counting\n"
                   "starts (default: main)")
        ->type_name("SYMBOL");
    app.add_option("--until", args->until,
                   "with --link: the function whose start ends the workload (default: exit,\n"
                   "else _exit)")
        ->type_name("SYMBOL");
    app.add_option("--reset-command", args->reset_command,
                   "with --link: the server's command that resets the core halted, before\n"
                   "each run (OpenOCD: 'reset halt'; QEMU: 'system_reset'); default: restart\n"
                   "from the vector table's reset entry (registers only)")
        ->type_name("CMD");
    app.add_option("--clock", args->clock,
                   "with --link: count time with this free-running 32-bit up-counter of the board\n"
                   "(a timer register's address) instead of the core's DWT CYCCNT")
        ->type_name("ADDRESS");
    app.add_option("--run-timeout", args->run_timeout,
                   "with --link: seconds a run may take to reach --until (default: 60)")
        ->type_name("S")
        ->check(in_range(0.001, 86400, "seconds"));
    app.add_flag("!--no-verify", args->verify,
                 "with --link: measure even when the target's build-id is not the ELF's");
    return [args] { return args->link ? run_debugger_campaign(*args) : run_campaign(*args); };
}

}  // namespace rackprof::daemon::app
