#include "protocol/tpiu_deframer.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>

namespace rackprof::protocol {

namespace {

constexpr std::uint32_t kFullSync = 0xFFFFFF7F;
constexpr std::uint8_t kSyncFill = 0xFF;
constexpr std::uint8_t kSyncEnd = 0x7F;
constexpr unsigned kFrameSize = 16;
constexpr unsigned kAuxByte = 15;

// Eight bytes, little-endian, whatever the host's byte order.
inline std::uint64_t load_le64(const std::uint8_t* p) {
    std::uint64_t v;
    std::memcpy(&v, p, sizeof v);
    if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
    return v;
}

inline void store_le64(std::uint8_t* p, std::uint64_t v) {
    if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
    std::memcpy(p, &v, sizeof v);
}

// In a little-endian 64-bit word of frame bytes, the low bit of each even byte.
constexpr std::uint64_t kEvenLowBits = 0x0001000100010001;
constexpr std::uint64_t kEvenBytes = 0x00FF00FF00FF00FF;

// Whether any even byte of the word is 0xFF: the even bytes as 16-bit lanes, where adding one
// carries into bit 8 only from 0xFF.
constexpr bool even_byte_ff(std::uint64_t word) {
    return (((word & kEvenBytes) + kEvenLowBits) & (kEvenLowBits << 8)) != 0;
}

// Four aux bits moved to bit 0 of the even bytes of a word, by table (one load instead of
// three shifts and four masks, twice a frame).
constexpr std::uint64_t spread_aux_bits(unsigned bits) {
    return (bits & 1ULL) | (bits & 2ULL) << 15 | (bits & 4ULL) << 30 | (bits & 8ULL) << 45;
}
constexpr std::array<std::uint64_t, 16> kSpreadAux = [] {
    std::array<std::uint64_t, 16> t{};
    for (unsigned b = 0; b < 16; ++b) t[b] = spread_aux_bits(b);
    return t;
}();
inline std::uint64_t spread_aux(unsigned bits) {
    return kSpreadAux[bits & 0xF];
}

// Whether the frame at `f` could be one: every ID byte names an ID that may be used (0x70-0x7F
// are reserved), and an ID change in the last slot does not claim the odd byte after it (there
// is none: byte 15 is the aux byte). A half-sync (FF 7F on a pair boundary) may stand in it.
bool valid_frame(const std::uint8_t* f, std::uint8_t ours, bool& names_ours) {
    for (unsigned i = 0; i < kAuxByte; i += 2) {
        if (f[i] == kSyncFill && i + 1 < kAuxByte && f[i + 1] == kSyncEnd) continue;
        if ((f[i] & 1) == 0) continue;
        if ((f[i] >> 1) >= 0x70) return false;
        if (i + 1 == kAuxByte && (f[kAuxByte] & 0x80) != 0) return false;
        names_ours |= f[i] == ours;
    }
    return true;
}

}  // namespace

// Whether the 16 bytes at `p` are a whole frame with no sync in or around it: no even byte is
// 0xFF (every full sync or half-sync needs one) and no full sync ends in its first byte.
inline bool TpiuDeframer::plain_frame(const std::uint8_t* p) const {
    if ((monitor_ & 0xFFFFFF) == 0xFFFFFF) return false;
    return !even_byte_ff(load_le64(p)) && !even_byte_ff(load_le64(p + 8));
}

void TpiuDeframer::feed(std::span<const std::uint8_t> data, std::vector<std::uint8_t>& out) {
    // Never more bytes out than in, plus a frame held from the last chunk, plus the slack of
    // the 16-byte stores: written through a pointer, trimmed at the end.
    const std::size_t at = out.size();
    out.resize(at + data.size() + kOutputSlack);
    out.resize(at + feed(data, out.data() + at));
}

std::size_t TpiuDeframer::feed(std::span<const std::uint8_t> data, std::uint8_t* out) {
    static_assert(kOutputSlack >= kHuntBytes + 2 * kFrameSize);
    stats_.bytes_in += data.size();
    out_ = out;
    run(data.data(), data.size());
    const auto written = static_cast<std::size_t>(out_ - out);
    out_ = nullptr;
    return written;
}

void TpiuDeframer::run(const std::uint8_t* p, std::size_t n) {
    for (std::size_t i = 0; i < n;) {
        if (aligned_ && count_ == 0 && n - i >= kFrameSize) {
            i += our_frames(p + i, n - i);
            if (n - i >= kFrameSize && plain_frame(p + i)) {
                monitor_ = last_four(p + i);
                decode_frame(p + i);
                i += kFrameSize;
                continue;
            }
            if (i == n) break;
        }
        const std::uint8_t byte = p[i++];
        monitor_ = monitor_ << 8 | byte;
        if (!aligned_) {
            unaligned_byte(byte);
            if (hunting_ && !aligned_) hunt(byte);
            continue;
        }
        if (monitor_ == kFullSync) [[unlikely]] {
            full_sync();
            continue;
        }
        frame_[count_++] = byte;
        if (count_ % 2 != 0) continue;
        if (frame_[count_ - 2] == kSyncFill && byte == kSyncEnd) {
            // A half-sync on a pair boundary: the formatter had nothing to send.
            count_ -= 2;
            stats_.bytes_sync += 2;
            ++stats_.half_syncs;
        } else if (count_ == kFrameSize) {
            decode_frame(frame_.data());
        }
    }
}

// Unaligned and no sync in the last kHuntBytes: try the 16 alignments over them, once a
// window's worth has come (so garbage costs 16 trial decodes per window, not per byte).
void TpiuDeframer::hunt(std::uint8_t byte) {
    window_.push_back(byte);
    if (window_.size() < kHuntBytes) return;
    if (const auto offset = lock_offset()) return lock_on(*offset);
    window_.erase(window_.begin(), window_.end() - kFrameSize + 1);  // already counted discarded
}

// How many stream bytes of the alignment at `offset` fail the check; none when a frame is
// invalid or our stream's ID never appears.
std::optional<std::uint64_t> TpiuDeframer::candidate_errors(std::size_t offset) const {
    const auto ours = static_cast<std::uint8_t>(stream_id_ << 1 | 1);
    bool names_ours = false;
    for (std::size_t at = offset; at + kFrameSize <= window_.size(); at += kFrameSize) {
        if (!valid_frame(window_.data() + at, ours, names_ours)) return std::nullopt;
    }
    if (!names_ours) return std::nullopt;
    if (!check_) return 0;
    TpiuDeframer trial(stream_id_);
    trial.hunting_ = false;
    trial.aligned_ = true;
    std::vector<std::uint8_t> stream;
    trial.feed(std::span<const std::uint8_t>(window_).subspan(offset), stream);
    const std::uint64_t errors = check_(stream);
    // A stream that mostly fails to decode is not ours, however it compares with the others.
    if (errors * 16 > stream.size()) return std::nullopt;
    return errors;
}

// The one alignment clearly better than every other; none when two are equally good (a window
// of padding or of one repeated byte proves nothing).
std::optional<std::size_t> TpiuDeframer::lock_offset() const {
    std::optional<std::size_t> best;
    std::optional<std::uint64_t> best_errors, runner_up;
    for (std::size_t offset = 0; offset < kFrameSize; ++offset) {
        const auto errors = candidate_errors(offset);
        if (!errors) continue;
        if (!best_errors || *errors < *best_errors) {
            runner_up = best_errors;
            best_errors = errors;
            best = offset;
        } else if (!runner_up || *errors < *runner_up) {
            runner_up = errors;
        }
    }
    if (!best || (runner_up && *runner_up <= *best_errors)) return std::nullopt;
    return best;
}

// Aligned at `offset` into the window: its bytes from there are decoded again as frames (they
// were counted discarded as they came: moved from that count to where they now belong).
void TpiuDeframer::lock_on(std::size_t offset) {
    std::vector<std::uint8_t> replay(window_.begin() + static_cast<std::ptrdiff_t>(offset),
                                     window_.end());
    window_.clear();
    stats_.bytes_discarded -= replay.size() - ff_run_;  // the held FF bytes were not counted
    ff_run_ = 0;
    aligned_ = true;
    count_ = 0;
    monitor_ = 0;
    current_ = kUnknownId;
    ++stats_.locks;
    run(replay.data(), replay.size());
}

inline std::uint32_t TpiuDeframer::last_four(const std::uint8_t* frame) {
    return std::uint32_t{frame[12]} << 24 | std::uint32_t{frame[13]} << 16 |
           std::uint32_t{frame[14]} << 8 | frame[15];
}

// The common run: whole plain frames of our stream with no ID change (or only our own ID
// repeated in the first byte), 16 bytes a step with word operations. Returns the bytes consumed
// (whole frames); stops at anything else.
std::size_t TpiuDeframer::our_frames(const std::uint8_t* p, std::size_t n) {
    if (current_ != stream_id_) return 0;
    const auto ours = static_cast<std::uint8_t>(stream_id_ << 1 | 1);
    std::uint64_t repeats = 0;  // frames that repeat our ID in their first byte
    std::size_t i = 0;
    for (; n - i >= kFrameSize; i += kFrameSize) {
        const std::uint8_t* f = p + i;
        if ((monitor_ & 0xFFFFFF) == 0xFFFFFF) break;
        std::uint64_t lo = load_le64(f);
        std::uint64_t hi = load_le64(f + 8);
        if (even_byte_ff(lo) || even_byte_ff(hi)) break;
        const unsigned aux = f[kAuxByte];
        if (((lo | hi) & kEvenLowBits) == 0) {
            lo |= spread_aux(aux & 0xF);
            hi |= spread_aux(aux >> 4);
            store_le64(out_, lo);
            store_le64(out_ + 8, hi);  // its last byte, the aux byte, is overwritten or trimmed
            out_ += kAuxByte;
        } else if ((lo & 0xFF) == ours && (((lo & ~0xFFULL) | hi) & kEvenLowBits) == 0) {
            // Our ID repeated in the first byte (formatters do so every few frames), no other
            // ID change: the 14 bytes after it are ours, whichever pair its aux bit gives the
            // odd byte to. The aux bits apply to the even data bytes as above.
            lo |= spread_aux(aux & 0xF);
            hi |= spread_aux(aux >> 4);
            store_le64(out_, lo >> 8);  // its last byte (zero) is overwritten next
            store_le64(out_ + 7, hi);
            out_ += kAuxByte - 1;
            ++repeats;
        } else {
            break;
        }
        monitor_ = last_four(f);
    }
    const std::size_t frames = i / kFrameSize;
    stats_.frames += frames;
    stats_.bytes_format += frames + repeats;  // the aux bytes and the repeated IDs
    stats_.bytes_out += frames * kAuxByte - repeats;
    return i;
}

void TpiuDeframer::finish() {
    window_.clear();
    if (aligned_) stats_.bytes_discarded += count_;
    stats_.bytes_discarded += ff_run_;
    aligned_ = false;
    ff_run_ = 0;
    count_ = 0;
    monitor_ = 0;
    current_ = kUnknownId;
}

// Everything but a possible start of a full sync is discarded at once.
void TpiuDeframer::unaligned_byte(std::uint8_t byte) {
    if (byte == kSyncEnd && ff_run_ == 3) {
        window_.clear();
        ff_run_ = 0;
        aligned_ = true;
        count_ = 0;
        current_ = kUnknownId;
        stats_.bytes_sync += 4;
        ++stats_.full_syncs;
    } else if (byte == kSyncFill) {
        if (ff_run_ == 3) {
            ++stats_.bytes_discarded;
        } else {
            ++ff_run_;
        }
    } else {
        stats_.bytes_discarded += ff_run_ + 1;
        ff_run_ = 0;
    }
}

// A full sync while aligned: it belongs between frames, so anything before it in the frame
// buffer is a cut-off frame and the stream was misaligned.
void TpiuDeframer::full_sync() {
    ++stats_.full_syncs;
    const unsigned sync_in_frame = std::min(count_, 3U);  // its FF bytes already buffered
    stats_.bytes_sync += sync_in_frame + 1;
    const unsigned cut = count_ - sync_in_frame;
    if (cut > 0) {
        stats_.bytes_discarded += cut;
        ++stats_.frames_bad;
    }
    if (cut > 0 || count_ < 3) {
        // count_ < 3: the sync began inside a frame already decoded, which was misaligned.
        ++stats_.resyncs;
        current_ = kUnknownId;
    }
    count_ = 0;
}

void TpiuDeframer::lose_alignment(const std::uint8_t* frame) {
    // The frame's trailing FF bytes may be the start of the full sync that realigns.
    unsigned trailing = 0;
    while (trailing < 3 && frame[kFrameSize - 1 - trailing] == kSyncFill) ++trailing;
    stats_.bytes_discarded += kFrameSize - trailing;
    ++stats_.frames_bad;
    ++stats_.resyncs;
    ff_run_ = trailing;
    aligned_ = false;
    count_ = 0;
    current_ = kUnknownId;
}

// Whether every ID byte of the frame (an even byte with bit 0 set) names our stream.
inline bool TpiuDeframer::repeats_our_id(const std::uint8_t* frame) const {
    const auto ours = static_cast<std::uint8_t>(stream_id_ << 1 | 1);
    for (unsigned i = 0; i < kAuxByte; i += 2) {
        if ((frame[i] & 1) != 0 && frame[i] != ours) return false;
    }
    return true;
}

void TpiuDeframer::decode_frame(const std::uint8_t* frame) {
    for (unsigned i = 0; i < kAuxByte; i += 2) {
        if (frame[i] == kSyncFill) return lose_alignment(frame);  // ID 0x7F is reserved
    }
    count_ = 0;
    ++stats_.frames;
    ++stats_.bytes_format;  // the aux byte
    unsigned id_bits = 0;
    for (unsigned i = 0; i < kAuxByte; i += 2) id_bits |= frame[i];
    if ((id_bits & 1) == 0 && current_ == stream_id_) {
        // The common case: 15 data bytes of our stream, no ID change.
        std::uint8_t* o = out_;
        const unsigned aux = frame[kAuxByte];
        for (unsigned i = 0; i < kAuxByte; i += 2) {
            o[i] = static_cast<std::uint8_t>(frame[i] | ((aux >> (i / 2)) & 1));
            if (i + 1 < kAuxByte) o[i + 1] = frame[i + 1];
        }
        out_ += kAuxByte;
        stats_.bytes_out += kAuxByte;
        return;
    }
    if (current_ == stream_id_ && repeats_our_id(frame)) {
        // Also common: formatters repeat the ID every few frames. When every ID byte names
        // our stream, the "next odd byte is still the old ID's" rule changes nothing: every
        // data byte is ours, in order.
        const unsigned aux = frame[kAuxByte];
        std::uint8_t* o = out_;
        for (unsigned i = 0; i < kAuxByte; i += 2) {
            const std::uint8_t even = frame[i];
            if ((even & 1) == 0) *o++ = static_cast<std::uint8_t>(even | ((aux >> (i / 2)) & 1));
            if (i + 1 < kAuxByte) *o++ = frame[i + 1];
        }
        const auto data = static_cast<unsigned>(o - out_);
        stats_.bytes_format += kAuxByte - data;  // the ID bytes
        stats_.bytes_out += data;
        out_ = o;
        return;
    }
    const auto deliver = [&](std::uint8_t byte) {
        if (current_ == stream_id_) {
            *out_++ = byte;
            ++stats_.bytes_out;
        } else if (current_ == 0) {
            ++stats_.bytes_padding;
        } else if (current_ == kUnknownId) {
            ++stats_.bytes_discarded;
        } else {
            ++stats_.bytes_skipped;
        }
    };
    unsigned aux = frame[kAuxByte];
    for (unsigned i = 0; i < kAuxByte; i += 2, aux >>= 1) {
        const std::uint8_t even = frame[i];
        int after_odd = kUnknownId - 1;  // none
        if ((even & 1) != 0) {
            ++stats_.bytes_format;
            if ((aux & 1) != 0 && i + 1 < kAuxByte) {
                after_odd = even >> 1;  // the odd byte is still the old ID's
            } else {
                current_ = even >> 1;
            }
        } else {
            deliver(static_cast<std::uint8_t>(even | (aux & 1)));
        }
        if (i + 1 < kAuxByte) deliver(frame[i + 1]);
        if (after_odd != kUnknownId - 1) current_ = after_odd;
    }
}

}  // namespace rackprof::protocol
