#include "campaign/metric.h"

#include <doctest/doctest.h>

#include <cmath>

namespace rackprof::campaign {
namespace {

CounterValues counts(std::uint64_t cyc, std::uint64_t cpi, std::uint64_t exc, std::uint64_t sleep,
                     std::uint64_t lsu, std::uint64_t fold) {
    return {cyc, cpi, exc, sleep, lsu, fold};
}

TEST_CASE("built-in metrics: instructions, cpi and what each needs") {
    const MetricSet set = MetricSet::builtin();
    const CounterValues c = counts(1000, 100, 20, 80, 150, 50);
    const Metric& instructions = set.get("instructions");
    CHECK(instructions.monotone);
    CHECK(instructions.primaries == 0x3F);
    CHECK(set.evaluate(instructions, c) == 1000 - 100 - 20 - 80 - 150 + 50);
    const Metric& cpi = set.get("cpi");
    CHECK_FALSE(cpi.monotone);
    CHECK(cpi.depends_on == std::vector<std::string>{"instructions"});
    CHECK(set.evaluate(cpi, c) == doctest::Approx(1000.0 / 700.0));
    CHECK(set.get("cycles").primaries == mask_of(PrimaryCounter::kCyccnt));
    CHECK(set.get("stall_fraction").primaries ==
          (mask_of(PrimaryCounter::kCyccnt) | mask_of(PrimaryCounter::kCpicnt) |
           mask_of(PrimaryCounter::kLsucnt)));
    CHECK(set.evaluate(set.get("stall_fraction"), c) == doctest::Approx(0.25));
    // A primary counter is a monotone metric of itself.
    CHECK(set.get("LSUCNT").monotone);
    CHECK(set.evaluate(set.get("LSUCNT"), c) == 150);
    CHECK(std::isnan(set.evaluate(cpi, counts(0, 0, 0, 0, 0, 0))));
}

TEST_CASE("user metrics: on other metrics, any order, precedence and parentheses") {
    MetricSet set = MetricSet::builtin();
    set.add(R"(# memory-bound cycles per instruction
mem_cpi = (LSUCNT + 2 * EXCCNT) / instructions
monotone busy = cycles - sleep_cycles   # the cycles awake
monotone twice_busy = 2 * busy
neg = -CYCCNT + 3 * 4
)");
    const CounterValues c = counts(1000, 100, 20, 80, 150, 50);
    CHECK(set.evaluate(set.get("mem_cpi"), c) == doctest::Approx(190.0 / 700.0));
    CHECK(set.evaluate(set.get("busy"), c) == 920);
    CHECK(set.evaluate(set.get("twice_busy"), c) == 1840);
    CHECK(set.get("twice_busy").primaries ==
          (mask_of(PrimaryCounter::kCyccnt) | mask_of(PrimaryCounter::kSleepcnt)));
    CHECK(set.evaluate(set.get("neg"), c) == -988);
}

TEST_CASE("bad definitions are refused with their line, and leave the set as it was") {
    MetricSet set = MetricSet::builtin();
    auto refused = [&](const char* text, int line, const char* words) {
        CAPTURE(text);
        try {
            set.add(text);
            FAIL("accepted");
        } catch (const MetricError& e) {
            CHECK(e.line() == line);
            CHECK(std::string(e.what()).find(words) != std::string::npos);
        }
    };
    refused("a = b\nb = c + 1\nc = a * 2\n", 1, "depends on itself");
    refused("loop = loop + 1", 1, "depends on itself");
    refused("\nx = CYCCNT +", 2, "value is expected");
    refused("x = nothing_here", 1, "neither a metric nor a counter");
    refused("cycles = CYCCNT", 1, "defined twice");
    refused("CYCCNT = 1", 1, "primary counter");
    refused("monotone r = CYCCNT / LSUCNT", 1, "cannot be monotone");
    refused("monotone r = cpi + 1", 1, "cannot be monotone");
    refused("monotone r = CYCCNT * LSUCNT", 1, "cannot be monotone");
    refused("just text", 1, "NAME = FORMULA");
    refused("x = (CYCCNT", 1, "missing ')'");
    CHECK(set.find("a") == nullptr);
    CHECK(set.find("x") == nullptr);
    CHECK_THROWS_AS(set.get("nope"), MetricError);
}

TEST_CASE("cores: ARMv7-M has the six DWT counters, ARMv6-M none") {
    CHECK(core_counters("armv7-m") == CounterMask{0x3F});
    CHECK(core_counters("armv7e-m") == CounterMask{0x3F});
    CHECK(core_counters("armv6-m") == CounterMask{0});
    CHECK_FALSE(core_counters("z80"));
    CHECK(mask_names(0x11) == "CYCCNT, LSUCNT");
    CHECK(mask_names(0) == "none");
}

}  // namespace
}  // namespace rackprof::campaign
