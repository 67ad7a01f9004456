#include "protocol/tpiu_deframer.h"

#include <algorithm>
#include <cstring>

namespace rackprof::protocol {

namespace {

constexpr std::uint32_t kFullSync = 0xFFFFFF7F;
constexpr std::uint8_t kSyncFill = 0xFF;
constexpr std::uint8_t kSyncEnd = 0x7F;
constexpr unsigned kFrameSize = 16;
constexpr unsigned kAuxByte = 15;

}  // namespace

// Whether the 16 bytes at `p` are a whole frame with no sync in or around it: no even byte is
// 0xFF (every full sync or half-sync needs one) and no full sync ends in its first byte.
inline bool TpiuDeframer::plain_frame(const std::uint8_t* p) const {
    if ((monitor_ & 0xFFFFFF) == 0xFFFFFF) return false;
    for (unsigned k = 0; k < kFrameSize; k += 2) {
        if (p[k] == kSyncFill) return false;
    }
    return true;
}

void TpiuDeframer::feed(std::span<const std::uint8_t> data, std::vector<std::uint8_t>& out) {
    stats_.bytes_in += data.size();
    const std::uint8_t* p = data.data();
    const std::size_t n = data.size();
    for (std::size_t i = 0; i < n;) {
        if (aligned_ && count_ == 0 && n - i >= kFrameSize && plain_frame(p + i)) {
            std::memcpy(frame_.data(), p + i, kFrameSize);
            monitor_ = std::uint32_t{p[i + 12]} << 24 | std::uint32_t{p[i + 13]} << 16 |
                       std::uint32_t{p[i + 14]} << 8 | p[i + 15];
            i += kFrameSize;
            decode_frame(out);
            continue;
        }
        const std::uint8_t byte = p[i++];
        monitor_ = monitor_ << 8 | byte;
        if (!aligned_) {
            unaligned_byte(byte);
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
            decode_frame(out);
        }
    }
}

void TpiuDeframer::finish() {
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

void TpiuDeframer::lose_alignment() {
    // The frame's trailing FF bytes may be the start of the full sync that realigns.
    unsigned trailing = 0;
    while (trailing < 3 && frame_[kFrameSize - 1 - trailing] == kSyncFill) ++trailing;
    stats_.bytes_discarded += kFrameSize - trailing;
    ++stats_.frames_bad;
    ++stats_.resyncs;
    ff_run_ = trailing;
    aligned_ = false;
    count_ = 0;
    current_ = kUnknownId;
}

void TpiuDeframer::decode_frame(std::vector<std::uint8_t>& out) {
    for (unsigned i = 0; i < kAuxByte; i += 2) {
        if (frame_[i] == kSyncFill) return lose_alignment();  // ID 0x7F is reserved
    }
    count_ = 0;
    ++stats_.frames;
    ++stats_.bytes_format;  // the aux byte
    unsigned id_bits = 0;
    for (unsigned i = 0; i < kAuxByte; i += 2) id_bits |= frame_[i];
    if ((id_bits & 1) == 0 && current_ == stream_id_) {
        // The common case: 15 data bytes of our stream, no ID change.
        const std::size_t at = out.size();
        out.resize(at + kAuxByte);
        std::uint8_t* o = out.data() + at;
        const unsigned aux = frame_[kAuxByte];
        for (unsigned i = 0; i < kAuxByte; i += 2) {
            o[i] = static_cast<std::uint8_t>(frame_[i] | ((aux >> (i / 2)) & 1));
            if (i + 1 < kAuxByte) o[i + 1] = frame_[i + 1];
        }
        stats_.bytes_out += kAuxByte;
        return;
    }
    const auto deliver = [&](std::uint8_t byte) {
        if (current_ == stream_id_) {
            out.push_back(byte);
            ++stats_.bytes_out;
        } else if (current_ == 0) {
            ++stats_.bytes_padding;
        } else if (current_ == kUnknownId) {
            ++stats_.bytes_discarded;
        } else {
            ++stats_.bytes_skipped;
        }
    };
    unsigned aux = frame_[kAuxByte];
    for (unsigned i = 0; i < kAuxByte; i += 2, aux >>= 1) {
        const std::uint8_t even = frame_[i];
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
        if (i + 1 < kAuxByte) deliver(frame_[i + 1]);
        if (after_odd != kUnknownId - 1) current_ = after_odd;
    }
}

}  // namespace rackprof::protocol
