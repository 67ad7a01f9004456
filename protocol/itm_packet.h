// ITM/DWT packets as they appear on SWO (ARMv7-M ARM, appendix D4): what ItmDecoder reports and
// ItmEncoder writes. One small value type for every kind, so tests can compare packet lists.
#pragma once

#include <cstdint>

namespace rackprof::protocol {

enum class ItmPacketKind : std::uint8_t {
    kSync,          // >= 47 zero bits then a one: alignment is certain afterwards
    kOverflow,      // 0x70: the ITM dropped packets
    kSoftware,      // stimulus port write: channel = port (page * 32 + A), size, value
    kEventCounter,  // DWT disc 0: flags = the wrapped counters (CPI, Exc, Sleep, LSU, Fold, Cyc)
    kException,     // DWT disc 1: channel = ExcNum, flags = FN
    kPcSample,      // DWT disc 2: value = PC
    kPcSleep,       // DWT disc 2, one zero byte: the core was asleep
    kDataTracePc,   // DWT disc 8,10,12,14: channel = comparator, value = PC
    kDataTraceAddress,  // DWT disc 9,11,13,15: channel = comparator, value = address bits 15:0
    kDataTraceValue,    // DWT disc 16..23: channel = comparator, flags = 1 write / 0 read, size
    kLocalTimestamp,    // value = cycles since the previous one, flags = TC
    kGlobalTimestamp1,  // GTS1: value = bits 25:0, flags = bit 0 ClkCh, bit 1 Wrap
    kGlobalTimestamp2,  // GTS2: value = bits 63:26 (shifted down)
};

// Exception trace FN field.
inline constexpr std::uint8_t kExceptionEnter = 1;
inline constexpr std::uint8_t kExceptionExit = 2;
inline constexpr std::uint8_t kExceptionReturn = 3;

struct ItmPacket {
    ItmPacketKind kind = ItmPacketKind::kSync;
    std::uint8_t size = 0;      // payload bytes of a source packet (1, 2 or 4); else 0
    std::uint8_t flags = 0;     // see the kind
    std::uint16_t channel = 0;  // see the kind
    std::uint64_t value = 0;    // see the kind

    friend bool operator==(const ItmPacket&, const ItmPacket&) = default;
};

class ItmPacketSink {
  public:
    virtual ~ItmPacketSink() = default;
    virtual void on_packet(const ItmPacket& packet) = 0;
};

}  // namespace rackprof::protocol
