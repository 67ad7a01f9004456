// Sessions' aggregates kept in memory, so a profile or gmon.out request does not rebuild one
// from SQLite (a read of every distinct arc and PC of the session).
//
// Versions keep it exact without holding the writer back: every commit that changes a
// session's aggregate counts its `aggregate_version` up (session_store.h). The writer hands each
// committed delta over with its version; an entry one version behind takes it, any other is
// dropped. A reader that misses loads (aggregate, version) from one snapshot and offers it: it
// is kept only if no newer commit was reported meanwhile, so a stale copy never stays.
// Bounded by the entries' distinct arcs and PCs, least recently used out first.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>

#include "gmon/aggregate.h"

namespace rackprof::storage {

class AggregateCache {
  public:
    explicit AggregateCache(std::size_t max_counts = 4'000'000) : max_counts_(max_counts) {}

    // The cached aggregate, or nullptr.
    std::shared_ptr<const gmon::Aggregate> find(std::int64_t session);
    // A reader's load at `version`; returns what to use (the offered copy, kept or not).
    std::shared_ptr<const gmon::Aggregate> offer(std::int64_t session, std::int64_t version,
                                                 gmon::Aggregate aggregate);
    // The writer, after a commit that took this session's aggregate to `version`.
    void committed(std::int64_t session, std::int64_t version, const gmon::Aggregate& delta);
    // The writer, after deleting the session.
    void erase(std::int64_t session);

    struct Stats {
        std::uint64_t hits = 0, misses = 0, entries = 0, counts = 0;
    };
    Stats stats();

  private:
    struct Entry {
        std::int64_t session;
        std::int64_t version;
        std::shared_ptr<gmon::Aggregate> aggregate;  // handed out as const
        std::size_t counts;
    };
    static std::size_t counts_of(const gmon::Aggregate& a);
    void evict();

    std::mutex mutex_;
    std::size_t max_counts_;
    std::size_t counts_ = 0;
    std::list<Entry> lru_;  // most recently used first
    std::map<std::int64_t, std::list<Entry>::iterator> by_session_;
    std::map<std::int64_t, std::int64_t> newest_committed_;  // per session written this run
    std::uint64_t hits_ = 0, misses_ = 0;
};

}  // namespace rackprof::storage
