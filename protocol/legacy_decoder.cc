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

// A big-endian address of kWidth (3 or 4) bytes as one load; reads 4 bytes.
template <int kWidth>
inline std::uint32_t load_address(const std::uint8_t* p) {
    std::uint32_t v;
    std::memcpy(&v, p, sizeof v);
    v = __builtin_bswap32(v);
    return kWidth == 4 ? v : v >> 8;
}

}  // namespace

LegacyDecoder::LegacyDecoder(LegacyOptions options) : options_(options) {
    validate(options_);
}

void LegacyDecoder::feed(std::span<const std::uint8_t> data, RecordSink& sink) {
    const std::uint64_t text_at = stats_.bytes_in;
    stats_.bytes_in += data.size();
    if (options_.encoding == LegacyEncoding::kHex) {
        feed_hex(data, sink);
        note_last_digits(data, text_at);
    } else {
        feed_units(data.data(), data.size(), sink);
    }
    flush(sink);
}

// Hex text becomes a stream of digits (nibbles), decoded in digits: a record may start at any
// digit, so a lost character (half a byte) costs the records around it, not the rest of the
// stream. White space carries no data; any other character is discarded, counted as one.
void LegacyDecoder::feed_hex(std::span<const std::uint8_t> text, RecordSink& sink) {
    constexpr std::size_t kSlice = 64 * 1024;
    scratch_.resize(kSlice);
    std::size_t offset = 0;
    while (offset < text.size()) {
        const std::size_t end = std::min(text.size(), offset + kSlice);
        std::uint8_t* out = scratch_.data();
        for (std::size_t i = offset; i < end; ++i) {
            const std::uint8_t v = kHexTable[text[i]];
            if (v < 16) [[likely]] {
                *out++ = v;
            } else if (v == kHexInvalid) {
                ++stats_.bytes_discarded;  // the digits around it may still make records
            }
        }
        feed_units(scratch_.data(), static_cast<std::size_t>(out - scratch_.data()), sink);
        offset = end;
    }
}

// Keeps where the last kCarrySize digits were: scanning back from the text's end, those in it,
// then (if it holds fewer) the newest of those noted before.
void LegacyDecoder::note_last_digits(std::span<const std::uint8_t> text, std::uint64_t text_at) {
    std::array<std::uint64_t, kCarrySize> newest{};
    std::size_t n = 0;
    for (std::size_t i = text.size(); i > 0 && n < kCarrySize; --i) {
        if (kHexTable[text[i - 1]] < 16) newest[n++] = text_at + i - 1;  // newest first
    }
    const std::size_t keep_old = std::min(digits_known_, kCarrySize - n);
    std::array<std::uint64_t, kCarrySize> merged{};
    for (std::size_t k = 0; k < keep_old; ++k) merged[k] = digit_at_[digits_known_ - keep_old + k];
    for (std::size_t k = 0; k < n; ++k) merged[keep_old + k] = newest[n - 1 - k];
    digit_at_ = merged;
    digits_known_ = keep_old + n;
}

std::size_t LegacyDecoder::pending_bytes() const {
    if (carry_len_ == 0) return 0;
    if (options_.encoding != LegacyEncoding::kHex) return carry_len_;
    // The carry is the last carry_len_ digits (fewer than kCarrySize, all noted): from the
    // first of them to the end of what was fed.
    return static_cast<std::size_t>(stats_.bytes_in - digit_at_[digits_known_ - carry_len_]);
}

