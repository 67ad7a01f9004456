// Stored sessions' aggregates: whole ones through the capture service's cache, and windows.
#include "daemon/service/stored_aggregates.h"

#include <doctest/doctest.h>

#include "daemon/service/scratch_rack_test.h"

namespace rackprof::daemon::service {
namespace {

using protocol::Record;

TEST_CASE("stored aggregates: a whole session loaded once and offered to the cache") {
    ScratchRack rack;
    const std::int64_t id =
        rack.store("b1", {Record::arc(0x104, 0x120, 3), Record::pc_sample(0x124, 2)});
    storage::ReaderPool readers(rack.config.storage_path, 2);
    StoredAggregates aggregates(rack.capture.aggregates(), readers);
    const auto whole = aggregates.whole(id);
    CHECK(whole->total_calls() == 3);
    CHECK(whole->total_samples() == 2);
    CHECK(aggregates.whole(id) == rack.capture.aggregates().find(id));
    CHECK(aggregates.whole(id + 1)->total_calls() == 0);  // none stored: empty

    CHECK(aggregates.between(id, std::nullopt, std::nullopt)->total_calls() == 3);
    CHECK(aggregates.between(id, std::nullopt, 0)->total_calls() == 0);  // before its records came
}

}  // namespace
}  // namespace rackprof::daemon::service
