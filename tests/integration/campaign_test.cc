// Counter campaigns end to end: the planner's configurations cross the framed protocol v3 to
// the simulated counter board and its answers come back through the real decoder; the set
// found must be the board's exact truth, in fewer runs than measuring every function.
#include <doctest/doctest.h>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "campaign/host_wire.h"
#include "campaign/metric.h"
#include "campaign/planner.h"
#include "daemon/sim/counter_board.h"
#include "gmon/static_calls.h"
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

// --- Counter runs through a debugger -------------------------------------------------------

const std::filesystem::path kPlainCampaign = std::filesystem::path(RACKPROF_BINARY).parent_path() /
                                             "target-fw" / "campaign-mps2-an385-plain.elf";
// QEMU's MPS2 FPGA block: COUNTER, 32 bits up at the 25 MHz system clock (PRESCALE 0), read
// from QEMU's virtual clock without a timer of its own.
constexpr const char* kFpgaCounter = "0x40028018";
// -icount shift=6: an instruction is 64 ns of virtual time, 1.6 ticks of that counter. sleep=off,
// and a firmware that starts no timer: nothing moves the virtual clock while the debugger holds
// the core.
constexpr const char* kIcount = "shift=6,sleep=off";
constexpr double kTicksPerInstruction = 64.0 / 40.0;

std::uint16_t free_port() {
    const auto listener = testing::listen_loopback();
    ::close(listener.fd);
    return static_cast<std::uint16_t>(listener.port);
}

// Until QEMU's gdbstub listens on `port`.
void wait_listening(std::uint16_t port) {
    REQUIRE(testing::eventually(
        [&] {
            const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
            sockaddr_in a{};
            a.sin_family = AF_INET;
            a.sin_port = htons(port);
            a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            const bool up = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
            ::close(fd);
            return up;
        },
        std::chrono::seconds(10), std::chrono::milliseconds(20)));
}

std::vector<std::string> qemu_gdb(std::uint16_t port) {
    return {"qemu-system-arm",
            "-M",
            "mps2-an385",
            "-display",
            "none",
            "-monitor",
            "none",
            "-serial",
            "null",
            "-semihosting-config",
            "enable=on,target=native",
            "-icount",
            kIcount,
            "-S",
            "-gdb",
            "tcp:127.0.0.1:" + std::to_string(port),
            "-kernel",
            kPlainCampaign.string()};
}

// Every instruction the same firmware executes, in order: QEMU without a debugger, one
// instruction per translation block (-singlestep), its execution log (-d exec,nochain). Under
// -icount a block found without budget left (every 2^16 instructions) is logged, not run, and
// logged again when it runs: one of two same lines in a row is dropped (no instruction of the
// example branches to itself).
std::vector<std::uint32_t> executed_instructions(const testing::TempDir& dir) {
    const auto log = dir / "exec.log";
    const auto r = testing::run({"qemu-system-arm",
                                 "-M",
                                 "mps2-an385",
                                 "-display",
                                 "none",
                                 "-monitor",
                                 "none",
                                 "-serial",
                                 "null",
                                 "-semihosting-config",
                                 "enable=on,target=native",
                                 "-icount",
                                 kIcount,
                                 "-singlestep",
                                 "-d",
                                 "exec,nochain",
                                 "-dfilter",
                                 "0x0+0x100000",
                                 "-D",
                                 log.string(),
                                 "-kernel",
                                 kPlainCampaign.string()});
    REQUIRE(r.exit_code == 0);
    std::vector<std::uint32_t> pcs;
    std::ifstream in(log);
    // "Trace 0: 0x7f.. [00000000/00000088/00000000/...] crunch"
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("Trace", 0) != 0) continue;
        const auto open = line.find('[');
        const auto pc =
            static_cast<std::uint32_t>(std::stoul(line.substr(open + 10, 8), nullptr, 16));
        if (pcs.empty() || pcs.back() != pc) pcs.push_back(pc);
    }
    return pcs;
}

struct Truth {
    std::uint64_t calls = 0;
    std::uint64_t instructions = 0;  // inclusive, from each entry to its return
};

// A function's calls and inclusive instructions in the trace: from each entry to the first
// execution of the instruction after its call (the campaign's functions never recurse).
Truth truth_of(const std::vector<std::uint32_t>& pcs, std::uint32_t entry) {
    Truth t;
    for (std::size_t i = 1; i < pcs.size(); ++i) {
        if (pcs[i] != entry) continue;
        ++t.calls;
        const std::uint32_t back = pcs[i - 1] + 4;  // bl is 32 bits
        std::size_t j = i + 1;
        while (j < pcs.size() && pcs[j] != back) ++j;
        t.instructions += j - i;
    }
    return t;
}

