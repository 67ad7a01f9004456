// The one line `convert` and `demo` print about what a decode produced.
#pragma once

#include <string>

#include "gmon/aggregate.h"
#include "protocol/decoder_stats.h"

namespace rackprof::daemon::app {

// "decoded 23 records (11 arcs, 12 PC samples) from 1207 bytes; ...". A target with an arc or
// PC cache sends a record per cache eviction carrying a count, so the records are not the calls:
// when `decoded`'s totals differ from the record counts the line says what they carry.
std::string summary_line(const protocol::DecoderStats& stats, const gmon::Aggregate& decoded);

}  // namespace rackprof::daemon::app
