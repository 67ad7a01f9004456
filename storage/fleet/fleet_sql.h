// What the fleet store's files share: SQL text helpers, the month partitions' naming, and the
// advisory locks. Internal to storage/fleet (fleet_schema.cc, fleet_push.cc, fleet_query.cc).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "storage/fleet/pg.h"

namespace rackprof::storage::fleet::detail {

// Advisory lock keys: one bench at a time migrates, or creates a month's partitions.
constexpr const char* kMigrationLock = "SELECT pg_advisory_xact_lock(72010001)";
constexpr const char* kPartitionLock = "SELECT pg_advisory_xact_lock(72010002)";

// Addresses and counts are unsigned 64-bit; bigint keeps their bits.
inline std::uint64_t as_unsigned(const PgResult& r, int row, int column) {
    return static_cast<std::uint64_t>(r.integer(row, column));
}

inline std::string text_array(const std::vector<std::string>& values) {
    std::string out = "{";
    for (std::size_t i = 0; i < values.size(); ++i) {
        if (i) out += ',';
        out += '"';
        for (char c : values[i]) {
            if (c == '"' || c == '\\') out += '\\';
            out += c;
        }
        out += '"';
    }
    return out + "}";
}

// In SQL, the first instant (Unix ns) of the UTC month a session started in: a build-sum
// group's month_ns, as month_of() gives it.
#define RACKPROF_FLEET_MONTH_OF_START                                                        \
    "(extract(epoch FROM date_trunc('month', to_timestamp(started_ns / 1000000000) AT TIME " \
    "ZONE 'UTC')) * 1000000000)::bigint"

// The UTC month holding `ns`: its first instant and the next month's, in Unix ns; `name` is
// its partitions' suffix (yYYYYmMM).
std::pair<std::int64_t, std::int64_t> month_of(std::int64_t ns, std::string& name);

}  // namespace rackprof::storage::fleet::detail