void LegacyDecoder::feed_units(const std::uint8_t* data, std::size_t size, RecordSink& sink) {
    std::size_t start = 0;
    if (carry_len_ > 0) {
        // Finish what the previous chunk left undecided, using the first bytes of this one.
        const std::size_t take = std::min(size, kCarrySize - carry_len_);
        std::memcpy(carry_.data() + carry_len_, data, take);
        const std::size_t total = carry_len_ + take;
        const std::size_t pos = decode(carry_.data(), total, carry_len_, false, sink);
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
    const std::size_t pos = start + decode(data + start, size - start, size - start, false, sink);
    carry_len_ = size - pos;
    assert(carry_len_ < kCarrySize);
    std::memcpy(carry_.data(), data + pos, carry_len_);
}

std::size_t LegacyDecoder::decode(const std::uint8_t* data, std::size_t size, std::size_t stop_at,
                                  bool at_end, RecordSink& sink) {
    // The address width as a constant where it is one of the two every target uses: the
    // compiler then reads an address as one load, not byte by byte.
    const bool hex = options_.encoding == LegacyEncoding::kHex;
    switch (options_.addr_bytes) {
        case 4:
            return hex ? decode_run<true, 4>(data, size, stop_at, at_end, sink)
                       : decode_run<false, 4>(data, size, stop_at, at_end, sink);
        case 3:
            return hex ? decode_run<true, 3>(data, size, stop_at, at_end, sink)
                       : decode_run<false, 3>(data, size, stop_at, at_end, sink);
        default:
            return hex ? decode_run<true, 0>(data, size, stop_at, at_end, sink)
                       : decode_run<false, 0>(data, size, stop_at, at_end, sink);
    }
}

// Decodes records starting before stop_at, in units: bytes, or hex digits (two per byte).
// Returns where it stopped: at or past stop_at, or earlier where a record cannot be decided
// without more units (never when at_end). Resynchronising steps one unit at a time.
template <bool kHex, int kWidth>
std::size_t LegacyDecoder::decode_run(const std::uint8_t* data, std::size_t size,
                                      std::size_t stop_at, bool at_end, RecordSink& sink) {
    constexpr std::size_t kUnits = kHex ? 2 : 1;  // units per byte
    const auto byte_at = [data](std::size_t i) -> std::uint8_t {
        if constexpr (kHex) {
            return static_cast<std::uint8_t>((data[i] << 4) | data[i + 1]);
        } else {
            return data[i];
        }
    };
    const auto read_address = [&](std::size_t i, int width) {
        std::uint32_t v = 0;
        for (int k = 0; k < width; ++k) v = (v << 8) | byte_at(i + kUnits * k);
        return v;
    };
    const int width = kWidth ? kWidth : options_.addr_bytes;  // kWidth 0: known at run time
    const std::size_t arc_len = kUnits * legacy_record_size(kLegacyArcTag, width);
    const std::size_t pc_len = kUnits * legacy_record_size(kLegacyPcTag, width);
    const bool check_range = options_.code_range.has_value();
    const AddressRange range = options_.code_range.value_or(AddressRange{});

    std::size_t pos = 0;
    while (pos < stop_at) {
        if constexpr (!kHex && kWidth != 0) {
            // The common case without a branch on the record's kind (arcs and samples
            // interleave unpredictably): room for an arc and the byte after it, so both
            // addresses can be loaded whatever the tag says. Anything else takes the general
            // path below, which decides the same way.
            if (pos + arc_len + 1 <= size) [[likely]] {
                // Masks, not conditionals: a compiler may turn `arc ? x : y` back into the
                // branch this path exists to avoid (GCC -O3 did).
                const std::uint8_t tag = data[pos];
                const bool arc = tag == kLegacyArcTag;
                const std::uint32_t arc_mask = 0u - static_cast<std::uint32_t>(arc);
                const std::uint32_t a = load_address<kWidth>(data + pos + 1);
                const std::uint32_t b = load_address<kWidth>(data + pos + 1 + kWidth);
                const std::size_t next =
                    pos + pc_len + ((arc_len - pc_len) & (std::size_t{0} - std::size_t{arc}));
                static_assert(static_cast<int>(RecordKind::kPcSample) ==
                              static_cast<int>(RecordKind::kArc) + 1);
                const auto kind = static_cast<RecordKind>(static_cast<int>(RecordKind::kPcSample) -
                                                          static_cast<int>(arc));
                const Record record{kind, 1, a & arc_mask, (b & arc_mask) | (a & ~arc_mask)};
                // Bitwise on bools computed first: && would branch on each.
                const bool tag_next = is_tag(data[next]);
                bool plausible = (arc | (tag == kLegacyPcTag)) & tag_next;
                if (check_range) {
                    const bool self_in = range.contains(record.self_pc);
                    const bool from_in = range.contains(record.from_pc);
                    plausible = plausible & self_in & (from_in | !arc);
                }
                if (plausible) [[likely]] {
                    emit_unbranched(record, arc, sink);
                    pos = next;
                    continue;
                }
            }
        }
        if (pos + kUnits > size) {
            if (!at_end) break;  // half a byte: wait for the other digit
            discard(1);          // a lone digit at the very end
            ++pos;
            continue;
        }
        const std::uint8_t tag = byte_at(pos);
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
        // The record and the first byte after it (whether another record starts there).
        if (next + kUnits > size && !at_end) break;  // wait for more
        if (next > size) {
            discard(1);  // the stream ended inside this record
            ++pos;
            continue;
        }
        // At the end, less than a whole byte after the record is no record: the end.
        bool plausible = next + kUnits > size || is_tag(byte_at(next));
        Record record;
        if (tag == kLegacyArcTag) {
            record = Record::arc(read_address(pos + kUnits, width),
                                 read_address(pos + kUnits * (1 + width), width));
            if (check_range) {
                plausible =
                    plausible && range.contains(record.from_pc) && range.contains(record.self_pc);
            }
        } else {
            record = Record::pc_sample(read_address(pos + kUnits, width));
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
    if (carry_len_ > 0) {
        const std::size_t pos = decode(carry_.data(), carry_len_, carry_len_, true, sink);
        assert(pos == carry_len_);
        (void)pos;
        carry_len_ = 0;
    }
    flush(sink);
}

void LegacyDecoder::discard(std::uint64_t units) {
    stats_.bytes_discarded += units;  // a unit is one wire byte or one text character
    if (in_sync_) {
        ++stats_.resyncs;
        in_sync_ = false;
    }
}

inline void LegacyDecoder::emit(const Record& record, RecordSink& sink) {
    emit_unbranched(record, record.kind == RecordKind::kArc, sink);
}

inline void LegacyDecoder::emit_unbranched(const Record& record, bool arc, RecordSink& sink) {
    in_sync_ = true;
    stats_.arcs += arc;
    stats_.pc_samples += !arc;
    batch_[batch_len_++] = record;
    if (batch_len_ == kBatchSize) flush(sink);
}

void LegacyDecoder::flush(RecordSink& sink) {
    if (batch_len_ == 0) return;
    sink.on_records(std::span<const Record>(batch_.data(), batch_len_));
    batch_len_ = 0;
}

}  // namespace rackprof::protocol
