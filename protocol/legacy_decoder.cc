#include "protocol/legacy_decoder.h"

#include <algorithm>
#include <cassert>
#include <cstring>

namespace rackprof::protocol {

namespace {

constexpr std::uint8_t kHexSpace = 0x10;
constexpr std::uint8_t kHexInvalid = 0xFF;

constexpr std::array<std::uint8_t, 256> make_hex_table() {
    std::array<std::uint8_t, 256> table{};
    for (auto& v : table) v = kHexInvalid;
    for (int c = '0'; c <= '9'; ++c) table[c] = static_cast<std::uint8_t>(c - '0');
    for (int c = 'A'; c <= 'F'; ++c) table[c] = static_cast<std::uint8_t>(c - 'A' + 10);
    for (int c = 'a'; c <= 'f'; ++c) table[c] = static_cast<std::uint8_t>(c - 'a' + 10);
    for (int c : {' ', '\t', '\r', '\n', '\v', '\f'}) table[c] = kHexSpace;
    return table;
}
constexpr auto kHexTable = make_hex_table();

inline bool is_tag(std::uint8_t b) {
    return b == kLegacyArcTag || b == kLegacyPcTag;
}

inline std::uint32_t read_be(const std::uint8_t* p, int width) {
    std::uint32_t v = 0;
    for (int i = 0; i < width; ++i) v = (v << 8) | p[i];
    return v;
}

}  // namespace

LegacyDecoder::LegacyDecoder(LegacyOptions options)
    : options_(options), wire_bytes_per_byte_(options.encoding == LegacyEncoding::kHex ? 2 : 1) {
    validate(options_);
}

void LegacyDecoder::feed(std::span<const std::uint8_t> data, RecordSink& sink) {
    stats_.bytes_in += data.size();
    if (options_.encoding == LegacyEncoding::kHex) {
        feed_hex(data, sink);
    } else {
        feed_bytes(data.data(), data.size(), sink);
    }
    flush(sink);
}

void LegacyDecoder::feed_hex(std::span<const std::uint8_t> text, RecordSink& sink) {
    constexpr std::size_t kSlice = 64 * 1024;
    scratch_.resize(kSlice / 2 + 1);
    std::size_t offset = 0;
    while (offset < text.size()) {
        const std::size_t end = std::min(text.size(), offset + kSlice);
        std::uint8_t* out = scratch_.data();
        int pending = pending_nibble_;
        for (std::size_t i = offset; i < end; ++i) {
            const std::uint8_t v = kHexTable[text[i]];
            if (v < 16) [[likely]] {
                if (pending < 0) {
                    pending = v;
                } else {
                    *out++ = static_cast<std::uint8_t>((pending << 4) | v);
                    pending = -1;
                }
            } else if (v == kHexInvalid) {
                // Not hex: the character and any half-read byte are lost. The record layer
                // then sees a gap and resynchronises.
                stats_.bytes_discarded += pending < 0 ? 1 : 2;
                pending = -1;
            }
            // White space and line breaks between digits carry no data.
        }
        pending_nibble_ = pending;
        feed_bytes(scratch_.data(), static_cast<std::size_t>(out - scratch_.data()), sink);
        offset = end;
    }
}

void LegacyDecoder::feed_bytes(const std::uint8_t* data, std::size_t size, RecordSink& sink) {
    std::size_t start = 0;
    if (carry_len_ > 0) {
        // Finish what the previous chunk left undecided, using the first bytes of this one.
        const std::size_t take = std::min(size, kCarrySize - carry_len_);
        std::memcpy(carry_.data() + carry_len_, data, take);
        const std::size_t total = carry_len_ + take;
        const std::size_t pos = decode_run(carry_.data(), total, carry_len_, false, sink);
        if (pos < carry_len_) {
            // Still undecided: this chunk was too short to settle it and is all in carry_.
            assert(take == size);
            std::memmove(carry_.data(), carry_.data() + pos, total - pos);
            carry_len_ = total - pos;
            return;
        }
        start = pos - carry_len_;
        carry_len_ = 0;
    }
    if (start >= size) return;
    const std::size_t pos =
        start + decode_run(data + start, size - start, size - start, false, sink);
    carry_len_ = size - pos;
    assert(carry_len_ < kCarrySize);
    std::memcpy(carry_.data(), data + pos, carry_len_);
}

// Decodes records starting before stop_at. Returns where it stopped: at or past stop_at, or
// earlier where a record cannot be decided without more bytes (never when at_end).
std::size_t LegacyDecoder::decode_run(const std::uint8_t* data, std::size_t size,
                                      std::size_t stop_at, bool at_end, RecordSink& sink) {
    const int width = options_.addr_bytes;
    const std::size_t arc_len = legacy_record_size(kLegacyArcTag, width);
    const std::size_t pc_len = legacy_record_size(kLegacyPcTag, width);
    const bool check_range = options_.code_range.has_value();
    const AddressRange range = options_.code_range.value_or(AddressRange{});

    std::size_t pos = 0;
    while (pos < stop_at) {
        const std::uint8_t tag = data[pos];
        std::size_t len;
        if (tag == kLegacyArcTag) {
            len = arc_len;
        } else if (tag == kLegacyPcTag) {
            len = pc_len;
        } else {
            discard(1);
            ++pos;
            continue;
        }
        const std::size_t next = pos + len;
        if (next > size || (next == size && !at_end)) {
            if (!at_end) break;  // wait for more bytes
            discard(1);          // the stream ended inside this record
            ++pos;
            continue;
        }
        bool plausible = next == size || is_tag(data[next]);
        Record record;
        if (tag == kLegacyArcTag) {
            record =
                Record::arc(read_be(data + pos + 1, width), read_be(data + pos + 1 + width, width));
            if (check_range) {
                plausible =
                    plausible && range.contains(record.from_pc) && range.contains(record.self_pc);
            }
        } else {
            record = Record::pc_sample(read_be(data + pos + 1, width));
            if (check_range) plausible = plausible && range.contains(record.self_pc);
        }
        if (plausible) [[likely]] {
            emit(record, sink);
            pos = next;
        } else {
            discard(1);
            ++pos;
        }
    }
    return pos;
}

void LegacyDecoder::finish(RecordSink& sink) {
    if (pending_nibble_ >= 0) {
        stats_.bytes_discarded += 1;  // a lone hex digit at the very end
        pending_nibble_ = -1;
    }
    if (carry_len_ > 0) {
        const std::size_t pos = decode_run(carry_.data(), carry_len_, carry_len_, true, sink);
        assert(pos == carry_len_);
        (void)pos;
        carry_len_ = 0;
    }
    flush(sink);
}

void LegacyDecoder::discard(std::uint64_t decoded_bytes) {
    stats_.bytes_discarded += decoded_bytes * wire_bytes_per_byte_;
    if (in_sync_) {
        ++stats_.resyncs;
        in_sync_ = false;
    }
}

inline void LegacyDecoder::emit(const Record& record, RecordSink& sink) {
    in_sync_ = true;
    if (record.kind == RecordKind::kArc) {
        ++stats_.arcs;
    } else {
        ++stats_.pc_samples;
    }
    batch_[batch_len_++] = record;
    if (batch_len_ == kBatchSize) flush(sink);
}

void LegacyDecoder::flush(RecordSink& sink) {
    if (batch_len_ == 0) return;
    sink.on_records(std::span<const Record>(batch_.data(), batch_len_));
    batch_len_ = 0;
}

}  // namespace rackprof::protocol
