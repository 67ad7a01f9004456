#include "gmon/aggregate.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <random>
#include <stdexcept>

namespace rackprof::gmon {
namespace {

using protocol::Record;

TEST_CASE("aggregates repeated arcs and samples with wide counts") {
    Aggregate a;
    std::vector<Record> batch;
    for (int i = 0; i < 1000; ++i) {
        batch.push_back(Record::arc(0x153D, 0x14E5, 100000));
        batch.push_back(Record::pc_sample(0x14B4, 100000));
    }
    batch.push_back(Record::arc(0x150D, 0x1499, 7));
    for (int round = 0; round < 50; ++round) a.add(batch);  // 5 * 10^9 of each: beyond 32 bits
    const auto arcs = a.arcs();
    REQUIRE(arcs.size() == 2);
    CHECK(arcs[0] == ArcCount{0x150D, 0x1499, 7ull * 50});
    CHECK(arcs[1] == ArcCount{0x153D, 0x14E5, 5'000'000'000ull});
    CHECK(a.pc_samples() == std::vector<PcCount>{{0x14B4, 5'000'000'000ull}});
    CHECK(a.total_samples() == 5'000'000'000ull);
    CHECK(a.total_calls() == 5'000'000'000ull + 7ull * 50);
}

TEST_CASE("many distinct keys survive table growth, in any order of arrival") {
    std::mt19937 rng(3);
    std::vector<Record> records;
    for (std::uint32_t i = 0; i < 20000; ++i) {
        records.push_back(Record::arc(i * 2 + 1, (i * 7919) % 4096 + 1));
        records.push_back(Record::pc_sample(i * 4));
    }
    Aggregate forward;
    forward.add(records);
    std::shuffle(records.begin(), records.end(), rng);
    Aggregate shuffled;
    for (std::size_t i = 0; i < records.size(); i += 333) {
        shuffled.add(std::span<const Record>(records).subspan(
            i, std::min<std::size_t>(333, records.size() - i)));
    }
    CHECK(forward == shuffled);
    CHECK(forward.arcs().size() == 20000);
    CHECK(forward.pc_samples().size() == 20000);
}

TEST_CASE("pc_samples are sorted by address, 32- and 64-bit, many or few") {
    std::mt19937_64 rng(5);
    for (const std::size_t n : {10, 5000, 50000}) {
        for (const bool wide : {false, true}) {
            Aggregate a;
            std::map<std::uint64_t, std::uint64_t> expected;
            for (std::size_t i = 0; i < n; ++i) {
                const std::uint64_t pc = wide ? rng() : rng() % 0x100000000u;
                const std::uint64_t count = 1 + rng() % 7;
                a.add_pc(pc, count);
                expected[pc] += count;
            }
            std::vector<PcCount> want;
            for (const auto& [pc, count] : expected) want.push_back({pc, count});
            CHECK(a.pc_samples() == want);
        }
    }
}

TEST_CASE("merge adds counts") {
    Aggregate a, b, both;
    a.add_arc(1, 2, 3);
    a.add_pc(0x100, 4);
    b.add_arc(1, 2, 5);
    b.add_arc(0x1'0000'0000ull, 2, 1);  // a 64-bit address
    b.add_pc(0x100, 1);
    a.merge(b);
    CHECK(a.arcs() == std::vector<ArcCount>{{1, 2, 8}, {0x1'0000'0000ull, 2, 1}});
    CHECK(a.pc_samples() == std::vector<PcCount>{{0x100, 5}});
    CHECK(a.total_calls() == 9);
    CHECK(a.total_samples() == 5);
}

TEST_CASE("adopted sorted PCs read back as given, and as counts once more are added") {
    Aggregate a;
    a.add_arc(1, 2, 3);
    a.adopt_sorted_pcs({{0x100, 4}, {0x102, 0}, {0xFFFF'FFFF'FFFF'FFFFull, 1}});
    CHECK(a.distinct_pcs() == 3);
    CHECK(a.total_samples() == 5);
    CHECK(a.pc_samples() ==
          std::vector<PcCount>{{0x100, 4}, {0x102, 0}, {0xFFFF'FFFF'FFFF'FFFFull, 1}});
    {
        // Read in place: the scratch stays unused.
        std::vector<PcCount> scratch;
        const auto in_place = a.pc_samples(scratch);
        CHECK(std::vector<PcCount>(in_place.begin(), in_place.end()) == a.pc_samples());
        CHECK(scratch.empty());
    }
    CHECK_THROWS_AS(a.adopt_sorted_pcs({{0x200, 1}}), std::logic_error);
    Aggregate sum;
    sum.merge(a);        // from the sorted PCs
    a.add_pc(0x100, 1);  // into the table
    CHECK(a.pc_samples() ==
          std::vector<PcCount>{{0x100, 5}, {0x102, 0}, {0xFFFF'FFFF'FFFF'FFFFull, 1}});
    CHECK(a.total_samples() == 6);
    {
        // From the table: sorted into the scratch.
        std::vector<PcCount> scratch;
        const auto sorted = a.pc_samples(scratch);
        CHECK(std::vector<PcCount>(sorted.begin(), sorted.end()) == a.pc_samples());
        CHECK(sorted.data() == scratch.data());
    }
    sum.add_pc(0x100, 1);
    CHECK(sum == a);
    CHECK(sum.total_samples() == 6);
    Aggregate unsorted;
    CHECK_THROWS_AS(unsorted.adopt_sorted_pcs({{0x102, 1}, {0x100, 1}}), std::logic_error);
    CHECK_THROWS_AS(unsorted.adopt_sorted_pcs({{0x100, 1}, {0x100, 1}}), std::logic_error);
    CHECK(unsorted.empty());
}

TEST_CASE("the all-ones key is an ordinary key") {
    Aggregate a;
    a.add_arc(0xFFFFFFFF, 0xFFFFFFFF, 2);
    a.add_pc(0xFFFFFFFF, 1);
    CHECK(a.arcs() == std::vector<ArcCount>{{0xFFFFFFFF, 0xFFFFFFFF, 2}});
    CHECK(a.pc_samples() == std::vector<PcCount>{{0xFFFFFFFF, 1}});
}

}  // namespace
}  // namespace rackprof::gmon

namespace rackprof::gmon {

// The hot code's PCs are counted in an array (the window) once a capture's worth has come:
// what reads back must be exactly what a plain map of the same adds says, whatever the order,
// with PCs inside the window, odd ones in its range, PCs outside it, merges and adopted PCs.
TEST_CASE("the PC window: counts, order and distinct PCs as a plain map says") {
    std::mt19937_64 rng(5);
    std::map<std::uint64_t, std::uint64_t> truth;
    Aggregate a;
    std::vector<protocol::Record> batch;
    const auto pc_of = [&] {
        switch (rng() % 8) {
            case 0:
                return std::uint32_t(0x20000000 + rng() % 512);  // RAM code, far away
            case 1:
                return std::uint32_t(0x08000001 + 2 * (rng() % 40000));  // odd: the table's
            default:
                return std::uint32_t(0x08000000 + 2 * (rng() % 20000));  // the hot 40 KB
        }
    };
    for (int round = 0; round < 40; ++round) {
        batch.clear();
        for (int i = 0; i < 5000; ++i) {
            const std::uint64_t pc = pc_of();
            const std::uint64_t n = 1 + rng() % 3;
            batch.push_back(protocol::Record::pc_sample(pc, n));
            truth[pc] += n;
        }
        a.add(batch);
        if (round == 30) {
            a.add_pc(0x08000010, 7);
            truth[0x08000010] += 7;
        }
    }
    std::vector<PcCount> expected;
    std::uint64_t total = 0;
    for (const auto& [pc, n] : truth) {
        expected.push_back({pc, n});
        total += n;
    }
    CHECK(a.pc_samples() == expected);
    CHECK(a.distinct_pcs() == truth.size());
    CHECK(a.total_samples() == total);
    // Merged both ways: into an aggregate without a window, and one with.
    Aggregate small;
    small.add_pc(0x08000002, 1);
    small.merge(a);
    Aggregate twice = a;
    twice.merge(a);
    truth[0x08000002] += 1;
    std::vector<PcCount> merged;
    for (const auto& [pc, n] : truth) merged.push_back({pc, n});
    CHECK(small.pc_samples() == merged);
    CHECK(small.distinct_pcs() == truth.size());
    for (PcCount& p : expected) p.count *= 2;
    CHECK(twice.pc_samples() == expected);
    CHECK(twice.total_samples() == 2 * total);
}

// add() counts a batch in order or split by kind first, by how predictable the kinds' order
// is: both ways must count what a plain map counts.
TEST_CASE("arcs and samples at random or in a pattern: counted as a plain map counts them") {
    // At random: kinds and arcs drawn anew each time. In a pattern: two arcs then a sample,
    // the arcs drawn from hundreds. In a loop: the same pattern with the arcs of a loop, a few
    // taking turns (repeats, alternations and now and then another).
    enum class Order { kRandom, kPattern, kLoop };
    for (const Order order : {Order::kRandom, Order::kPattern, Order::kLoop}) {
        CAPTURE(static_cast<int>(order));
        std::mt19937_64 rng(11);
        std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint64_t> arc_truth;
        std::map<std::uint64_t, std::uint64_t> pc_truth;
        std::uint64_t calls = 0, samples = 0;
        Aggregate a;
        std::vector<Record> batch;
        constexpr std::uint32_t kLoopArcs[] = {0, 1, 0, 1, 2, 2};
        for (int round = 0; round < 30; ++round) {
            batch.clear();
            const std::size_t size = 1000 + rng() % 4000;  // not a multiple of a piece
            for (std::size_t i = 0; i < size; ++i) {
                const bool arc = order == Order::kRandom ? rng() % 10 < 7 : i % 3 != 2;
                const std::uint32_t n = 1 + static_cast<std::uint32_t>(rng() % 3);
                if (arc) {
                    std::uint32_t pick = static_cast<std::uint32_t>(rng() % 500);
                    if (order == Order::kLoop) pick = rng() % 8 ? kLoopArcs[i % 6] : 3 + pick % 4;
                    const auto from = 0x08000001u + 2 * pick;
                    const auto self = 0x08000000u + 4 * (pick % 90);
                    batch.push_back(Record::arc(from, self, n));
                    arc_truth[{from, self}] += n;
                    calls += n;
                } else {
                    const auto pc = 0x08000000u + 2 * static_cast<std::uint32_t>(rng() % 30000);
                    batch.push_back(Record::pc_sample(pc, n));
                    pc_truth[pc] += n;
                    samples += n;
                }
            }
            a.add(batch);
        }
        std::vector<ArcCount> arcs;
        for (const auto& [key, n] : arc_truth) arcs.push_back({key.first, key.second, n});
        std::vector<PcCount> pcs;
        for (const auto& [pc, n] : pc_truth) pcs.push_back({pc, n});
        CHECK(a.arcs() == arcs);
        CHECK(a.pc_samples() == pcs);
        CHECK(a.total_calls() == calls);
        CHECK(a.total_samples() == samples);
        // Both ways were taken: the random order split (all but the predictor's first batch),
        // the patterns never.
        if (order == Order::kRandom) {
            CHECK(a.batches_split() >= 29);
        } else {
            CHECK(a.batches_split() == 0);
        }
    }
}

}  // namespace rackprof::gmon
