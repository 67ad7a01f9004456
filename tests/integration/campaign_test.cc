// Counter campaigns end to end: the planner's configurations cross the framed protocol v3 to
// the simulated counter board and its answers come back through the real decoder; the set
// found must be the board's exact truth, in fewer runs than measuring every function.
#include <doctest/doctest.h>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <map>
#include <regex>

#include "campaign/host_wire.h"
#include "campaign/metric.h"
#include "campaign/planner.h"
#include "daemon/sim/counter_board.h"
#include "gmon/symbolizer.h"
#include "tests/integration/test_support.h"

namespace rackprof {
namespace {

campaign::CallGraph graph_of(const daemon::sim::CounterBoard& board) {
    campaign::CallGraph graph;
    for (const auto& f : board.functions()) graph.add(f.name, f.addr);
    for (std::size_t f = 0; f < board.functions().size(); ++f) {
        for (const auto& [callee, times] : board.functions()[f].calls) graph.add_call(f, callee);
    }
    return graph;
}

struct Outcome {
    int runs = 0;
    int runs_without = 0;
    std::size_t found = 0;
};

// One campaign over the wire; checks it against the board's truth. `split`: each answer
// arrives in two pieces, the second only on the next exchange.
Outcome campaign_against_truth(const daemon::sim::CounterModelOptions& options,
                               const std::string& metric_name, double threshold, std::size_t slots,
                               bool split = false) {
    daemon::sim::CounterBoard board(options);
    const campaign::CallGraph graph = graph_of(board);
    const campaign::MetricSet metrics = campaign::MetricSet::builtin();
    const campaign::Metric& metric = metrics.get(metric_name);
    campaign::HostWire wire(graph);
    wire.feed(board.start());
    REQUIRE(wire.capabilities());
    REQUIRE(wire.hello());
    CHECK(wire.hello()->version == protocol::kFramedVersionCounters);
    campaign::Planner planner(
        graph, metrics, metric, wire.capabilities()->counters,
        {std::min<std::size_t>(slots, wire.capabilities()->slots), threshold});
    std::vector<std::uint8_t> held;
    campaign::run_campaign(
        planner, wire,
        [&](const std::vector<std::uint8_t>& frame) {
            std::vector<std::uint8_t> answer = held;
            held.clear();
            const auto fresh = board.receive(frame);
            answer.insert(answer.end(), fresh.begin(), fresh.end());
            if (split && !frame.empty()) {
                held.assign(answer.begin() + static_cast<std::ptrdiff_t>(answer.size() / 2),
                            answer.end());
                answer.resize(answer.size() / 2);
            }
            return answer;
        },
        [&](const campaign::RunPlan& plan, const campaign::RunResult& result) {
            // Every answer exact: the target's snapshot/delta counting equals the structure's.
            REQUIRE(result.functions.size() == plan.functions.size());
            for (std::size_t i = 0; i < result.functions.size(); ++i) {
                const auto& [f, counts] = result.functions[i];
                CHECK(f == plan.functions[i]);
                CHECK(result.calls[i] == board.calls(f));
                for (int c = 0; c < protocol::kPrimaryCounters; ++c) {
                    const auto idx = static_cast<std::size_t>(c);
                    CHECK(counts[idx] == ((plan.counters >> c) & 1 ? board.inclusive(f)[idx] : 0));
                }
            }
        });
    CHECK(planner.done());
    CHECK(wire.stats().frames_bad == 0);
    CHECK(board.host_stats().frames_bad == 0);
    CHECK(board.runs() == static_cast<std::uint64_t>(planner.runs()));
    // The truth: every function at or above the threshold, by the exact counts.
    const double total = metrics.evaluate(metric, board.totals());
    CHECK(planner.total() == total);
    std::vector<std::size_t> truth;
    for (std::size_t f = 0; f < graph.functions.size(); ++f) {
        const double value = metrics.evaluate(metric, board.inclusive(f));
        if (value >= total * threshold / 100.0) truth.push_back(f);
        const auto& v = planner.verdicts()[f];
        if (v.state == campaign::FunctionState::kMeasured) CHECK(v.value == value);
    }
    std::vector<std::size_t> found = planner.found();
    std::sort(found.begin(), found.end());
    CHECK(found == truth);
    return {planner.runs(), planner.runs_without_pruning(), found.size()};
}

TEST_CASE("campaign: cycles above 5 % found exactly, in fewer runs than ceil(N/K)") {
    for (std::uint64_t seed = 1; seed <= 5; ++seed) {
        CAPTURE(seed);
        daemon::sim::CounterModelOptions options;
        options.functions = 60;
        options.seed = seed;
        const Outcome o = campaign_against_truth(options, "cycles", 5.0, 4, seed % 2 == 0);
        CHECK(o.runs_without == 15);
        CHECK(o.runs < o.runs_without);
        CHECK(o.found >= 1);
        MESSAGE("seed " << seed << ": " << o.runs << " runs with pruning, " << o.runs_without
                        << " without, " << o.found << " functions found");
    }
}

TEST_CASE("campaign: instructions (all six DWT counters) and 3-byte addresses") {
    daemon::sim::CounterModelOptions options;
    options.functions = 120;
    options.addr_bytes = 3;
    options.seed = 9;
    const Outcome o = campaign_against_truth(options, "instructions", 2.0, 8);
    CHECK(o.runs < o.runs_without);
}

TEST_CASE("campaign: a non-monotone metric measures every function") {
    daemon::sim::CounterModelOptions options;
    options.functions = 30;
    const Outcome o = campaign_against_truth(options, "stall_fraction", 5.0, 4);
    CHECK(o.runs == o.runs_without);
}

TEST_CASE("campaign: an ARMv6-M core has no counters; the board refuses what it lacks") {
    daemon::sim::CounterModelOptions options;
    options.functions = 20;
    options.counters = 0;  // armv6-m
    daemon::sim::CounterBoard board(options);
    const campaign::CallGraph graph = graph_of(board);
    campaign::HostWire wire(graph);
    wire.feed(board.start());
    REQUIRE(wire.capabilities());
    const campaign::MetricSet metrics = campaign::MetricSet::builtin();
    CHECK_THROWS_WITH_AS(campaign::Planner(graph, metrics, metrics.get("cycles"),
                                           wire.capabilities()->counters, {4, 5.0}),
                         doctest::Contains("does not have"), std::invalid_argument);
    // A configuration asking anyway is answered with a refusal, which the host reports.
    campaign::RunPlan plan{1, 0x01, {0, 1}};
    wire.feed(board.receive(wire.config_frame(plan)));
    CHECK_THROWS_WITH_AS(wire.take_result(), doctest::Contains("refused"), std::runtime_error);
}

TEST_CASE("rackprof campaign prints every run, the functions found and the runs saved") {
    const auto r = testing::rackprof({"campaign", "--sim", "layers", "--functions", "60",
                                      "--metric", "cycles", "--threshold", "5", "--slots", "4"});
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("run 1: COUNTER_CONFIG CYCCNT -> main") != std::string::npos);
    std::smatch m;
    REQUIRE(std::regex_search(r.out, m, std::regex(R"(runs needed with pruning: (\d+))")));
    const int with = std::stoi(m[1]);
    REQUIRE(std::regex_search(r.out, m, std::regex(R"(ceil\(60/4\)\): (\d+))")));
    CHECK(std::stoi(m[1]) == 15);
    CHECK(with < 15);
    // The functions it prints are the truth's.
    daemon::sim::CounterModelOptions options;
    daemon::sim::CounterBoard board(options);
    const double total = static_cast<double>(board.totals()[0]);
    for (std::size_t f = 0; f < board.functions().size(); ++f) {
        const double v = static_cast<double>(board.inclusive(f)[0]);
        const std::string line = std::to_string(static_cast<std::uint64_t>(v)) + "  " +
                                 board.functions()[f].name + " (run";
        CAPTURE(line);
        CHECK((r.out.find(line) != std::string::npos) == (v >= total * 0.05));
    }
    const auto bad = testing::rackprof({"campaign", "--core", "armv6-m"});
    CHECK(bad.exit_code == 1);
    CHECK(bad.err.find("does not have") != std::string::npos);
    CHECK(testing::rackprof({"campaign", "--core", "z80"}).exit_code == 2);
    CHECK(testing::rackprof({"campaign", "--metric", "nope"}).exit_code == 2);
}

// target-fw's campaign example (counters mode) in qemu-system-arm, its UART a TCP client of
// this test: HELLO v3 and COUNTERS up, the planner's COUNTER_CONFIG frames down the UART's
// receiver, FUNCTION_COUNTS and RUN_TOTALS back. QEMU has no DWT (its counters read 0), so the
// counts are 0 and nothing is pruned; the calls each function made are the example's own.
TEST_CASE("campaign: target-fw's counters build answers the planner under QEMU") {
    const auto elf = std::filesystem::path(RACKPROF_BINARY).parent_path() / "target-fw" /
                     "campaign-mps2-an385-counters.elf";
    if (testing::run({"sh", "-c", "command -v qemu-system-arm"}).exit_code != 0 ||
        !std::filesystem::exists(elf)) {
        MESSAGE(
            "SKIP: needs qemu-system-arm and target-fw built (cmake --build build "
            "--target target_fw)");
        return;
    }
    // The example's call graph and calls per run (10 frames), from examples/campaign.c.
    const std::map<std::string, std::vector<std::string>> callees = {
        {"main", {"process", "housekeeping"}},
        {"process", {"parse", "filter", "encode"}},
        {"parse", {"tokenize", "classify"}},
        {"filter", {"fir", "clamp"}},
        {"encode", {"pack", "checksum"}},
        {"housekeeping", {"log_event", "tick"}},
        {"tokenize", {"spin"}},
        {"classify", {"spin"}},
        {"fir", {"spin"}},
        {"clamp", {"spin"}},
        {"pack", {"spin"}},
        {"checksum", {"spin"}},
        {"log_event", {"spin"}},
        {"tick", {"spin"}}};
    const std::map<std::string, std::uint64_t> calls = {
        {"main", 0},       {"process", 10}, {"parse", 10},    {"tokenize", 40},
        {"classify", 10},  {"filter", 10},  {"fir", 80},      {"clamp", 10},
        {"encode", 10},    {"pack", 10},    {"checksum", 10}, {"housekeeping", 10},
        {"log_event", 10}, {"tick", 10},    {"spin", 180}};
    const auto symbols = gmon::Symbolizer::load(elf);
    campaign::CallGraph graph;
    std::map<std::string, std::size_t> index;
    for (const auto& [name, n] : calls) {
        for (const auto& sym : symbols->symbols()) {
            if (sym.function && sym.name == name)
                index[name] = graph.add(name, static_cast<std::uint32_t>(sym.addr));
        }
        const std::string& function = name;  // a message takes no structured binding (clang 14)
        REQUIRE_MESSAGE(index.count(function), function);
    }
    for (const auto& [caller, list] : callees) {
        for (const auto& callee : list) graph.add_call(index.at(caller), index.at(callee));
    }

    const testing::LoopbackListener listener = testing::listen_loopback();
    testing::TempDir dir;
    testing::Process qemu(
        {"qemu-system-arm", "-M", "mps2-an385", "-display", "none", "-monitor", "none", "-icount",
         "shift=5,sleep=off", "-semihosting-config", "enable=on,target=native", "-serial",
         "tcp:127.0.0.1:" + std::to_string(listener.port), "-kernel", elf.string()},
        dir / "qemu.err");
    pollfd pending{listener.fd, POLLIN, 0};
    REQUIRE(poll(&pending, 1, 10'000) == 1);
    const int fd = accept(listener.fd, nullptr, nullptr);
    REQUIRE(fd >= 0);
    auto receive = [&] {
        std::vector<std::uint8_t> bytes(4096);
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, 10'000) != 1) return std::vector<std::uint8_t>{};
        const ssize_t n = ::read(fd, bytes.data(), bytes.size());
        bytes.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
        return bytes;
    };
    auto send = [&](const std::vector<std::uint8_t>& frame) {
        REQUIRE(::write(fd, frame.data(), frame.size()) == static_cast<ssize_t>(frame.size()));
    };

    campaign::HostWire wire(graph, 3);
    while (!wire.capabilities()) {
        const auto bytes = receive();
        REQUIRE_MESSAGE(!bytes.empty(), "no HELLO and COUNTERS from the firmware");
        wire.feed(bytes);
    }
    REQUIRE(wire.hello());
    CHECK(wire.hello()->version == protocol::kFramedVersionCounters);
    CHECK((wire.hello()->flags & protocol::kHelloCounters) != 0);
    CHECK(wire.capabilities()->counters == 0x3F);
    CHECK(wire.capabilities()->slots == 8);
    const campaign::MetricSet metrics = campaign::MetricSet::builtin();
    campaign::Planner planner(graph, metrics, metrics.get("cycles"), 0x3F, {8, 5.0});
    std::map<std::string, std::uint64_t> seen;
    campaign::run_campaign(
        planner, wire,
        [&](const std::vector<std::uint8_t>& frame) {
            if (!frame.empty()) send(frame);
            return receive();
        },
        [&](const campaign::RunPlan&, const campaign::RunResult& result) {
            for (std::size_t i = 0; i < result.functions.size(); ++i) {
                const auto& [f, counts] = result.functions[i];
                seen[graph.functions[f].name] = result.calls[i];
                CHECK(counts[0] == 0);  // QEMU: no DWT
            }
        });
    CHECK(planner.runs() == 2);  // 15 functions, 8 a run, nothing pruned at a total of 0
    CHECK(seen == calls);
    CHECK(wire.stats().frames_bad == 0);
    // No counters and no functions: the campaign is over and the firmware exits with 0.
    campaign::RunPlan end{static_cast<std::uint16_t>(planner.runs() + 1), 0, {}};
    send(wire.config_frame(end));
    CHECK(qemu.wait(std::chrono::seconds(20)) == 0);
    ::close(fd);
    ::close(listener.fd);
}

}  // namespace
}  // namespace rackprof