// "    name: VALUE (...), N calls" for every function measured in a run, and the run totals.
struct Printed {
    std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> measured;  // value, calls
    std::set<std::uint64_t> totals;
    std::set<std::string> found;
    int runs = 0;
};

Printed printed(const std::string& out) {
    Printed p;
    static const std::regex measured(R"(\n    (\w+): (\d+) \([ .0-9]+ %\), (\d+) calls)");
    for (auto it = std::sregex_iterator(out.begin(), out.end(), measured);
         it != std::sregex_iterator(); ++it)
        p.measured[(*it)[1]] = {std::stoull((*it)[2]), std::stoull((*it)[3])};
    static const std::regex total(R"(\n    the run: (\d+))");
    for (auto it = std::sregex_iterator(out.begin(), out.end(), total);
         it != std::sregex_iterator(); ++it) {
        p.totals.insert(std::stoull((*it)[1]));
        ++p.runs;
    }
    const auto list = out.find("functions with at least");
    static const std::regex found(R"(\n +[.0-9]+ %  \d+  (\w+) \(run)");
    for (auto it = std::sregex_iterator(out.begin() + static_cast<long>(list), out.end(), found);
         it != std::sregex_iterator(); ++it)
        p.found.insert((*it)[1]);
    return p;
}

TEST_CASE(
    "rackprof campaign --link gdb://: ARC's method through QEMU's gdbstub, against QEMU's "
    "own instruction trace") {
    if (testing::run({"sh", "-c", "command -v qemu-system-arm"}).exit_code != 0 ||
        !std::filesystem::exists(kPlainCampaign)) {
        MESSAGE(
            "SKIP: needs qemu-system-arm and target-fw built (cmake --build build --target "
            "target_fw)");
        return;
    }
    const auto elf = gmon::Symbolizer::load(kPlainCampaign);
    std::map<std::string, std::uint32_t> addr;
    for (const auto& s : elf->symbols())
        if (s.function) addr[s.name] = static_cast<std::uint32_t>(s.addr);

    SUBCASE("the call graph from the code: every direct call, handlers unbounded") {
        const auto code = gmon::static_call_graph(*elf);
        std::set<std::pair<std::string, std::string>> calls;
        for (const auto& [caller, callee] : code.calls)
            calls.emplace(code.functions[caller].name, code.functions[callee].name);
        for (const auto& edge :
             std::vector<std::pair<std::string, std::string>>{{"main", "process"},
                                                              {"main", "housekeeping"},
                                                              {"process", "parse"},
                                                              {"process", "filter"},
                                                              {"process", "encode"},
                                                              {"parse", "tokenize"},
                                                              {"parse", "classify"},
                                                              {"filter", "fir"},
                                                              {"filter", "clamp"},
                                                              {"encode", "pack"},
                                                              {"encode", "checksum"},
                                                              {"fir", "spin"},
                                                              {"Reset_Handler", "main"},
                                                              {"Reset_Handler", "board_exit"}}) {
            CAPTURE(edge.first);
            CAPTURE(edge.second);
            CHECK(calls.count(edge) == 1);
        }
        CHECK(calls.count({"spin", "fir"}) == 0);
        for (const auto& f : code.functions) {
            const std::string& name = f.name;
            CAPTURE(name);
            // The vector table holds the handlers' addresses; nothing holds main's.
            if (name == "Reset_Handler" || name == "SysTick_Handler") CHECK(f.address_taken);
            if (name == "main" || name == "fir") CHECK_FALSE(f.address_taken);
        }
    }

    testing::TempDir dir;
    const std::vector<std::uint32_t> pcs = executed_instructions(dir);
    REQUIRE(pcs.size() > 100000);
    const auto at = [&](const std::string& name) {
        const auto it = std::find(pcs.begin(), pcs.end(), addr.at(name));
        REQUIRE(it != pcs.end());
        return static_cast<std::uint64_t>(it - pcs.begin());
    };
    const std::uint64_t total_instructions = at("board_exit") - at("main");
    auto campaign_run = [&](std::vector<std::string> extra) {
        const std::uint16_t port = free_port();
        testing::Process qemu(qemu_gdb(port), dir / "qemu.err");
        wait_listening(port);
        std::vector<std::string> args = {"campaign",
                                         "--link",
                                         "gdb://127.0.0.1:" + std::to_string(port),
                                         "--elf",
                                         kPlainCampaign.string(),
                                         "--until",
                                         "board_exit"};
        args.insert(args.end(), extra.begin(), extra.end());
        return testing::rackprof(args);
    };

    SUBCASE("cycles: pruned as a full measurement finds them, each as the trace counts it") {
        const auto pruned =
            campaign_run({"--clock", kFpgaCounter, "--slots", "3", "--threshold", "5"});
        INFO(pruned.out << pruned.err);
        REQUIRE(pruned.exit_code == 0);
        CHECK(pruned.out.find("cycles: the board's counter at 0x40028018") != std::string::npos);
        const auto full =
            campaign_run({"--clock", kFpgaCounter, "--slots", "64", "--threshold", "5"});
        INFO(full.out << full.err);
        REQUIRE(full.exit_code == 0);
        const Printed p = printed(pruned.out), f = printed(full.out);
        CHECK(f.runs == 1);
        CHECK(p.runs < (static_cast<int>(f.measured.size()) + 2) / 3);  // fewer than ceil(N/K)
        // Every run of the workload takes the same time, however many stops it made.
        CHECK(p.totals.size() == 1);
        CHECK(p.totals == f.totals);
        const double total = static_cast<double>(*f.totals.begin());
        CAPTURE(total_instructions);
        CHECK(std::fabs(total - kTicksPerInstruction * static_cast<double>(total_instructions)) <
              1);
        // The functions found are those the full measurement puts at 5 % or more.
        std::set<std::string> expected;
        for (const auto& [name, m] : f.measured)
            if (static_cast<double>(m.first) >= 0.05 * total) expected.insert(name);
        CHECK(p.found == expected);
        CHECK(expected.count("fir") == 1);
        CHECK(expected.count("checksum") == 1);
        CHECK(expected.count("tokenize") == 0);
        // Each measured function: calls exact, cycles the trace's instructions within a tick a
        // call (the counter is read whole at each stop).
        for (const auto& entry : p.measured) {
            const std::string name = entry.first;  // clang 14: no binding in CAPTURE
            const auto m = entry.second;
            // The run's ends: counted from main, to board_exit's start.
            if (!addr.count(name) || name == "Reset_Handler" || name == "main" ||
                name == "board_exit")
                continue;
            const Truth t = truth_of(pcs, addr.at(name));
            CAPTURE(name);
            CAPTURE(t.instructions);
            CAPTURE(m.first);
            CHECK(m.second == t.calls);
            CHECK(m.first == f.measured.at(name).first);
            CHECK(std::fabs(static_cast<double>(m.first) -
                            kTicksPerInstruction * static_cast<double>(t.instructions)) <=
                  static_cast<double>(t.calls) + 1);
        }
        CHECK(p.measured.at("fir").second == 80);
        CHECK(p.measured.at("spin").second == 180);
    }

    SUBCASE("no cycle counter (QEMU has no DWT): calls only, said so") {
        const auto calls = campaign_run({"--metric", "calls", "--slots", "16", "--quiet"});
        INFO(calls.out << calls.err);
        REQUIRE(calls.exit_code == 0);
        CHECK(calls.out.find("cycles: none: calls only") != std::string::npos);
        for (const std::string name : {"process", "fir", "spin", "tokenize", "checksum"}) {
            CAPTURE(name);
            const std::string line =
                "  " + std::to_string(truth_of(pcs, addr.at(name)).calls) + "  " + name + "\n";
            CHECK(calls.out.find(line) != std::string::npos);
        }
        const auto cycles = campaign_run({});
        CHECK(cycles.exit_code == 2);
        CHECK(cycles.err.find("--metric calls") != std::string::npos);
    }

    SUBCASE("refused: another image, an end that does not exist") {
        const auto other = std::filesystem::path(RACKPROF_BINARY).parent_path() / "target-fw" /
                           "conflation-mps2-an385-plain.elf";
        const std::uint16_t port = free_port();
        testing::Process qemu(qemu_gdb(port), dir / "qemu.err");
        wait_listening(port);
        const auto wrong = testing::rackprof(
            {"campaign", "--link", "gdb://127.0.0.1:" + std::to_string(port), "--elf",
             other.string(), "--until", "board_exit", "--metric", "calls"});
        CHECK(wrong.exit_code == 1);
        CHECK(wrong.err.find("does not run conflation-mps2-an385-plain.elf") != std::string::npos);
        CHECK(campaign_run({"--until", "no_such_function"}).exit_code == 2);
        CHECK(testing::rackprof({"campaign", "--link", "tcp://127.0.0.1:1"}).exit_code == 2);
    }
}

}  // namespace
}  // namespace rackprof
