#include "gmon/calling_context.h"

#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

using rackprof::gmon::attributed_arcs;
using rackprof::gmon::CallingContextBuilder;
using rackprof::gmon::CallingContextTree;
using rackprof::gmon::ContextNode;
using rackprof::gmon::kNoParent;
using rackprof::protocol::FunctionEvent;

namespace {

constexpr std::uint32_t kMain = 0x100, kFast = 0x200, kSlow = 0x300, kDo = 0x400, kIsr = 0x500,
                        kIsr2 = 0x600;

FunctionEvent in(std::uint32_t f, std::uint32_t t, std::uint16_t exception = 0,
                 std::uint8_t bits = 32) {
    return {true, 0, f, t, bits, exception};
}
FunctionEvent out(std::uint32_t f, std::uint32_t t, std::uint16_t exception = 0,
                  std::uint8_t bits = 32) {
    return {false, 0, f, t, bits, exception};
}

CallingContextTree run(const std::vector<FunctionEvent>& events) {
    CallingContextBuilder b;
    for (const auto& e : events) b.on_event(e);
    return b.snapshot();
}

// The node at a path of functions under the root of `exception`; fails the test if absent.
const ContextNode& at(const CallingContextTree& tree, std::vector<std::uint64_t> path,
                      std::uint16_t exception = 0) {
    std::uint32_t parent = kNoParent;
    for (std::uint32_t i = 0; i < tree.nodes().size(); ++i) {
        if (tree.nodes()[i].parent == kNoParent && tree.nodes()[i].exception == exception)
            parent = i;
    }
    REQUIRE(parent != kNoParent);
    for (const auto f : path) {
        std::uint32_t found = kNoParent;
        for (std::uint32_t i = 0; i < tree.nodes().size(); ++i) {
            if (tree.nodes()[i].parent == parent && tree.nodes()[i].function == f) found = i;
        }
        REQUIRE_MESSAGE(found != kNoParent, "no node for function " << f);
        parent = found;
    }
    return tree.nodes()[parent];
}

}  // namespace

TEST_CASE("calling context: nesting gives exact inclusive and exclusive cycles per path") {
    // The thesis' fig. 4: fast() and slow() each call doSomething() once.
    const auto tree =
        run({in(kMain, 0), in(kFast, 10), in(kDo, 20), out(kDo, 120), out(kFast, 130),
             in(kSlow, 140), in(kDo, 150), out(kDo, 1050), out(kSlow, 1060), out(kMain, 1070)});
    CHECK(at(tree, {kMain}).inclusive == 1070);
    CHECK(at(tree, {kMain}).exclusive == 10 + 10 + 10);
    CHECK(at(tree, {kMain, kFast}).inclusive == 120);
    CHECK(at(tree, {kMain, kFast}).exclusive == 20);
    CHECK(at(tree, {kMain, kFast, kDo}).inclusive == 100);
    CHECK(at(tree, {kMain, kSlow, kDo}).inclusive == 900);
    CHECK(at(tree, {kMain, kSlow, kDo}).calls == 1);
    CHECK(tree.incomplete_nodes() == 0);

    const auto arcs = attributed_arcs(tree);
    bool seen_fast = false, seen_slow = false;
    for (const auto& a : arcs) {
        if (a.callee != kDo) continue;
        CHECK(a.callee_total == 1000);
        CHECK(a.callee_calls == 2);
        CHECK(a.estimated == doctest::Approx(500));  // gprof: 50/50
        if (a.caller == kFast) {
            seen_fast = true;
            CHECK(a.measured == 100);  // measured: 10 %
        }
        if (a.caller == kSlow) {
            seen_slow = true;
            CHECK(a.measured == 900);  // 90 %
        }
    }
    CHECK(seen_fast);
    CHECK(seen_slow);
}

TEST_CASE("calling context: recursion is a path per depth, counted once per path in arcs") {
    const auto tree = run({in(kMain, 0), in(kDo, 10), in(kDo, 20), in(kDo, 30), out(kDo, 40),
                           out(kDo, 60), out(kDo, 100), out(kMain, 110)});
    CHECK(at(tree, {kMain, kDo}).inclusive == 90);
    CHECK(at(tree, {kMain, kDo, kDo}).inclusive == 40);
    CHECK(at(tree, {kMain, kDo, kDo, kDo}).inclusive == 10);
    CHECK(at(tree, {kMain, kDo, kDo, kDo}).exclusive == 10);
    CHECK(at(tree, {kMain, kDo}).exclusive == 50);
    for (const auto& a : attributed_arcs(tree)) {
        if (a.caller == kMain) CHECK(a.measured == 90);
        if (a.caller == kDo) {
            CHECK(a.calls == 2);
            CHECK(a.measured == 40);  // the outer do->do, not 40 + 10
            CHECK(a.estimated == 0);  // gprof propagates nothing along a self-call
        }
    }
}

