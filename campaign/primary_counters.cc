#include "campaign/primary_counters.h"

#include <array>
#include <utility>

namespace rackprof::campaign {

namespace {

constexpr std::array<const char*, kPrimaryCounters> kNames = {"CYCCNT",   "CPICNT", "EXCCNT",
                                                              "SLEEPCNT", "LSUCNT", "FOLDCNT"};

constexpr CounterMask kDwtAll = 0x3F;
constexpr std::array<std::pair<const char*, CounterMask>, 5> kCores = {{
    {"armv6-m", 0},
    {"armv7-m", kDwtAll},
    {"armv7e-m", kDwtAll},
    {"armv8-m.base", 0},
    {"armv8-m.main", kDwtAll},
}};

}  // namespace

const char* counter_name(PrimaryCounter c) {
    return kNames[static_cast<std::size_t>(c)];
}

std::optional<PrimaryCounter> counter_by_name(std::string_view name) {
    for (std::size_t i = 0; i < kNames.size(); ++i) {
        if (name == kNames[i]) return static_cast<PrimaryCounter>(i);
    }
    return std::nullopt;
}

std::string mask_names(CounterMask mask) {
    std::string out;
    for (int i = 0; i < kPrimaryCounters; ++i) {
        if (!(mask & (1u << i))) continue;
        if (!out.empty()) out += ", ";
        out += kNames[static_cast<std::size_t>(i)];
    }
    return out.empty() ? "none" : out;
}

std::optional<CounterMask> core_counters(std::string_view architecture) {
    for (const auto& [name, mask] : kCores) {
        if (architecture == name) return mask;
    }
    return std::nullopt;
}

std::string core_names() {
    std::string out;
    for (const auto& [name, mask] : kCores) {
        if (!out.empty()) out += ", ";
        out += name;
    }
    return out;
}

}  // namespace rackprof::campaign
