#include "storage/counters.h"

namespace rackprof::storage {

void set_decoder_counters(SessionCounters& counters, const protocol::DecoderStats& stats) {
    for (const auto& pair : kDecoderToSession) counters.*pair.session = stats.*pair.decoder;
}

protocol::DecoderStats decoder_counters(const SessionCounters& counters) {
    protocol::DecoderStats stats;
    for (const auto& pair : kDecoderToSession) stats.*pair.decoder = counters.*pair.session;
    return stats;
}

}  // namespace rackprof::storage
