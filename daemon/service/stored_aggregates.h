// Stored sessions' aggregates for the views: a whole one from the capture service's cache
// (loaded once and offered to it on a miss), or the counts inside a time window.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "gmon/aggregate.h"
#include "storage/aggregate_cache.h"
#include "storage/reader_pool.h"

namespace rackprof::daemon::service {

class StoredAggregates {
  public:
    StoredAggregates(storage::AggregateCache& cache, storage::ReaderPool& readers)
        : cache_(cache), readers_(readers) {}

    // Empty for a session with no counts (or none stored).
    std::shared_ptr<const gmon::Aggregate> whole(std::int64_t session);
    // The record batches received in [from_ns, to_ns]; an open end is the session's.
    std::shared_ptr<const gmon::Aggregate> between(std::int64_t session,
                                                   std::optional<std::int64_t> from_ns,
                                                   std::optional<std::int64_t> to_ns);

  private:
    storage::AggregateCache& cache_;
    storage::ReaderPool& readers_;
};

}  // namespace rackprof::daemon::service
