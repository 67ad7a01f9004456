#include "gmon/tasks.h"

#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gmon/task_views.h"
#include "protocol/framed_format.h"
#include "protocol/swo_encoder.h"

namespace rackprof::gmon {
namespace {

using protocol::FunctionEvent;
using protocol::Record;
using protocol::TaskDeleted;
using protocol::TaskSwitch;

FunctionEvent enter(std::uint32_t f, std::uint32_t stamp, std::uint16_t exception = 0) {
    return {true, 0x100, f, stamp, 32, exception};
}
FunctionEvent leave(std::uint32_t f, std::uint32_t stamp, std::uint16_t exception = 0) {
    return {false, 0x100, f, stamp, 32, exception};
}

// A target's stream written by the framed encoder, as an ExportInput whose raw bytes decode.
std::shared_ptr<ExportInput> framed_input(const std::vector<std::uint8_t>& wire) {
    auto input = std::make_shared<ExportInput>();
    auto done = std::make_shared<bool>(false);
    input->raw = [wire, done]() -> std::optional<std::string> {
        if (*done) return std::nullopt;
        *done = true;
        return std::string(wire.begin(), wire.end());
    };
    input->wire = protocol::WireSpec{"framed", "bin", 4, std::nullopt};
    return input;
}

TEST_CASE("records and samples go to the task switched in; before the first, to no task") {
    TaskSplit split(TaskSplitOptions{.aggregates = true});
    const Record before[] = {Record::pc_sample(0x10)};
    split.on_records(before);
    split.on_event(TaskSwitch{0x2000, 100, "sensor"});
    const Record a[] = {Record::pc_sample(0x20, 3), Record::arc(0x31, 0x40, 2)};
    split.on_records(a);
    split.on_event(TaskSwitch{0x3000, 400, "logger"});
    const Record b[] = {Record::pc_sample(0x50)};
    split.on_records(b);
    split.on_event(TaskSwitch{0x2000, 500, ""});  // named once: the name stays
    split.on_records(b);
    const auto tasks = split.tasks();
    REQUIRE(tasks.size() == 4);
    CHECK(tasks[kNoTask].samples == 1);
    CHECK(task_label(tasks[2]) == "sensor");
    CHECK(tasks[2].samples == 4);
    CHECK(tasks[2].calls == 2);
    CHECK(tasks[2].switches == 2);
    CHECK(tasks[2].cycles == 300);  // 100..400; its second run has no end yet
    CHECK(task_label(tasks[3]) == "logger");
    CHECK(tasks[3].cycles == 100);
    CHECK(split.task_aggregate(2).total_samples() == 4);
    CHECK(split.task_aggregate(3).pc_samples() == std::vector<PcCount>{{0x50, 1}});
    CHECK(split.tasks_named("sensor") == std::vector<std::uint32_t>{2});
}

TEST_CASE("after a loss nobody runs until the next switch; a deleted handle comes back new") {
    TaskSplit split;
    split.on_event(TaskSwitch{0x2000, 0, "a"});
    const Record one[] = {Record::pc_sample(0x20)};
    split.on_records(one);
    split.on_event(protocol::EventsLost{1});
    split.on_records(one);  // not a's: the switch to another task may have been lost
    split.on_event(TaskSwitch{0x3000, 50, ""});  // its naming switch was lost
    split.on_event(TaskDeleted{0x3000, 60});
    split.on_event(TaskSwitch{0x3000, 70, "c"});  // the handle again: another task
    const auto tasks = split.tasks();
    REQUIRE(tasks.size() == 5);
    CHECK(tasks[2].samples == 1);
    CHECK(tasks[kUnknownTask].samples == 1);
    CHECK(task_label(tasks[kUnknownTask]) == "(unknown)");
    CHECK(task_label(tasks[3]) == "task@0x00003000");
    CHECK(tasks[3].deleted);
    CHECK(tasks[3].cycles == 20);  // 50..70: the switch after its deletion ends its run
    CHECK(task_label(tasks[4]) == "c");
    CHECK_FALSE(tasks[4].deleted);
    CHECK(split.losses() == 1);
}

TEST_CASE("each task keeps its own stack: a call open across a switch resumes in its task") {
    TaskSplit split;
    split.on_event(TaskSwitch{0xA, 0, "a"});
    split.on_event(enter(0x100, 10));
    split.on_event(TaskSwitch{0xB, 30, "b"});  // a's f open, 20 cycles in it
    split.on_event(enter(0x200, 40));
    split.on_event(leave(0x200, 90));
    split.on_event(TaskSwitch{0xA, 100, ""});
    split.on_event(leave(0x100, 105));  // f leaves in a, not in b
    const CallingContextTree tree = split.tree();
    CHECK(split.tree_stats().unmatched_exits == 0);
    const CallingContextTree a = tree.task_tree(2);
    const CallingContextTree b = tree.task_tree(3);
    REQUIRE(a.nodes().size() == 2);
    CHECK(a.nodes()[1].function == 0x100);
    CHECK(a.nodes()[1].exclusive == 25);  // 10..30 and 100..105
    CHECK_FALSE(a.nodes()[1].incomplete);
    REQUIRE(b.nodes().size() == 2);
    CHECK(b.nodes()[1].function == 0x200);
    CHECK(b.nodes()[1].exclusive == 50);
}

TEST_CASE("interrupts: invocations, nesting and tail chains, preempting time excluded") {
    TaskSplit split;
    split.on_event(enter(0x100, 0));
    // IRQ0 (16): 0x300 for 100 cycles, preempted for 30 by IRQ1 (17).
    split.on_event(enter(0x300, 10, 16));
    split.on_event(enter(0x400, 40, 17));
    split.on_event(leave(0x400, 70, 17));
    split.on_event(leave(0x300, 140, 16));
    // Tail-chained: IRQ0 again right after, 20 cycles.
    split.on_event(enter(0x300, 140, 16));
    split.on_event(leave(0x300, 160, 16));
    split.on_event(leave(0x100, 200));
    const auto table = split.exceptions();
    REQUIRE(table.size() == 2);
    CHECK(table[0].exception == 16);
    CHECK(table[0].count == 2);
    CHECK(table[0].total == 120);  // 100 + 20, IRQ1's 30 not in it
    CHECK(table[0].max == 100);
    CHECK(table[0].p99 == 100);
    CHECK(table[0].mean == doctest::Approx(60));
    CHECK(table[1].exception == 17);
    CHECK(table[1].count == 1);
    CHECK(table[1].total == 30);
    CHECK(split.span_cycles() == 200);
    const auto json = interrupts_json(split);
    CHECK(json["exceptions"][0]["name"] == "IRQ0");
    CHECK(json["exceptions"][0]["share_percent"].get<double>() == doctest::Approx(60.0));
}

TEST_CASE("p99 is the nearest rank") {
    ExceptionInvocations inv{16, {}, 0};
    for (std::uint64_t i = 1; i <= 200; ++i) inv.cycles.push_back(i);
    const auto t = exception_times({inv});
    CHECK(t[0].p99 == 198);
    CHECK(t[0].max == 200);
    CHECK(t[0].total == 20100);
}

TEST_CASE("the framed wire end to end: the trace has every call once, balanced per track") {
    protocol::FramedEncoder target(4);
    protocol::TargetHello hello{protocol::kFramedVersionTasks,
                                4,
                                protocol::kHelloEvents | protocol::kHelloTasks,
                                0,
                                0x1000,
                                1000,
                                1'000'000,
                                {}};
    target.hello(hello);
    std::uint32_t t = 0;
    std::map<std::uint32_t, int> enters;
    for (int round = 0; round < 50; ++round) {
        for (const std::uint32_t task : {0xA0u, 0xB0u, 0xC0u}) {
            target.task_switch(TaskSwitch{task, t, round == 0 ? "t" + std::to_string(task) : ""});
            target.record(Record::pc_sample(task));
            target.function_event(enter(task + 1, t += 5));
            target.function_event(enter(0x900, t += 5, 15));  // SysTick inside it
            target.function_event(leave(0x900, t += 7, 15));
            target.function_event(leave(task + 1, t += 5));
            t += 3;
        }
    }
    target.flush();
    const auto input = framed_input(target.take_wire());
    TaskSplitOptions options;
    options.timeline = true;
    const TaskSplit split = split_tasks(*input, options);
    CHECK(split.core_clock_hz() == 1'000'000);
    const auto tasks = tasks_json(split);
    REQUIRE(tasks["tasks"].size() == 3);
    for (const auto& row : tasks["tasks"]) {
        CHECK(row["samples"] == 50);
        CHECK(row["calls"] == 100);  // its function and SysTick's, as arcs
        CHECK(row["share_percent"].get<double>() == doctest::Approx(100.0 / 3));
    }
    CHECK(interrupts_json(split)["exceptions"][0]["count"] == 150);
    CHECK(interrupts_json(split)["exceptions"][0]["total_cycles"] == 150 * 7);
    const auto trace =
        nlohmann::json::parse(trace_document(split, ContextFrameNames(nullptr), "test"));
    std::map<int, int> depth;
    std::map<int, int> begins;
    double last_ts = -1;
    for (const auto& e : trace["traceEvents"]) {
        const std::string ph = e["ph"];
        if (ph == "M") continue;
        const int tid = e["tid"];
        if (ph == "B") ++depth[tid], ++begins[tid];
        if (ph == "E") {
            CHECK(depth[tid] > 0);
            --depth[tid];
            CHECK_FALSE(e.contains("args"));  // nothing was cut
        }
        if (tid != 1 && tid != 2) {
            CHECK(e["ts"].get<double>() >= last_ts);
            last_ts = e["ts"].get<double>();
        }
    }
    for (const auto& [tid, d] : depth) CHECK(d == 0);
    CHECK(begins[2] == 150);                             // interrupts
    CHECK(begins[1] == 150);                             // the running task, switch by switch
    CHECK(begins[12] + begins[13] + begins[14] == 150);  // every call once
}

TEST_CASE("inputs without raw bytes are refused with the reason") {
    ExportInput none;
    CHECK_THROWS_AS(split_tasks(none), ExportNeedsRaw);
}

}  // namespace
}  // namespace rackprof::gmon

