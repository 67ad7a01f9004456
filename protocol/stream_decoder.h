// One interface for every wire format's streaming decoder (legacy, framed, ITM over SWO), so
// the capture loop, the converter and the tests drive them all the same way.
#pragma once

#include <cstddef>
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
    // The last bytes fed that are still undecided: finish() would turn them into records
    // (legacy records wait for the byte after them). Whoever stores raw bytes with their
    // records keeps these back for the next chunk, so stored bytes decode, to their end, to
    // exactly the stored records, whenever the process dies. 0 for decoders whose finish()
    // makes no records of a held-back tail (a cut frame or packet is discarded).
    virtual std::size_t pending_bytes() const { return 0; }
};

}  // namespace rackprof::protocol
