// The thesis' legacy wire format ("low-footprint gprof", ch. 4): no framing, no checksum.
//   arc:       'A' (0x41), from_pc, self_pc   -- each big-endian in N bytes
//   PC sample: 'P' (0x50), pc                  -- big-endian in N bytes
// N (the address width) is 3 (the thesis, 128 KiB flash) or 4. Serial monitors often saved
// the bytes as hex-ASCII text, two digits per byte; that is the "hex" encoding.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "protocol/record.h"

namespace rackprof::protocol {

inline constexpr std::uint8_t kLegacyArcTag = 0x41;  // 'A'
inline constexpr std::uint8_t kLegacyPcTag = 0x50;   // 'P'

enum class LegacyEncoding { kBinary, kHex };

// Addresses a real record can hold: [low, high). Used to reject misaligned garbage.
struct AddressRange {
    std::uint32_t low = 0;
    std::uint32_t high = 0;
    bool contains(std::uint32_t addr) const { return addr >= low && addr < high; }
};

struct LegacyOptions {
    int addr_bytes = 3;  // 3 or 4
    LegacyEncoding encoding = LegacyEncoding::kBinary;
    std::optional<AddressRange> code_range;  // known from the ELF; tightens resynchronisation
};

// Throws std::invalid_argument for an address width other than 3 or 4.
void validate(const LegacyOptions& options);

// Size of one record on the binary wire.
inline constexpr std::size_t legacy_record_size(std::uint8_t tag, int addr_bytes) {
    return tag == kLegacyArcTag ? 1 + 2 * static_cast<std::size_t>(addr_bytes)
                                : 1 + static_cast<std::size_t>(addr_bytes);
}

// Appends the binary wire bytes of one record. Addresses wider than addr_bytes are truncated,
// exactly as the target runtime does.
void encode_legacy(const Record& record, int addr_bytes, std::vector<std::uint8_t>& out);
// The binary wire bytes of a run of records, each sent once (its count is not looked at: the
// wire carries none), written at `out`, which has room for records.size() arcs; returns the end.
// For storage rebuilding a chunk's raw bytes from its records (storage/raw_derivation.h).
std::uint8_t* encode_legacy_run(std::span<const Record> records, int addr_bytes, std::uint8_t* out);

// Appends bytes as upper-case hex-ASCII text, two characters per byte.
void append_hex(std::span<const std::uint8_t> bytes, std::string& out);

}  // namespace rackprof::protocol
