#include "protocol/itm_decoder.h"

#include "protocol/itm_decoder_inline.h"

namespace rackprof::protocol {

void ItmDecoder::feed(std::span<const std::uint8_t> data, ItmPacketSink& sink) {
    feed_inline(data, sink);
}

void ItmDecoder::finish() {
    if (state_ != State::kHeader) discard_pending();
    zero_run_ = 0;
}

void ItmDecoder::discard_pending() {
    stats_.bytes_discarded += pending_;
    pending_ = 0;
    state_ = State::kHeader;
    if (in_sync_) {
        ++stats_.resyncs;
        in_sync_ = false;
    }
}

}  // namespace rackprof::protocol
