// Streaming decoder for the thesis' legacy format, binary or hex-ASCII.
//
// Bytes in any chunking give the same records and counters. Garbage and lost bytes are
// survived by resynchronising: a candidate record is accepted only if its addresses are
// plausible (inside the code range, when one is known) and the byte after it starts another
// record (or the stream ends). Every byte that becomes no record is counted as discarded.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "protocol/decoder_stats.h"
#include "protocol/legacy_format.h"
#include "protocol/record_sink.h"
#include "protocol/stream_decoder.h"

namespace rackprof::protocol {

class LegacyDecoder final : public StreamDecoder {
  public:
    // Throws std::invalid_argument for invalid options.
    explicit LegacyDecoder(LegacyOptions options);

    void feed(std::span<const std::uint8_t> data, RecordSink& sink) override;
    // End of stream, or a break in it (a link went away): decides the held-back tail, a
    // truncated record counting as discarded. Decoding may go on afterwards; counters carry on.
    void finish(RecordSink& sink) override;

    const DecoderStats& stats() const override { return stats_; }
    const LegacyOptions& options() const { return options_; }

  private:
    static constexpr std::size_t kBatchSize = 4096;
    static constexpr std::size_t kCarrySize = 32;  // > the longest record (9) plus look-ahead

    void feed_hex(std::span<const std::uint8_t> text, RecordSink& sink);
    void feed_bytes(const std::uint8_t* data, std::size_t size, RecordSink& sink);
    std::size_t decode_run(const std::uint8_t* data, std::size_t size, std::size_t stop_at,
                           bool at_end, RecordSink& sink);
    void discard(std::uint64_t decoded_bytes);
    void emit(const Record& record, RecordSink& sink);
    void flush(RecordSink& sink);

    LegacyOptions options_;
    std::uint64_t wire_bytes_per_byte_;  // 2 for hex text, 1 for binary
    DecoderStats stats_;
    bool in_sync_ = true;

    std::array<std::uint8_t, kCarrySize> carry_{};
    std::size_t carry_len_ = 0;

    int pending_nibble_ = -1;            // hex: first digit of a byte not yet complete
    std::vector<std::uint8_t> scratch_;  // hex: decoded bytes of the current slice

    std::array<Record, kBatchSize> batch_{};
    std::size_t batch_len_ = 0;
};

}  // namespace rackprof::protocol