namespace rackprof::gmon {
namespace {

TEST_CASE("over SWO: task switches on the framed port order the DWT's PC samples") {
    // The framed stream on stimulus port 1, PC samples from the DWT between its frames.
    protocol::FramedEncoder framed(4);
    std::vector<std::uint8_t> itm;
    protocol::ItmEncoder enc(itm);
    enc.sync();
    const auto send_frames = [&] {
        framed.flush();
        for (const std::uint8_t byte : framed.take_wire()) enc.software(1, byte, 1);
    };
    for (int round = 0; round < 20; ++round) {
        for (const std::uint32_t task : {0xA0u, 0xB0u}) {
            framed.task_switch(TaskSwitch{task, 0, round == 0 ? (task == 0xA0 ? "a" : "b") : ""});
            send_frames();
            for (std::uint32_t i = 0; i < (task == 0xA0 ? 3u : 5u); ++i)
                enc.pc_sample(task + 2 * i);
        }
    }
    protocol::SwoOptions swo;
    swo.framed_port = 1;
    auto input = std::make_shared<ExportInput>();
    input->raw = [itm, done = false]() mutable -> std::optional<std::string> {
        if (done) return std::nullopt;
        done = true;
        return std::string(itm.begin(), itm.end());
    };
    input->wire = protocol::WireSpec{"itm", "bin", 4, std::nullopt, swo};
    const TaskSplit split = split_tasks(*input);
    const auto tasks = split.tasks();
    REQUIRE(tasks.size() == 4);
    CHECK(task_label(tasks[2]) == "a");
    CHECK(tasks[2].samples == 60);
    CHECK(task_label(tasks[3]) == "b");
    CHECK(tasks[3].samples == 100);
    CHECK(tasks[kNoTask].samples == 0);
}

}  // namespace
}  // namespace rackprof::gmon
