#include "storage/aggregate_cache.h"

#include <doctest/doctest.h>

namespace rackprof::storage {
namespace {

gmon::Aggregate arcs(std::uint64_t from, std::uint64_t count) {
    gmon::Aggregate a;
    a.add_arc(from, 0x2000, count);
    return a;
}

TEST_CASE("the aggregate cache follows commits and never keeps a stale load") {
    AggregateCache cache;
    CHECK(cache.find(1) == nullptr);
    // A load at version 2, then commit 3: the entry takes the delta.
    cache.offer(1, 2, arcs(0x10, 5));
    cache.committed(1, 3, arcs(0x10, 1));
    REQUIRE(cache.find(1));
    CHECK(*cache.find(1) == arcs(0x10, 6));
    // A commit it already holds (a load after the commit) changes nothing.
    cache.offer(2, 7, arcs(0x20, 9));
    cache.committed(2, 7, arcs(0x20, 4));
    CHECK(*cache.find(2) == arcs(0x20, 9));
    // A load from before a reported commit is used but not kept.
    cache.committed(3, 5, arcs(0x30, 1));
    const auto stale = cache.offer(3, 4, arcs(0x30, 1));
    CHECK(*stale == arcs(0x30, 1));
    CHECK(cache.find(3) == nullptr);
    // A skipped version drops the entry: the next load is exact.
    cache.committed(1, 5, arcs(0x10, 1));
    CHECK(cache.find(1) == nullptr);
    // A holder of the old copy keeps what it had (copy on write).
    const auto held = cache.find(2);
    cache.committed(2, 8, arcs(0x20, 1));
    CHECK(*held == arcs(0x20, 9));
    CHECK(*cache.find(2) == arcs(0x20, 10));
    cache.erase(2);
    CHECK(cache.find(2) == nullptr);
}

TEST_CASE("the aggregate cache stays within its bound, least recently used out first") {
    AggregateCache cache(3);
    cache.offer(1, 1, arcs(0x10, 1));
    cache.offer(2, 1, arcs(0x20, 1));
    cache.offer(3, 1, arcs(0x30, 1));
    CHECK(cache.find(1));  // 1 is now the most recent
    cache.offer(4, 1, arcs(0x40, 1));
    CHECK(cache.find(2) == nullptr);
    CHECK(cache.find(1));
    CHECK(cache.find(4));
    CHECK(cache.stats().counts == 3);
}

}  // namespace
}  // namespace rackprof::storage