TEST_CASE("calling context: an interrupt in the middle of a call is not charged to the thread") {
    const auto tree = run({in(kMain, 0), in(kDo, 10), in(kIsr, 100, 15), out(kIsr, 150, 15),
                           out(kDo, 300), out(kMain, 310)});
    CHECK(at(tree, {kMain, kDo}).inclusive == 300 - 10 - 50);
    CHECK(at(tree, {kIsr}, 15).inclusive == 50);
    CHECK(at(tree, {kIsr}, 15).calls == 1);
    CHECK(at(tree, {kMain}).inclusive == 310 - 50);
    CHECK(tree.incomplete_nodes() == 0);
}

TEST_CASE("calling context: tail-chained handlers are separate roots") {
    const auto tree = run({in(kMain, 0), in(kIsr, 100, 16), out(kIsr, 150, 16), in(kIsr2, 160, 17),
                           out(kIsr2, 200, 17), out(kMain, 300)});
    CHECK(at(tree, {kIsr}, 16).inclusive == 50);
    CHECK(at(tree, {kIsr2}, 17).inclusive == 40);
    CHECK(at(tree, {}, 17).exclusive == 10);  // the chain between them: the new handler's own
    CHECK(at(tree, {kMain}).inclusive == 100 + 100);
    CHECK(tree.incomplete_nodes() == 0);
}

TEST_CASE("calling context: nested handlers stack, each root excludes the one above it") {
    const auto tree =
        run({in(kMain, 0), in(kIsr, 100, 16), in(kDo, 110, 16), in(kIsr2, 120, 17),
             out(kIsr2, 140, 17), out(kDo, 160, 16), out(kIsr, 170, 16), out(kMain, 300)});
    CHECK(at(tree, {kIsr2}, 17).inclusive == 20);
    CHECK(at(tree, {kIsr, kDo}, 16).inclusive == 10 + 20);
    CHECK(at(tree, {kIsr}, 16).inclusive == 70 - 20);
    CHECK(at(tree, {kMain}).inclusive == 300 - 70);
    CHECK(tree.incomplete_nodes() == 0);
}

TEST_CASE("calling context: 24-bit stamps wrap") {
    const std::uint32_t start = 0xFFFFF0;  // 16 cycles before the wrap
    const auto tree = run({in(kMain, start, 0, 24), in(kDo, (start + 6) & 0xFFFFFF, 0, 24),
                           out(kDo, (start + 106) & 0xFFFFFF, 0, 24),
                           out(kMain, (start + 110) & 0xFFFFFF, 0, 24)});
    CHECK(at(tree, {kMain, kDo}).inclusive == 100);
    CHECK(at(tree, {kMain}).inclusive == 110);
}

TEST_CASE("calling context: losses mark the affected paths incomplete, never silently wrong") {
    SUBCASE("open frames at a loss and what is entered under them") {
        CallingContextBuilder b;
        b.on_event(in(kMain, 0));
        b.on_event(in(kFast, 10));
        b.mark_lost(3);
        b.on_event(in(kDo, 5000));  // its parent may be wrong
        b.on_event(out(kDo, 5100));
        b.on_event(out(kFast, 5200));
        b.on_event(in(kSlow, 5300));
        const auto tree = b.snapshot();
        CHECK(at(tree, {kMain}).incomplete);
        CHECK(at(tree, {kMain, kFast}).incomplete);
        CHECK(at(tree, {kMain, kFast, kDo}).incomplete);
        CHECK(at(tree, {kMain, kFast}).inclusive == 100 + 100);  // across the loss: no one's
        CHECK(at(tree, {kMain, kSlow}).incomplete);  // under main, which was open at the loss
        CHECK(b.stats().losses == 3);
    }
    SUBCASE("an exit without an entry") {
        CallingContextBuilder b;
        b.on_event(in(kMain, 0));
        b.on_event(out(kDo, 50));
        b.on_event(out(kMain, 60));
        const auto tree = b.snapshot();
        CHECK(at(tree, {kMain}).incomplete);
        CHECK(b.stats().unmatched_exits == 1);
    }
    SUBCASE("an exit skipping frames whose exits were lost") {
        CallingContextBuilder b;
        b.on_event(in(kMain, 0));
        b.on_event(in(kFast, 10));
        b.on_event(in(kDo, 20));
        b.on_event(out(kFast, 40));
        b.on_event(in(kSlow, 50));
        b.on_event(out(kSlow, 60));
        const auto tree = b.snapshot();
        CHECK(at(tree, {kMain, kFast}).incomplete);
        CHECK(at(tree, {kMain, kFast, kDo}).incomplete);
        CHECK_FALSE(at(tree, {kMain, kSlow}).incomplete);  // back in step
        CHECK(at(tree, {kMain}).incomplete);               // still open at the end
        CHECK(b.stats().unfinished_frames == 1);
    }
    SUBCASE("a handler that returned with a frame open") {
        const auto tree = run({in(kMain, 0), in(kIsr, 100, 15), in(kDo, 110, 15), out(kMain, 200)});
        CHECK(at(tree, {kIsr, kDo}, 15).incomplete);
        CHECK(at(tree, {kIsr}, 15).incomplete);
        CHECK_FALSE(at(tree, {kMain}).incomplete);
    }
    SUBCASE("entered, never exited") {
        const auto tree = run({in(kMain, 0), in(kDo, 10), out(kDo, 20)});
        CHECK(at(tree, {kMain}).incomplete);
        CHECK_FALSE(at(tree, {kMain, kDo}).incomplete);
        CHECK(tree.incomplete_nodes() == 1);
    }
}

