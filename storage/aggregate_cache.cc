#include "storage/aggregate_cache.h"

namespace rackprof::storage {

std::size_t AggregateCache::counts_of(const gmon::Aggregate& a) {
    return a.distinct_arcs() + a.distinct_pcs();
}

std::shared_ptr<const gmon::Aggregate> AggregateCache::find(std::int64_t session) {
    std::lock_guard lock(mutex_);
    const auto it = by_session_.find(session);
    if (it == by_session_.end()) {
        ++misses_;
        return nullptr;
    }
    ++hits_;
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->aggregate;
}

std::shared_ptr<const gmon::Aggregate> AggregateCache::offer(std::int64_t session,
                                                             std::int64_t version,
                                                             gmon::Aggregate aggregate) {
    const std::size_t counts = counts_of(aggregate);
    auto shared = std::make_shared<gmon::Aggregate>(std::move(aggregate));
    std::lock_guard lock(mutex_);
    if (const auto newest = newest_committed_.find(session);
        newest != newest_committed_.end() && newest->second > version)
        return shared;  // a commit came after this snapshot: usable now, not worth keeping
    if (const auto it = by_session_.find(session); it != by_session_.end()) {
        if (it->second->version >= version) return shared;
        counts_ -= it->second->counts;
        lru_.erase(it->second);
        by_session_.erase(it);
    }
    if (counts > max_counts_) return shared;  // larger than the whole cache
    lru_.push_front(Entry{session, version, shared, counts});
    by_session_[session] = lru_.begin();
    counts_ += counts;
    evict();
    return shared;
}

void AggregateCache::committed(std::int64_t session, std::int64_t version,
                               const gmon::Aggregate& delta) {
    std::lock_guard lock(mutex_);
    auto& newest = newest_committed_[session];
    newest = std::max(newest, version);
    const auto it = by_session_.find(session);
    if (it == by_session_.end()) return;
    Entry& e = *it->second;
    if (e.version >= version) return;  // loaded after this commit: it is in there
    if (e.version + 1 != version) {    // a commit it never saw: drop it, the next load is exact
        counts_ -= e.counts;
        lru_.erase(it->second);
        by_session_.erase(it);
        return;
    }
    // Readers may hold the current copy (only find() hands it out, under this lock): then the
    // delta goes into a copy; else into the entry itself.
    if (e.aggregate.use_count() > 1) e.aggregate = std::make_shared<gmon::Aggregate>(*e.aggregate);
    e.aggregate->merge(delta);
    counts_ -= e.counts;
    e.counts = counts_of(*e.aggregate);
    counts_ += e.counts;
    e.version = version;
    evict();
}

void AggregateCache::erase(std::int64_t session) {
    std::lock_guard lock(mutex_);
    newest_committed_.erase(session);
    if (const auto it = by_session_.find(session); it != by_session_.end()) {
        counts_ -= it->second->counts;
        lru_.erase(it->second);
        by_session_.erase(it);
    }
}

void AggregateCache::evict() {
    while (counts_ > max_counts_ && !lru_.empty()) {
        counts_ -= lru_.back().counts;
        by_session_.erase(lru_.back().session);
        lru_.pop_back();
    }
}

AggregateCache::Stats AggregateCache::stats() {
    std::lock_guard lock(mutex_);
    return {hits_, misses_, lru_.size(), counts_};
}

}  // namespace rackprof::storage
