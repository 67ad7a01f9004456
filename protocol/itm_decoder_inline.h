// The body of ItmDecoder's decoding loop, as templates over the packet sink: included by
// itm_decoder.cc (for any ItmPacketSink) and by decoders that want their packet handling
// inlined into the loop (SwoDecoder), so each packet kind is handled where it is decoded,
// with no call and no second dispatch on the kind.
#pragma once

#include <array>
#include <bit>
#include <type_traits>

#include "protocol/itm_decoder.h"

namespace rackprof::protocol {

// source_packet, continued_packet, end_source, end_continued, emit and decoded are forced
// inline: in the loop each call site knows the packet's kind, so the sink's dispatch on it
// folds away.

namespace itm_detail {

// What a header byte starts, finely enough that the fast path's one jump on it lands where
// the packet is handled (source packets split by what their payload is).
enum class HeaderType : std::uint8_t {
    kInvalid,
    kZero,
    kOverflow,
    kSoftware1,         // stimulus port write of 1 byte
    kSoftware2,         // 2 bytes
    kSoftware4,         // 4 bytes
    kEventCounter,      // DWT disc 0, 1 byte
    kException,         // DWT disc 1, 2 bytes
    kPcSample,          // DWT disc 2, 4 bytes
    kPcSleep,           // DWT disc 2, 1 byte (reserved unless zero)
    kDataTracePc,       // DWT disc 8..15 even, 4 bytes
    kDataTraceAddress,  // DWT disc 8..15 odd, 2 bytes
    kDataTraceValue,    // DWT disc 16..23, any size
    kLocalShort,
    kLocalLong,
    kGlobal1,
    kGlobal2,
    kExtension,      // one byte: the page is in the header
    kExtensionLong,  // continuation bytes follow
};

struct HeaderInfo {
    HeaderType type = HeaderType::kInvalid;
    std::uint8_t size = 0;  // source packets: payload bytes; continued packets: at most
};

inline constexpr std::uint8_t kSyncEnd = 0x80;
inline constexpr std::uint64_t kSyncZeroBytes = 5;  // 5 * 8 + 7 zero bits of 0x80 = 47
inline constexpr std::size_t kLongestPacket = 7;    // GTS2 with 6 payload bytes

// Which sizes a DWT packet with this discriminator may have (appendix D4.3).
constexpr bool hardware_size_valid(unsigned disc, unsigned size) {
    if (disc == 0) return size == 1;                                   // event counter
    if (disc == 1) return size == 2;                                   // exception trace
    if (disc == 2) return size == 4 || size == 1;                      // PC sample, sleep
    if (disc >= 8 && disc <= 15) return size == (disc % 2 ? 2U : 4U);  // PC / address
    return disc >= 16 && disc <= 23;                                   // data value, any size
}

// The source packet kind of a DWT header with a valid size (disc = header bits 7:3).
constexpr HeaderType hardware_type(unsigned disc, unsigned size) {
    if (disc == 0) return HeaderType::kEventCounter;
    if (disc == 1) return HeaderType::kException;
    if (disc == 2) return size == 4 ? HeaderType::kPcSample : HeaderType::kPcSleep;
    if (disc < 16) return disc % 2 ? HeaderType::kDataTraceAddress : HeaderType::kDataTracePc;
    return HeaderType::kDataTraceValue;
}

constexpr HeaderInfo classify(unsigned h) {
    if (h == 0) return {HeaderType::kZero, 0};
    if (h == 0x70) return {HeaderType::kOverflow, 0};
    if ((h & 3) != 0) {
        const auto size = static_cast<std::uint8_t>((h & 3) == 3 ? 4 : (h & 3));
        if ((h & 4) == 0) {
            const auto type = size == 1
                                  ? HeaderType::kSoftware1
                                  : (size == 2 ? HeaderType::kSoftware2 : HeaderType::kSoftware4);
            return {type, size};
        }
        if (!hardware_size_valid(h >> 3, size)) return {};
        return {hardware_type(h >> 3, size), size};
    }
    if ((h & 0x0F) == 0) {
        if ((h & 0x80) == 0) return {HeaderType::kLocalShort, 0};  // 0TTT0000, TTT 1..6
        if ((h & 0xC0) == 0xC0) return {HeaderType::kLocalLong, 4};
        return {};  // 10xx0000 is reserved
    }
    if ((h & 0x08) != 0) {
        return (h & 0x80) != 0 ? HeaderInfo{HeaderType::kExtensionLong, 4}
                               : HeaderInfo{HeaderType::kExtension, 0};
    }
    if (h == 0x94) return {HeaderType::kGlobal1, 4};
    if (h == 0xB4) return {HeaderType::kGlobal2, 6};
    return {};
}

inline constexpr std::array<HeaderInfo, 256> make_header_table() {
    std::array<HeaderInfo, 256> table{};
    for (unsigned h = 0; h < 256; ++h) table[h] = classify(h);
    return table;
}
inline constexpr auto kHeaders = make_header_table();

// Four bytes, little-endian, whatever the host's byte order.
inline std::uint32_t load_le32(const std::uint8_t* p) {
    return std::uint32_t{p[0]} | std::uint32_t{p[1]} << 8 | std::uint32_t{p[2]} << 16 |
           std::uint32_t{p[3]} << 24;
}
inline constexpr std::array<std::uint32_t, 5> kSizeMask = {0, 0xFF, 0xFFFF, 0, 0xFFFFFFFF};
inline constexpr std::array<std::uint32_t, 5> kSizeMask32 = {0, 0xFF, 0xFFFF, 0xFFFFFF, 0xFFFFFFFF};

// A whole source packet of header type T to the sink; false (and nothing sent) if its payload
// is reserved. `page`: the stimulus port page from the last extension packet.
template <HeaderType T, class Sink>
[[gnu::always_inline]] inline bool source_packet(std::uint8_t header, unsigned size,
                                                 std::uint64_t value, std::uint16_t page,
                                                 Sink& sink) {
    const unsigned a = header >> 3U;
    const auto size8 = static_cast<std::uint8_t>(size);
    const auto comparator = static_cast<std::uint16_t>((a >> 1) & 3);
    if constexpr (T == HeaderType::kSoftware1 || T == HeaderType::kSoftware2 ||
                  T == HeaderType::kSoftware4) {
        const auto port = static_cast<std::uint16_t>(page * 32U + a);
        sink.on_packet(ItmPacket{ItmPacketKind::kSoftware, size8, 0, port, value});
    } else if constexpr (T == HeaderType::kEventCounter) {
        sink.on_packet(
            ItmPacket{ItmPacketKind::kEventCounter, 0, static_cast<std::uint8_t>(value), 0, 0});
    } else if constexpr (T == HeaderType::kException) {
        const auto number = static_cast<std::uint16_t>(value & 0x1FF);
        const auto fn = static_cast<std::uint8_t>((value >> 12) & 3);
        if (fn == 0) return false;  // FN 00 is reserved
        sink.on_packet(ItmPacket{ItmPacketKind::kException, 0, fn, number, 0});
    } else if constexpr (T == HeaderType::kPcSample) {
        sink.on_packet(ItmPacket{ItmPacketKind::kPcSample, 0, 0, 0, value});
    } else if constexpr (T == HeaderType::kPcSleep) {
        if (value != 0) return false;  // the one-byte form only says "asleep"
        sink.on_packet(ItmPacket{ItmPacketKind::kPcSleep});
    } else if constexpr (T == HeaderType::kDataTracePc) {
        sink.on_packet(ItmPacket{ItmPacketKind::kDataTracePc, 0, 0, comparator, value});
    } else if constexpr (T == HeaderType::kDataTraceAddress) {
        sink.on_packet(ItmPacket{ItmPacketKind::kDataTraceAddress, 0, 0, comparator, value});
    } else {
        static_assert(T == HeaderType::kDataTraceValue);
        const auto write = static_cast<std::uint8_t>(a & 1);
        sink.on_packet(ItmPacket{ItmPacketKind::kDataTraceValue, size8, write, comparator, value});
    }
    return true;
}

// The same for a header known only at run time (the byte-by-byte path).
template <class Sink>
inline bool source_packet(std::uint8_t header, unsigned size, std::uint64_t value,
                          std::uint16_t page, Sink& sink) {
    switch (kHeaders[header].type) {
        case HeaderType::kSoftware1:
            return source_packet<HeaderType::kSoftware1>(header, size, value, page, sink);
        case HeaderType::kSoftware2:
            return source_packet<HeaderType::kSoftware2>(header, size, value, page, sink);
        case HeaderType::kSoftware4:
            return source_packet<HeaderType::kSoftware4>(header, size, value, page, sink);
        case HeaderType::kEventCounter:
            return source_packet<HeaderType::kEventCounter>(header, size, value, page, sink);
        case HeaderType::kException:
            return source_packet<HeaderType::kException>(header, size, value, page, sink);
        case HeaderType::kPcSample:
            return source_packet<HeaderType::kPcSample>(header, size, value, page, sink);
        case HeaderType::kPcSleep:
            return source_packet<HeaderType::kPcSleep>(header, size, value, page, sink);
        case HeaderType::kDataTracePc:
            return source_packet<HeaderType::kDataTracePc>(header, size, value, page, sink);
        case HeaderType::kDataTraceAddress:
            return source_packet<HeaderType::kDataTraceAddress>(header, size, value, page, sink);
        case HeaderType::kDataTraceValue:
            return source_packet<HeaderType::kDataTraceValue>(header, size, value, page, sink);
        default:
            return false;  // not a source header: never called so
    }
}

// The 7-bit groups of the four little-endian bytes in `w`, low group first.
constexpr std::uint32_t groups7(std::uint32_t w) {
    return (w & 0x7FU) | (w >> 1 & 0x3F80U) | (w >> 2 & 0x1FC000U) | (w >> 3 & 0xFE00000U);
}

// The payload of a continued packet whose header is followed by at least four bytes: `len`
// bytes (0: more than `max`), their 7-bit groups in `value`, the final byte in `last`. Four
// bytes at once: the first without the continuation bit is the last (every kind may have four).
struct ContinuedPayload {
    unsigned len = 0;
    std::uint64_t value = 0;
    std::uint8_t last = 0;
};

[[gnu::always_inline]] inline ContinuedPayload read_continued(const std::uint8_t* p, unsigned max) {
    const std::uint32_t word = load_le32(p);
    if (const std::uint32_t ends = ~word & 0x80808080U; ends != 0) [[likely]] {
        const unsigned len = static_cast<unsigned>(std::countr_zero(ends)) / 8 + 1;
        const std::uint32_t w = word & kSizeMask32[len];
        return {len, groups7(w), static_cast<std::uint8_t>(word >> (8 * (len - 1)))};
    }
    std::uint64_t value = 0;
    unsigned len = 0;
    std::uint8_t byte = 0x80;
    while (len < max && (byte & 0x80) != 0) {
        byte = p[len];
        value |= std::uint64_t{byte & 0x7FU} << (7 * len);
        ++len;
    }
    if ((byte & 0x80) != 0) return {};
    return {len, value, byte};
}

}  // namespace itm_detail

template <class Sink>
inline void ItmDecoder::feed_inline(std::span<const std::uint8_t> data, Sink& sink) {
    stats_.bytes_in += data.size();
    const std::uint8_t* p = data.data();
    const std::size_t n = data.size();
    std::size_t i = 0;
    while (i < n) {
        if (state_ == State::kHeader && n - i >= itm_detail::kLongestPacket) {
            i = whole_packets(p, i, n, sink);
            if (i == n) break;
        }
        step(p[i++], sink);
    }
}

// Fast path: whole packets in this chunk, decoded in place with one jump on the header's type
// (kHeaders) to where that kind is handled. Counts are kept in locals and added up once at the
// end: bytes decoded are the bytes consumed less those discarded, and the zero run (for a sync
// that may follow) is the trailing zeros of the bytes consumed (a header is never zero, so it
// ends inside the last packet). Returns where it stopped: at a zero byte or an invalid header,
// which it leaves to step(), at an overlong continued packet (step() discards it byte by byte),
// or where fewer than kLongestPacket bytes are left.
template <class Sink>
inline std::size_t ItmDecoder::whole_packets(const std::uint8_t* p, std::size_t i, std::size_t n,
                                             Sink& sink) {
    using itm_detail::HeaderType;
    const std::size_t from = i;
    const std::size_t last = n - itm_detail::kLongestPacket;
    std::uint64_t packets = 0;
    std::uint64_t discarded = 0;
    std::size_t clean_from = i;  // where the bytes after the last discarded packet begin
    std::uint16_t page = page_;
    // A reserved payload: the packet's bytes are discarded, as discard_pending() would.
    const auto discard = [&](std::size_t at, std::size_t bytes) {
        if (at > clean_from) in_sync_ = true;  // good packets came before it
        discarded += bytes;
        clean_from = at + bytes;
        if (in_sync_) {
            ++stats_.resyncs;
            in_sync_ = false;
        }
    };
    const auto source = [&](auto type, std::uint8_t header, unsigned size) {
        const std::uint64_t value = itm_detail::load_le32(p + i + 1) & itm_detail::kSizeMask[size];
        const std::size_t at = i;
        i += 1U + size;
        if (itm_detail::source_packet<decltype(type)::value>(header, size, value, page, sink))
            [[likely]] {
            ++packets;
        } else {
            discard(at, 1U + size);
        }
    };
    const auto continued = [&](HeaderType type, std::uint8_t header, unsigned max) {
        const itm_detail::ContinuedPayload payload = itm_detail::read_continued(p + i + 1, max);
        if (payload.len == 0) return false;  // too long
        const std::size_t at = i;
        i += 1U + payload.len;
        switch (
            continued_packet(type, header, payload.len, payload.last, payload.value, page, sink)) {
            case Continued::kPacket:
                ++packets;
                break;
            case Continued::kNoPacket:
                break;
            case Continued::kReserved:
                discard(at, 1U + payload.len);
                break;
        }
        return true;
    };
    // A long local timestamp of `len` payload bytes (the first of them in `word`).
    const auto local_long = [&](auto len, std::uint8_t header, std::uint32_t word) {
        constexpr unsigned kLen = decltype(len)::value;
        const std::uint32_t value = itm_detail::groups7(word & itm_detail::kSizeMask32[kLen]);
        i += 1U + kLen;
        ++packets;
        const auto tc = static_cast<std::uint8_t>((header >> 4) & 3);
        sink.on_packet(ItmPacket{ItmPacketKind::kLocalTimestamp, 0, tc, 0, value});
    };
    const auto done = [&] {
        stats_.packets += packets;
        stats_.bytes_decoded += (i - from) - discarded;
        stats_.bytes_discarded += discarded;
        if (i > clean_from) in_sync_ = true;
        if (i > from) {
            std::uint64_t zeros = 0;
            while (p[i - 1 - zeros] == 0) ++zeros;
            zero_run_ = zeros;
        }
        page_ = page;
        return i;
    };
    while (i <= last) {
        const std::uint8_t header = p[i];
        const itm_detail::HeaderInfo info = itm_detail::kHeaders[header];
        using K = HeaderType;
        switch (info.type) {
            case K::kPcSample:
                source(std::integral_constant<K, K::kPcSample>{}, header, 4);
                continue;
            case K::kSoftware1:
                source(std::integral_constant<K, K::kSoftware1>{}, header, 1);
                continue;
            case K::kSoftware2:
                source(std::integral_constant<K, K::kSoftware2>{}, header, 2);
                continue;
            case K::kSoftware4:
                source(std::integral_constant<K, K::kSoftware4>{}, header, 4);
                continue;
            case K::kException:
                source(std::integral_constant<K, K::kException>{}, header, 2);
                continue;
            case K::kPcSleep:
                source(std::integral_constant<K, K::kPcSleep>{}, header, 1);
                continue;
            case K::kEventCounter:
                source(std::integral_constant<K, K::kEventCounter>{}, header, 1);
                continue;
            case K::kDataTracePc:
                source(std::integral_constant<K, K::kDataTracePc>{}, header, 4);
                continue;
            case K::kDataTraceAddress:
                source(std::integral_constant<K, K::kDataTraceAddress>{}, header, 2);
                continue;
            case K::kDataTraceValue:
                source(std::integral_constant<K, K::kDataTraceValue>{}, header, info.size);
                continue;
            case K::kLocalLong: {
                // Branches on the length, not arithmetic with it: where the next header is
                // then does not wait for this packet's bytes (lengths repeat; the branches are
                // predicted). One and two bytes here, longer ones as the other continued kinds.
                const std::uint32_t word = itm_detail::load_le32(p + i + 1);
                if ((word & 0x80U) == 0) {
                    local_long(std::integral_constant<unsigned, 1>{}, header, word);
                } else if ((word & 0x8000U) == 0) {
                    local_long(std::integral_constant<unsigned, 2>{}, header, word);
                } else if (!continued(K::kLocalLong, header, 4)) {
                    return done();  // too long: step() discards it byte by byte
                }
                continue;
            }
            case K::kGlobal1:
            case K::kGlobal2:
            case K::kExtensionLong:
                if (!continued(info.type, header, info.size)) return done();
                continue;
            case K::kOverflow:
                ++i;
                ++packets;
                sink.on_packet(ItmPacket{ItmPacketKind::kOverflow});
                continue;
            case K::kLocalShort:
                ++i;
                ++packets;
                sink.on_packet(
                    ItmPacket{ItmPacketKind::kLocalTimestamp, 0, 0, 0, (header >> 4) & 7U});
                continue;
            case K::kExtension:
                ++i;
                if ((header & 4) == 0) page = (header >> 4) & 7;  // S = 1 (DWT) carries nothing
                continue;
            case K::kZero:
            case K::kInvalid:
                return done();
        }
        __builtin_unreachable();
    }
    return done();
}

template <class Sink>
inline void ItmDecoder::step(std::uint8_t byte, Sink& sink) {
    if (byte == itm_detail::kSyncEnd && zero_run_ >= itm_detail::kSyncZeroBytes) [[unlikely]] {
        // Whatever swallowed some of these zero bits was garbage; the sync is certain.
        if (state_ != State::kZeros && pending_ > 0) discard_pending();
        ++pending_;
        zero_run_ = 0;
        page_ = 0;
        ++stats_.syncs;
        emit(ItmPacket{ItmPacketKind::kSync}, sink);
        return;
    }
    zero_run_ = byte == 0 ? zero_run_ + 1 : 0;
    switch (state_) {
        case State::kHeader:
            start(byte, sink);
            return;
        case State::kZeros:
            if (byte == 0) {
                ++pending_;
                return;
            }
            discard_pending();  // zeros that did not end in a sync
            start(byte, sink);
            return;
        case State::kPayload:
            value_ |= std::uint64_t{byte} << (8 * got_);
            ++pending_;
            if (++got_ == need_) end_source(sink);
            return;
        case State::kContinued:
            value_ |= std::uint64_t{byte & 0x7FU} << (7 * got_);
            ++pending_;
            ++got_;
            if ((byte & 0x80) == 0) {
                last_ = byte;
                end_continued(sink);
            } else if (got_ == need_) {
                discard_pending();  // longer than the format allows
            }
            return;
    }
}

template <class Sink>
inline void ItmDecoder::start(std::uint8_t header, Sink& sink) {
    const itm_detail::HeaderInfo info = itm_detail::kHeaders[header];
    header_ = header;
    pending_ = 1;
    got_ = 0;
    value_ = 0;
    need_ = info.size;
    switch (info.type) {
        case itm_detail::HeaderType::kInvalid:
            discard_pending();
            return;
        case itm_detail::HeaderType::kZero:
            state_ = State::kZeros;
            return;
        case itm_detail::HeaderType::kOverflow:
            emit(ItmPacket{ItmPacketKind::kOverflow}, sink);
            return;
        case itm_detail::HeaderType::kSoftware1:
        case itm_detail::HeaderType::kSoftware2:
        case itm_detail::HeaderType::kSoftware4:
        case itm_detail::HeaderType::kEventCounter:
        case itm_detail::HeaderType::kException:
        case itm_detail::HeaderType::kPcSample:
        case itm_detail::HeaderType::kPcSleep:
        case itm_detail::HeaderType::kDataTracePc:
        case itm_detail::HeaderType::kDataTraceAddress:
        case itm_detail::HeaderType::kDataTraceValue:
            state_ = State::kPayload;
            return;
        case itm_detail::HeaderType::kLocalShort:
            emit(ItmPacket{ItmPacketKind::kLocalTimestamp, 0, 0, 0, (header >> 4) & 7U}, sink);
            return;
        case itm_detail::HeaderType::kExtension:
            if ((header & 4) == 0) page_ = (header >> 4) & 7;  // S = 1 (DWT) carries nothing here
            decoded();
            return;
        case itm_detail::HeaderType::kLocalLong:
        case itm_detail::HeaderType::kGlobal1:
        case itm_detail::HeaderType::kGlobal2:
        case itm_detail::HeaderType::kExtensionLong:
            state_ = State::kContinued;
            return;
    }
}

template <class Sink>
[[gnu::always_inline]] inline void ItmDecoder::end_source(Sink& sink) {
    if (itm_detail::source_packet(header_, need_, value_, page_, sink)) {
        ++stats_.packets;
        decoded();
    } else {
        discard_pending();
    }
}

template <class Sink>
[[gnu::always_inline]] inline void ItmDecoder::end_continued(Sink& sink) {
    switch (continued_packet(itm_detail::kHeaders[header_].type, header_, got_, last_, value_,
                             page_, sink)) {
        case Continued::kPacket:
            ++stats_.packets;
            decoded();
            return;
        case Continued::kNoPacket:
            decoded();
            return;
        case Continued::kReserved:
            discard_pending();
            return;
    }
}

// A whole continued packet (header type `type`, `len` payload bytes, the last one `last`): a
// packet to the sink, an extension packet's page, or a reserved encoding.
template <class Sink>
[[gnu::always_inline]] inline ItmDecoder::Continued ItmDecoder::continued_packet(
    itm_detail::HeaderType type, std::uint8_t header, unsigned len, std::uint8_t last,
    std::uint64_t value, std::uint16_t& page, Sink& sink) {
    if (type == itm_detail::HeaderType::kLocalLong) {
        const auto tc = static_cast<std::uint8_t>((header >> 4) & 3);
        sink.on_packet(ItmPacket{ItmPacketKind::kLocalTimestamp, 0, tc, 0, value});
    } else if (type == itm_detail::HeaderType::kGlobal1) {
        // Only a full four-byte GTS1 carries ClkCh and Wrap, in bits 5 and 6 of its last byte.
        std::uint8_t flags = 0;
        if (len == 4) {
            flags = static_cast<std::uint8_t>((last >> 5) & 3);
            value &= 0x3FFFFFF;
        }
        sink.on_packet(ItmPacket{ItmPacketKind::kGlobalTimestamp1, 0, flags, 0, value});
    } else if (type == itm_detail::HeaderType::kGlobal2) {
        if (len != 4 && len != 6) return Continued::kReserved;
        sink.on_packet(ItmPacket{ItmPacketKind::kGlobalTimestamp2, 0, 0, 0, value});
    } else {
        // A long extension packet: EX[2:0] in the header, the rest in the continuation bytes.
        if ((header & 4) == 0) page = static_cast<std::uint16_t>(((header >> 4) & 7) | value << 3);
        return Continued::kNoPacket;
    }
    return Continued::kPacket;
}

template <class Sink>
[[gnu::always_inline]] inline void ItmDecoder::emit(const ItmPacket& packet, Sink& sink) {
    ++stats_.packets;
    decoded();
    sink.on_packet(packet);
}

[[gnu::always_inline]] inline void ItmDecoder::decoded() {
    stats_.bytes_decoded += pending_;
    pending_ = 0;
    in_sync_ = true;
    state_ = State::kHeader;
}

}  // namespace rackprof::protocol
