// Streaming decoder for the thesis' legacy format, binary or hex-ASCII.
//
// Bytes in any chunking give the same records and counters. Garbage and lost bytes are
// survived by resynchronising: a candidate record is accepted only if its addresses are
// plausible (inside the code range, when one is known) and the byte after it starts another
// record (or the stream ends). Every byte that becomes no record is counted as discarded.
// Hex text is decoded digit by digit (a record may start at any digit), so a lost character
// (half a byte) is resynchronised like a lost byte; discards are counted in characters.
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
    std::size_t pending_bytes() const override;
    const LegacyOptions& options() const { return options_; }

  private:
    static constexpr std::size_t kBatchSize = 4096;
    // What a chunk leaves undecided is less than one record plus the look-ahead byte, in units
    // ((9 + 1) bytes, 20 hex digits); deciding it may need as much again: >= 2 * 20 units.
    static constexpr std::size_t kCarrySize = 64;

    void feed_hex(std::span<const std::uint8_t> text, RecordSink& sink);
    // Units are bytes, or hex digits (one per text character, two per byte).
    void feed_units(const std::uint8_t* data, std::size_t size, RecordSink& sink);
    std::size_t decode(const std::uint8_t* data, std::size_t size, std::size_t stop_at, bool at_end,
                       RecordSink& sink);
    template <bool kHex, int kWidth>
    std::size_t decode_run(const std::uint8_t* data, std::size_t size, std::size_t stop_at,
                           bool at_end, RecordSink& sink);
    void discard(std::uint64_t units);
    void emit(const Record& record, RecordSink& sink);
    // emit() with the kind as a flag, counted without a branch.
    void emit_unbranched(const Record& record, bool arc, RecordSink& sink);
    void flush(RecordSink& sink);

    LegacyOptions options_;
    DecoderStats stats_;
    bool in_sync_ = true;

    std::array<std::uint8_t, kCarrySize> carry_{};
    std::size_t carry_len_ = 0;

    std::vector<std::uint8_t> scratch_;  // hex: the digits' values (0-15) of the current slice
    // Hex: where in the text (offsets from its start, bytes_in counting) the last digits fed
    // were, newest last: the carry is the last carry_len_ of them (pending_bytes()).
    std::array<std::uint64_t, kCarrySize> digit_at_{};
    std::size_t digits_known_ = 0;
    void note_last_digits(std::span<const std::uint8_t> text, std::uint64_t text_at);

    std::array<Record, kBatchSize> batch_{};
    std::size_t batch_len_ = 0;
};

}  // namespace rackprof::protocol
