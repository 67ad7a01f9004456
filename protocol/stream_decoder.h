// One interface for every wire format's streaming decoder (legacy, framed, ITM over SWO), so
// the capture loop, the converter and the tests drive them all the same way.
#pragma once

#include <cstdint>
#include <span>

#include "protocol/decoder_stats.h"
#include "protocol/record_sink.h"

namespace rackprof::protocol {

class StreamDecoder {
  public:
    virtual ~StreamDecoder() = default;

    // Bytes in any chunking give the same records, events and counters.
    virtual void feed(std::span<const std::uint8_t> data, RecordSink& sink) = 0;
    // End of stream, or a break in it (a link went away): decides any held-back tail, a
    // truncated unit counting as discarded. Decoding may go on afterwards; counters carry on.
    virtual void finish(RecordSink& sink) = 0;
    virtual const DecoderStats& stats() const = 0;
};

}  // namespace rackprof::protocol
