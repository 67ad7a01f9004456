// The connection limits as decisions, without sockets: per-client and global limits, idle
// connections reclaimed oldest first, reserved slots, and refusals told once per episode.
#include "web/server/connection_table.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace rackprof::web::server {
namespace {

using Slot = ConnectionTable::Slot;
using namespace std::chrono_literals;

boost::asio::ip::address client(int n) {
    return boost::asio::ip::make_address("10.0.0." + std::to_string(n));
}

// Admits and records which connections were closed to make room.
struct Table {
    ConnectionTable table;
    std::vector<ConnectionTable::Id> closed;
    ConnectionTable::Clock::time_point now{};

    explicit Table(ConnectionLimits limits) : table(limits) {}
    ConnectionTable::Admission admit(int who) {
        now += 1s;  // each one newer than the one before
        auto id = std::make_shared<ConnectionTable::Id>(0);
        auto a = table.admit(
            client(who), [this, id] { closed.push_back(*id); }, now);
        *id = a.id;
        if (a.reclaimed) a.reclaimed();
        return a;
    }
};

TEST_CASE(
    "a client at its limit: its own oldest idle connection makes room, others are untouched") {
    Table t({10, 3, 1});
    const auto a1 = t.admit(1), a2 = t.admit(1), a3 = t.admit(1);
    const auto other = t.admit(2);
    CHECK(a3.slot == Slot::kOrdinary);
    CHECK(t.table.set_idle(a1.id, false, t.now));  // busy: not reclaimable
    const auto a4 = t.admit(1);
    CHECK(a4.slot == Slot::kOrdinary);
    CHECK(a4.client_limit);
    CHECK(t.closed == std::vector<ConnectionTable::Id>{a2.id});  // the oldest idle one
    CHECK_FALSE(t.table.set_idle(a2.id, false, t.now));          // reclaimed: must close
    CHECK(t.table.open_by(client(1)) == 3);
    CHECK(t.table.open_by(client(2)) == 1);
    (void)other;
}

TEST_CASE("at the global limit anyone's oldest idle connection makes room") {
    Table t({4, 3, 1});
    const auto a = t.admit(1);
    const auto b = t.admit(2);
    t.admit(3);
    t.admit(4);
    CHECK(t.table.set_idle(a.id, false, t.now));
    CHECK(t.table.set_idle(a.id, true, t.now + 100s));  // idle again, now the newest idle
    CHECK(t.admit(5).slot == Slot::kOrdinary);
    CHECK(t.closed == std::vector<ConnectionTable::Id>{b.id});
    CHECK(t.table.open() == 4);
}

TEST_CASE("nothing idle: reserved slots, one request each and one per client; then refusals") {
    Table t({2, 2, 2});
    for (int who : {1, 1}) t.table.set_idle(t.admit(who).id, false, t.now);  // busy
    const auto probe = t.admit(1);  // over its own limit, nothing idle: a reserved slot
    CHECK(probe.slot == Slot::kReserved);
    CHECK(t.admit(1).slot == Slot::kRefused);  // one reserved slot per client
    const auto other = t.admit(3);             // the global limit: reserved
    CHECK(other.slot == Slot::kReserved);
    CHECK(t.admit(4).slot == Slot::kRefused);  // none left
    CHECK(t.closed.empty());
    t.table.release(probe.id);
    CHECK(t.admit(4).slot == Slot::kReserved);
    CHECK(t.table.open() == 4);
}

TEST_CASE("released connections free their slots") {
    Table t({2, 2, 0});
    const auto a = t.admit(1);
    const auto b = t.admit(1);
    t.table.set_idle(a.id, false, t.now);
    t.table.set_idle(b.id, false, t.now);
    CHECK(t.admit(2).slot == Slot::kRefused);
    t.table.release(a.id);
    t.table.release(a.id);  // twice: no harm
    CHECK(t.admit(2).slot == Slot::kOrdinary);
    CHECK(t.table.open_by(client(1)) == 1);
}

TEST_CASE("feeds have a share below the global limit, in all and per client; never reclaimed") {
    Table t({8, 4, 1, 5, 2});
    std::vector<ConnectionTable::Id> feeds;
    for (int who : {1, 1, 2, 2, 3}) {
        const auto a = t.admit(who);
        REQUIRE(a.slot == Slot::kOrdinary);
        CHECK(t.table.open_feed(a.id));
        feeds.push_back(a.id);
    }
    CHECK(t.table.feeds() == 5);
    const auto third = t.admit(1);  // a third from client 1: over its share of feeds
    CHECK(third.slot == Slot::kOrdinary);
    CHECK_FALSE(t.table.open_feed(third.id));
    const auto sixth = t.admit(4);  // a new client, but the share in all is full
    CHECK_FALSE(t.table.open_feed(sixth.id));
    CHECK(t.table.feeds() == 5);
    // Feeds are busy for good: set_idle does not make them reclaimable.
    CHECK(t.table.set_idle(feeds[0], true, t.now));
    // The table is full (8): the ordinary ones make room, the feeds never do.
    for (int who : {5, 6, 7, 8, 9}) CHECK(t.admit(who).slot == Slot::kOrdinary);
    for (const auto id : feeds)
        CHECK(std::find(t.closed.begin(), t.closed.end(), id) == t.closed.end());
    CHECK(t.table.open() == 8);
    // A feed that ends gives its share back.
    t.table.release(feeds[0]);
    CHECK(t.table.feeds() == 4);
    const auto again = t.admit(1);
    CHECK(t.table.open_feed(again.id));
    CHECK_FALSE(t.table.open_feed(99999));  // gone (reclaimed or released): no feed
}

TEST_CASE("an episode of refusals and reclaims is told once, then counted when it is quiet") {
    LimitEpisode episode(10s);
    const LimitEpisode::Clock::time_point t0{};
    CHECK(episode.note(true, t0));
    CHECK_FALSE(episode.note(true, t0 + 1s));
    CHECK_FALSE(episode.note(false, t0 + 5s));
    CHECK(episode.quiet_at() == t0 + 15s);
    CHECK_FALSE(episode.end_if_quiet(t0 + 14s));  // 9 s since the last
    const auto summary = episode.end_if_quiet(t0 + 15s);
    REQUIRE(summary);
    CHECK(summary->refused == 2);
    CHECK(summary->reclaimed == 1);
    CHECK(summary->length == 5s);
    CHECK_FALSE(episode.active());
    CHECK(episode.note(false, t0 + 20s));  // a new episode
}

}  // namespace
}  // namespace rackprof::web::server
