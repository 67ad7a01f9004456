// The counters as JSON, built from the counters' tables: the views the API, the live feed and
// `rackprof convert` show. Kept out of session_store.h so that only the code drawing JSON
// compiles nlohmann's header for it.
#pragma once

#include <nlohmann/json.hpp>

#include "protocol/decoder_stats.h"
#include "storage/counters.h"

namespace rackprof::storage {

// Every session counter: {"bytes_in": n, ..., "sleep_samples": n} (the API's "counters").
nlohmann::json counters_json(const SessionCounters& counters);
// The live feed's "totals" and "losses" (see LiveSection).
nlohmann::json live_totals_json(const SessionCounters& counters);
nlohmann::json live_losses_json(const SessionCounters& counters);
// Every decoder counter: {"bytes_in": n, ..., "sleep_samples": n} (convert's "stats").
nlohmann::json decoder_stats_json(const protocol::DecoderStats& stats);

}  // namespace rackprof::storage
