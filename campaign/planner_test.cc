#include "campaign/planner.h"

#include <doctest/doctest.h>

#include <functional>
#include <random>

namespace rackprof::campaign {
namespace {

// A random call DAG with per-call own cycles; its exact inclusive cycles (no recursion, so
// every activation is outermost): M(f) = calls(f) * (own(f) + sum of times * per-call M(c)).
struct DagProgram {
    CallGraph graph;
    std::vector<std::uint64_t> own;
    std::vector<std::vector<std::pair<std::size_t, std::uint64_t>>> calls;  // callee, times
    std::vector<std::uint64_t> inclusive;

    DagProgram(std::size_t n, std::uint64_t seed) : own(n), calls(n), inclusive(n) {
        std::mt19937_64 rng(seed);
        for (std::size_t f = 0; f < n; ++f) {
            graph.add("f" + std::to_string(f), 0x1000 + 0x40 * static_cast<std::uint32_t>(f));
            own[f] = 1 + (rng() % 20) * (rng() % 4 == 0 ? 50 : 1);
        }
        for (std::size_t f = 0; f + 1 < n; ++f) {
            const std::size_t fanout = 1 + rng() % 3;
            for (std::size_t e = 0; e < fanout; ++e) {
                const std::size_t callee = f + 1 + rng() % std::min<std::size_t>(6, n - f - 1);
                calls[f].push_back({callee, 1 + rng() % 3});
                graph.add_call(f, callee);
            }
        }
        // Functions nobody calls but f0 are roots of their own, called once.
        std::vector<std::uint64_t> per_call(n), count(n, 0);
        for (std::size_t f = n; f-- > 0;) {
            per_call[f] = own[f];
            for (auto [c, t] : calls[f]) per_call[f] += t * per_call[c];
        }
        for (std::size_t f = 0; f < n; ++f) {
            if (graph.callers[f].empty()) count[f] = 1;
            for (auto [c, t] : calls[f]) count[c] += count[f] * t;
        }
        for (std::size_t f = 0; f < n; ++f) inclusive[f] = count[f] * per_call[f];
    }
    std::uint64_t total() const {
        std::uint64_t t = 0;
        for (std::size_t f = 0; f < inclusive.size(); ++f) {
            if (graph.callers[f].empty()) t += inclusive[f];
        }
        return t;
    }
};

RunResult answer(const DagProgram& p, const RunPlan& plan) {
    RunResult r;
    r.run = plan.run;
    for (std::size_t f : plan.functions) {
        CounterValues c{};
        c[0] = p.inclusive[f];
        r.functions.emplace_back(f, c);
        r.calls.push_back(0);
    }
    r.totals[0] = p.total();
    return r;
}

TEST_CASE("pruning finds exactly the functions above the threshold, in fewer runs") {
    const MetricSet metrics = MetricSet::builtin();
    int fewer = 0;
    for (std::uint64_t seed = 1; seed <= 30; ++seed) {
        const DagProgram program(40 + seed % 20, seed);
        for (const double threshold : {1.0, 5.0, 20.0}) {
            Planner planner(program.graph, metrics, metrics.get("cycles"), 0x3F, {4, threshold});
            while (const auto plan = planner.next()) {
                CHECK(plan->functions.size() <= 4);
                CHECK(plan->counters == 0x01);
                planner.record(answer(program, *plan));
            }
            CHECK(planner.done());
            const double limit = static_cast<double>(program.total()) * threshold / 100.0;
            std::vector<std::size_t> truth;
            for (std::size_t f = 0; f < program.inclusive.size(); ++f) {
                const auto& v = planner.verdicts()[f];
                if (static_cast<double>(program.inclusive[f]) >= limit) {
                    truth.push_back(f);
                    CHECK(v.state == FunctionState::kMeasured);
                    CHECK(v.value == static_cast<double>(program.inclusive[f]));
                }
                if (v.state == FunctionState::kPruned) {
                    // The bound held: the truth is below it and below the threshold.
                    CHECK(static_cast<double>(program.inclusive[f]) <= v.bound);
                    CHECK(static_cast<double>(program.inclusive[f]) < limit);
                }
            }
            std::vector<std::size_t> found = planner.found();
            std::sort(found.begin(), found.end());
            CHECK(found == truth);
            CHECK(planner.runs() <= planner.runs_without_pruning() + 2);
            if (planner.runs() < planner.runs_without_pruning()) ++fewer;
        }
    }
    CHECK(fewer >= 45);  // of 90 campaigns (59 when written): pruning pays on most of them
}

TEST_CASE("cycles and self-recursion keep valid bounds") {
    // main -> ping <-> pong, main -> fact -> fact, main -> tiny.
    CallGraph g;
    const auto main_fn = g.add("main", 0x100), ping = g.add("ping", 0x200),
               pong = g.add("pong", 0x300), fact = g.add("fact", 0x400),
               tiny = g.add("tiny", 0x500);
    g.add_call(main_fn, ping);
    g.add_call(ping, pong);
    g.add_call(pong, ping);
    g.add_call(main_fn, fact);
    g.add_call(fact, fact);
    g.add_call(main_fn, tiny);
    const std::vector<std::uint64_t> truth = {1000, 30, 20, 900, 1};
    const MetricSet metrics = MetricSet::builtin();
    Planner planner(g, metrics, metrics.get("cycles"), 0x01, {1, 10.0});
    std::vector<std::size_t> order;
    while (const auto plan = planner.next()) {
        RunResult r;
        r.run = plan->run;
        for (std::size_t f : plan->functions) {
            order.push_back(f);
            CounterValues c{};
            c[0] = truth[f];
            r.functions.emplace_back(f, c);
        }
        r.totals[0] = 1000;
        planner.record(r);
    }
    CHECK(order.front() == main_fn);  // the roots first
    // pong's only caller is ping: once ping is measured (30), pong (bound 30 < 100) is pruned.
    // ping is called by main and pong, so it waits for neither: a cycle never blocks.
    CHECK(planner.verdicts()[fact].state == FunctionState::kMeasured);
    CHECK(planner.verdicts()[pong].state == FunctionState::kPruned);
    CHECK(planner.verdicts()[pong].bound == 30);
    CHECK(planner.found() == std::vector<std::size_t>{main_fn, fact});
    CHECK(planner.runs() == 4);
}

TEST_CASE("a non-monotone metric measures every function; a missing counter is refused") {
    const DagProgram program(10, 7);
    const MetricSet metrics = MetricSet::builtin();
    Planner planner(program.graph, metrics, metrics.get("stall_fraction"), 0x3F, {3, 50.0});
    CHECK_FALSE(planner.prunes());
    while (const auto plan = planner.next()) planner.record(answer(program, *plan));
    CHECK(planner.runs() == 4);
    CHECK(planner.runs_without_pruning() == 4);
    for (const auto& v : planner.verdicts()) CHECK(v.state == FunctionState::kMeasured);
    CHECK_THROWS_WITH_AS(Planner(program.graph, metrics, metrics.get("cycles"), 0, {3, 5.0}),
                         doctest::Contains("CYCCNT"), std::invalid_argument);
    CHECK_THROWS_AS(Planner(program.graph, metrics, metrics.get("cycles"), 0x3F, {0, 5.0}),
                    std::invalid_argument);
    CHECK_THROWS_AS(Planner(program.graph, metrics, metrics.get("cycles"), 0x3F, {3, 0.0}),
                    std::invalid_argument);
}

}  // namespace
}  // namespace rackprof::campaign
