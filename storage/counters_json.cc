#include "storage/counters_json.h"

#include <string>

namespace rackprof::storage {
namespace {

nlohmann::json live_section_json(const SessionCounters& counters, LiveSection section) {
    nlohmann::json out = nlohmann::json::object();
    for_each_counter(counters, [&](const SessionCounter& counter, std::uint64_t value) {
        if (counter.live == section) out[std::string(counter.name)] = value;
    });
    return out;
}

}  // namespace

nlohmann::json counters_json(const SessionCounters& counters) {
    nlohmann::json out = nlohmann::json::object();
    for_each_counter(counters, [&](const SessionCounter& counter, std::uint64_t value) {
        out[std::string(counter.name)] = value;
    });
    return out;
}

nlohmann::json live_totals_json(const SessionCounters& counters) {
    return live_section_json(counters, LiveSection::kTotals);
}

nlohmann::json live_losses_json(const SessionCounters& counters) {
    return live_section_json(counters, LiveSection::kLosses);
}

nlohmann::json decoder_stats_json(const protocol::DecoderStats& stats) {
    nlohmann::json out = nlohmann::json::object();
    protocol::for_each_counter(stats,
                               [&](const protocol::DecoderCounter& counter, std::uint64_t value) {
                                   out[std::string(counter.name)] = value;
                               });
    return out;
}

}  // namespace rackprof::storage
