#include "daemon/capture/live_snapshots.h"

#include <doctest/doctest.h>

#include <thread>

namespace rackprof::daemon::capture {
namespace {

gmon::Aggregate arcs(std::uint64_t from, std::uint64_t count) {
    gmon::Aggregate a;
    a.add_arc(from, 0x200, count);
    return a;
}

TEST_CASE("live snapshots: changes fold into the whole aggregate; the version moves only then") {
    LiveSnapshots live;
    CHECK_FALSE(live.snapshot(7).has_value());
    LiveState state;
    state.board = "b";
    state.counters.arcs = 3;
    live.publish(7, state, arcs(0x100, 3));
    const auto first = live.snapshot(7);
    REQUIRE(first.has_value());
    CHECK(first->state.board == "b");
    CHECK(first->aggregate->total_calls() == 3);
    CHECK(first->version == 1);

    // Nothing new: the same aggregate object and version, counters still refreshed.
    state.counters.bytes_in = 99;
    live.publish(7, state, gmon::Aggregate{});
    const auto same = live.snapshot(7);
    CHECK(same->version == 1);
    CHECK(same->aggregate == first->aggregate);
    CHECK(same->state.counters.bytes_in == 99);

    // Two publishes before a read coalesce; the earlier snapshot's aggregate is untouched.
    live.publish(7, state, arcs(0x100, 2));
    live.publish(7, state, arcs(0x104, 5));
    const auto later = live.snapshot(7);
    CHECK(later->version == 2);
    CHECK(later->aggregate->total_calls() == 10);
    CHECK(later->aggregate->distinct_arcs() == 2);
    CHECK(first->aggregate->total_calls() == 3);

    live.retire(7);
    CHECK_FALSE(live.snapshot(7).has_value());
    CHECK(live.sessions().empty());
}

TEST_CASE("live snapshots: a publisher and readers on other threads see every count once") {
    LiveSnapshots live;
    constexpr int kPublishes = 2000;
    std::thread publisher([&] {
        for (int i = 0; i < kPublishes; ++i)
            live.publish(1, LiveState{}, arcs(0x100 + 2 * static_cast<std::uint64_t>(i % 7), 1));
    });
    std::uint64_t last_version = 0;
    for (int i = 0; i < 500; ++i) {
        if (const auto s = live.snapshot(1)) {
            CHECK(s->version >= last_version);
            last_version = s->version;
        }
    }
    publisher.join();
    CHECK(live.snapshot(1)->aggregate->total_calls() == kPublishes);
}

}  // namespace
}  // namespace rackprof::daemon::capture