TEST_CASE("calling context: merge adds by path; stored rows come back equal") {
    const auto a = run({in(kMain, 0), in(kFast, 10), in(kDo, 20), out(kDo, 120), out(kFast, 130),
                        out(kMain, 140)});
    const auto b = run({in(kMain, 0), in(kSlow, 10), in(kDo, 20), out(kDo, 920), out(kSlow, 930),
                        in(kFast, 940), out(kFast, 945), out(kMain, 950), in(kIsr, 960, 15),
                        out(kIsr, 970, 15)});
    CallingContextTree merged;
    merged.merge(a);
    merged.merge(b);
    CHECK(at(merged, {kMain}).inclusive == 140 + 950);
    CHECK(at(merged, {kMain}).calls == 2);
    CHECK(at(merged, {kMain, kFast}).calls == 2);
    CHECK(at(merged, {kMain, kFast}).inclusive == 120 + 5);
    CHECK(at(merged, {kMain, kFast, kDo}).inclusive == 100);
    CHECK(at(merged, {kMain, kSlow, kDo}).inclusive == 900);
    CHECK(at(merged, {kIsr}, 15).inclusive == 10);

    CallingContextTree stored;
    for (const auto& n : merged.nodes()) stored.add_stored(n);
    CHECK(stored == merged);
    ContextNode orphan;
    orphan.parent = 1000;
    CHECK_THROWS_AS(stored.add_stored(orphan), std::invalid_argument);
}

namespace rackprof::gmon {
namespace {

protocol::StackSample stack(std::vector<std::uint32_t> functions, std::uint16_t exception = 0,
                            bool truncated = false) {
    return {functions.empty() ? 0u : functions.front() + 4, exception, truncated,
            std::move(functions)};
}

TEST_CASE("calling context: sampled stacks count samples per path, never calls or cycles") {
    CallingContextBuilder b;
    for (int i = 0; i < 9; ++i) b.on_stack(stack({0x300, 0x200, 0x100}));  // do <- slow <- main
    b.on_stack(stack({0x300, 0x210, 0x100}));                              // do <- fast <- main
    b.on_stack(stack({0x400}, 15));                                        // a SysTick handler
    b.on_stack(stack({0x300}, 0, true));                                   // cut short
    const auto tree = b.snapshot();
    CHECK(tree.unit() == ContextUnit::kSamples);
    CHECK(b.stats().stacks == 12);
    std::uint64_t calls = 0, total = 0;
    for (const auto& n : tree.nodes()) {
        calls += n.calls;
        if (n.parent == kNoParent) total += n.inclusive;
    }
    CHECK(calls == 0);
    CHECK(total == 12);
    // Under main: slow's path 9 samples, fast's 1; the cut stack sits alone, incomplete.
    const auto& nodes = tree.nodes();
    std::uint64_t slow_do = 0, fast_do = 0, incomplete = 0;
    for (const auto& n : nodes) {
        if (n.function == 0x300 && n.parent != kNoParent && nodes[n.parent].function == 0x200)
            slow_do = n.exclusive;
        if (n.function == 0x300 && n.parent != kNoParent && nodes[n.parent].function == 0x210)
            fast_do = n.exclusive;
        incomplete += n.incomplete ? 1 : 0;
    }
    CHECK(slow_do == 9);
    CHECK(fast_do == 1);
    CHECK(incomplete == 1);
    // Entry/exit events after stacks are left out and counted: one tree, one unit.
    b.on_event(protocol::FunctionEvent{true, 0x10, 0x100, 5, 32, 0});
    CHECK(b.stats().mixed_ignored == 1);
    CHECK(b.stats().events == 0);
}

TEST_CASE("calling context: a tree of samples and one of cycles are never added together") {
    CallingContextBuilder sampled;
    sampled.on_stack(stack({0x300, 0x100}));
    CallingContextBuilder measured;
    measured.on_event(protocol::FunctionEvent{true, 0x10, 0x100, 5, 32, 0});
    measured.on_event(protocol::FunctionEvent{false, 0x10, 0x100, 50, 32, 0});
    CallingContextTree merged;
    merged.merge(sampled.snapshot());
    CHECK(merged.unit() == ContextUnit::kSamples);
    CHECK_THROWS_AS(merged.merge(measured.snapshot()), std::invalid_argument);
    CallingContextTree empty_first;
    empty_first.merge(CallingContextTree{});
    empty_first.merge(measured.snapshot());
    CHECK(empty_first.unit() == ContextUnit::kCycles);
    CHECK_THROWS_AS(empty_first.merge(sampled.snapshot()), std::invalid_argument);
}

}  // namespace
}  // namespace rackprof::gmon
