#include "daemon/service/stored_aggregates.h"

#include <limits>

namespace rackprof::daemon::service {

std::shared_ptr<const gmon::Aggregate> StoredAggregates::whole(std::int64_t session) {
    if (auto hit = cache_.find(session)) return hit;
    auto loaded = readers_.lease()->versioned_aggregate(session);
    if (!loaded) return std::make_shared<const gmon::Aggregate>();
    return cache_.offer(session, loaded->version, std::move(loaded->aggregate));
}

std::shared_ptr<const gmon::Aggregate> StoredAggregates::between(
    std::int64_t session, std::optional<std::int64_t> from_ns, std::optional<std::int64_t> to_ns) {
    return std::make_shared<const gmon::Aggregate>(readers_.lease()->aggregate_between(
        session, from_ns.value_or(0), to_ns.value_or(std::numeric_limits<std::int64_t>::max())));
}

}  // namespace rackprof::daemon::service
