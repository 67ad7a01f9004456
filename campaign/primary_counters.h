// The primary counters a core can count per function, and which cores have which.
// ARMv7-M (and ARMv8-M Mainline) DWT: CYCCNT (32-bit cycle counter) and the 8-bit event
// counters CPICNT (extra cycles of multi-cycle instructions), EXCCNT (exception entry/exit
// overhead), SLEEPCNT (cycles asleep), LSUCNT (extra load/store cycles) and FOLDCNT (folded
// instructions). ARMv6-M (Cortex-M0/M0+) and ARMv8-M Baseline have none of them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "protocol/stream_event.h"

namespace rackprof::campaign {

enum class PrimaryCounter : std::uint8_t {
    kCyccnt = 0,
    kCpicnt = 1,
    kExccnt = 2,
    kSleepcnt = 3,
    kLsucnt = 4,
    kFoldcnt = 5,
};
inline constexpr int kPrimaryCounters = protocol::kPrimaryCounters;
using CounterValues = protocol::CounterValues;
// A set of primary counters: bit i is PrimaryCounter i (the wire's counter mask).
using CounterMask = std::uint8_t;

constexpr CounterMask mask_of(PrimaryCounter c) {
    return static_cast<CounterMask>(1u << static_cast<unsigned>(c));
}
const char* counter_name(PrimaryCounter c);
std::optional<PrimaryCounter> counter_by_name(std::string_view name);
// "CYCCNT, LSUCNT" for a mask; "none" when empty.
std::string mask_names(CounterMask mask);

// The counters a core architecture has: "armv7-m", "armv7e-m", "armv8-m.main" (all six),
// "armv6-m", "armv8-m.base" (none). Nothing for an unknown name.
std::optional<CounterMask> core_counters(std::string_view architecture);
// "armv6-m, armv7-m, ..." for messages.
std::string core_names();

}  // namespace rackprof::campaign
