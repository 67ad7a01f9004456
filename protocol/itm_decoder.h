// Streaming ITM/DWT packet decoder: SWO bytes (formatter off, or TpiuDeframer's output) in,
// ItmPackets out.
//
// Bytes in any chunking give the same packets and counters. An invalid header is discarded and
// counted, and decoding goes on at the next byte; a packet whose payload turns out reserved
// (exception FN 00, a one-byte PC sample other than "asleep", a GTS2 of 5 bytes, a timestamp
// longer than the format allows) is discarded whole. ITM has no redundancy to check packets
// against, so alignment after garbage is a best guess until a sync packet (>= 47 zero bits
// then a one) makes it certain. A sync is recognised even where a misaligned packet swallowed
// some of its zero bytes. The stimulus port page is 0 again after a sync.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "protocol/itm_packet.h"

namespace rackprof::protocol {

namespace itm_detail {
enum class HeaderType : std::uint8_t;  // itm_decoder_inline.h
}  // namespace itm_detail

struct ItmStats {
    std::uint64_t bytes_in = 0;
    std::uint64_t bytes_decoded = 0;    // bytes of good packets (extension packets included)
    std::uint64_t bytes_discarded = 0;  // invalid headers, reserved encodings, truncated packets
    std::uint64_t resyncs = 0;          // times a good stream was followed by a discard
    std::uint64_t packets = 0;          // packets reported (extension packets are not)
    std::uint64_t syncs = 0;            // sync packets among them

    friend bool operator==(const ItmStats&, const ItmStats&) = default;
};

class ItmDecoder {
  public:
    void feed(std::span<const std::uint8_t> data, ItmPacketSink& sink);
    // The same for any sink with an on_packet(const ItmPacket&) the compiler can see (defined
    // in itm_decoder_inline.h): the sink's handling is inlined into the decoding loop.
    template <class Sink>
    void feed_inline(std::span<const std::uint8_t> data, Sink& sink);
    // End of stream or a break in it: a packet in progress is discarded; the zero-bit run of a
    // sync must start again. Decoding may go on afterwards.
    void finish();

    const ItmStats& stats() const { return stats_; }

  private:
    enum class State : std::uint8_t {
        kHeader,     // the next byte is a header
        kZeros,      // zero bytes at a header position: the start of a sync, or garbage
        kPayload,    // fixed-size payload of a source packet
        kContinued,  // 7-bit groups with a continuation bit (timestamps, extension)
    };

    // What a whole continued packet turned out to be.
    enum class Continued : std::uint8_t { kPacket, kNoPacket, kReserved };

    template <class Sink>
    std::size_t whole_packets(const std::uint8_t* p, std::size_t i, std::size_t n, Sink& sink);
    template <class Sink>
    Continued continued_packet(itm_detail::HeaderType type, std::uint8_t header, unsigned len,
                               std::uint8_t last, std::uint64_t value, std::uint16_t& page,
                               Sink& sink);
    template <class Sink>
    void step(std::uint8_t byte, Sink& sink);
    template <class Sink>
    void start(std::uint8_t header, Sink& sink);
    template <class Sink>
    void end_source(Sink& sink);
    template <class Sink>
    void end_continued(Sink& sink);
    template <class Sink>
    void emit(const ItmPacket& packet, Sink& sink);
    void decoded();
    void discard_pending();

    ItmStats stats_;
    State state_ = State::kHeader;
    bool in_sync_ = true;
    std::uint8_t header_ = 0;
    std::uint8_t need_ = 0;       // payload bytes the packet in progress has in all (or at most)
    std::uint8_t got_ = 0;        // payload bytes it has so far
    std::uint8_t last_ = 0;       // continued packets: the final byte
    std::uint64_t value_ = 0;     // its payload so far
    std::uint64_t pending_ = 0;   // its bytes so far, header included (zeros: the run)
    std::uint64_t zero_run_ = 0;  // consecutive zero bytes, wherever they were consumed
    std::uint16_t page_ = 0;      // stimulus port page from the last extension packet
};

}  // namespace rackprof::protocol
