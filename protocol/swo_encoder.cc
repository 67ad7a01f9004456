#include "protocol/swo_encoder.h"

#include <stdexcept>

namespace rackprof::protocol {

namespace {

std::uint8_t size_bits(std::uint8_t size) {
    if (size != 1 && size != 2 && size != 4) throw std::invalid_argument("ITM payload size");
    return size == 4 ? 3 : size;
}

}  // namespace

void ItmEncoder::packet(const ItmPacket& p) {
    const auto value32 = static_cast<std::uint32_t>(p.value);
    switch (p.kind) {
        case ItmPacketKind::kSync:
            return sync();
        case ItmPacketKind::kOverflow:
            return overflow();
        case ItmPacketKind::kSoftware:
            return software(p.channel, value32, p.size);
        case ItmPacketKind::kEventCounter:
            return hardware(0, p.flags, 1);
        case ItmPacketKind::kException:
            return exception(p.channel, p.flags);
        case ItmPacketKind::kPcSample:
            return pc_sample(value32);
        case ItmPacketKind::kPcSleep:
            return pc_sleep();
        case ItmPacketKind::kDataTracePc:
            return hardware(8 + 2 * (p.channel & 3U), value32, 4);
        case ItmPacketKind::kDataTraceAddress:
            return hardware(9 + 2 * (p.channel & 3U), value32 & 0xFFFF, 2);
        case ItmPacketKind::kDataTraceValue:
            return hardware(16 + 2 * (p.channel & 3U) + (p.flags & 1U), value32, p.size);
        case ItmPacketKind::kLocalTimestamp:
            return local_timestamp(value32, p.flags);
        case ItmPacketKind::kGlobalTimestamp1:
            return global_timestamp1(value32, p.flags);
        case ItmPacketKind::kGlobalTimestamp2:
            return global_timestamp2(p.value);
    }
}

void ItmEncoder::sync() {
    out_.insert(out_.end(), {0x00, 0x00, 0x00, 0x00, 0x00, 0x80});
    page_ = 0;
}

void ItmEncoder::software(std::uint16_t port, std::uint32_t value, std::uint8_t size) {
    if (port > 255) throw std::invalid_argument("ITM stimulus port above 255");
    const auto page = static_cast<std::uint16_t>(port / 32);
    if (page != page_) {
        out_.push_back(static_cast<std::uint8_t>(page << 4 | 0x08));  // extension: 0ppp1000
        page_ = page;
    }
    header_and_payload(static_cast<std::uint8_t>((port % 32) << 3), value, size);
}

void ItmEncoder::exception(std::uint16_t number, std::uint8_t fn) {
    hardware(1, (number & 0x1FFU) | (fn & 3U) << 12, 2);
}

void ItmEncoder::local_timestamp(std::uint32_t cycles, std::uint8_t tc) {
    if (tc == 0 && cycles >= 1 && cycles <= 6) {
        out_.push_back(static_cast<std::uint8_t>(cycles << 4));  // short form 0TTT0000
        return;
    }
    continued(static_cast<std::uint8_t>(0xC0 | (tc & 3U) << 4), cycles & 0xFFFFFFF, 1);
}

void ItmEncoder::global_timestamp1(std::uint32_t low26, std::uint8_t flags) {
    low26 &= 0x3FFFFFF;
    if (flags == 0) return continued(0x94, low26, 1);
    // ClkCh and Wrap only fit in the fourth payload byte.
    out_.push_back(0x94);
    for (int i = 0; i < 3; ++i)
        out_.push_back(static_cast<std::uint8_t>(0x80 | (low26 >> (7 * i))));
    out_.push_back(static_cast<std::uint8_t>((low26 >> 21 & 0x1F) | (flags & 3U) << 5));
}

void ItmEncoder::global_timestamp2(std::uint64_t high) {
    // Bits 47:26 fit in four bytes; a 64-bit timestamp needs six.
    continued(0xB4, high, high < (1U << 22) ? 4 : 6);
}

void ItmEncoder::header_and_payload(std::uint8_t header, std::uint32_t value, std::uint8_t size) {
    out_.push_back(static_cast<std::uint8_t>(header | size_bits(size)));
    for (int i = 0; i < size; ++i) out_.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
}

void ItmEncoder::hardware(unsigned disc, std::uint32_t value, std::uint8_t size) {
    header_and_payload(static_cast<std::uint8_t>(disc << 3 | 4), value, size);
}

// 7-bit groups, least significant first, bit 7 set on all but the last.
void ItmEncoder::continued(std::uint8_t header, std::uint64_t value, unsigned min_bytes) {
    out_.push_back(header);
    unsigned written = 0;
    bool more = true;
    while (more) {
        const auto group = static_cast<std::uint8_t>(value & 0x7F);
        value >>= 7;
        ++written;
        more = value != 0 || written < min_bytes;
        out_.push_back(more ? static_cast<std::uint8_t>(group | 0x80) : group);
    }
}

void TpiuFramer::write(std::uint8_t id, std::span<const std::uint8_t> data) {
    for (std::uint8_t byte : data) put(id, byte);
}

void TpiuFramer::full_sync() {
    flush();
    out_.insert(out_.end(), {0xFF, 0xFF, 0xFF, 0x7F});
}

void TpiuFramer::half_sync() {
    if (pos_ == 0) {
        out_.insert(out_.end(), {0xFF, 0x7F});
    } else {
        half_syncs_.push_back(static_cast<std::uint8_t>((pos_ + 1) & ~1U));
    }
}

void TpiuFramer::flush() {
    while (pos_ != 0) {
        if (current_ != 0) {
            put_id(0);  // in byte 14 it ends the frame: no padding frame after it
        } else {
            put_data(0);
        }
    }
}

void TpiuFramer::put(std::uint8_t id, std::uint8_t byte) {
    if (id != current_ || frames_since_id_ >= kIdRepeatFrames) put_id(id);
    put_data(byte);
}

void TpiuFramer::put_id(std::uint8_t id) {
    const auto id_byte = static_cast<std::uint8_t>(id << 1 | 1);
    current_ = id;
    frames_since_id_ = 0;
    if (pos_ % 2 == 0) {
        put_slot(id_byte, false);  // aux 0: the next byte is the new ID's
        return;
    }
    // Mid-pair: the ID change takes the even byte, whose aux bit says the old ID's data byte
    // moves to the odd byte after it.
    const unsigned even = pos_ - 1;
    const auto bit = static_cast<std::uint8_t>(1U << (even / 2));
    const auto old = static_cast<std::uint8_t>(frame_[even] | ((aux_ & bit) ? 1 : 0));
    frame_[even] = id_byte;
    aux_ |= bit;
    put_slot(old, false);
}

void TpiuFramer::put_data(std::uint8_t byte) {
    if (pos_ % 2 == 0) {
        put_slot(static_cast<std::uint8_t>(byte & 0xFE), (byte & 1) != 0);  // bit 0 in the aux byte
    } else {
        put_slot(byte, false);
    }
}

void TpiuFramer::put_slot(std::uint8_t stored, bool aux) {
    frame_[pos_] = stored;
    if (aux) aux_ |= static_cast<std::uint8_t>(1U << (pos_ / 2));
    if (++pos_ == 15) end_frame();
}

void TpiuFramer::end_frame() {
    frame_[15] = aux_;
    std::size_t next_half_sync = 0;
    for (unsigned i = 0; i < 16; ++i) {
        while (next_half_sync < half_syncs_.size() && half_syncs_[next_half_sync] == i) {
            out_.insert(out_.end(), {0xFF, 0x7F});
            ++next_half_sync;
        }
        out_.push_back(frame_[i]);
    }
    half_syncs_.clear();
    pos_ = 0;
    aux_ = 0;
    ++frames_since_id_;
}

}  // namespace rackprof::protocol
