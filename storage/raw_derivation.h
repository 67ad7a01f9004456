// Raw bytes rebuilt from records. A clean thesis-format (legacy binary) stream is exactly the
// wire encoding of the records decoded from it, so a chunk whose bytes are that encoding is
// stored as a few bytes saying so: compressing the raw bytes would cost about as much as
// everything else a file ingest does, and the records are stored anyway. Whatever does not rebuild
// exactly (resynchronisation, garbage, hex text, the other protocols) is stored as it came. The
// stored bytes are the database's (chunk_blocks.h): change them only with a schema migration.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "protocol/record.h"
#include "protocol/wire_format.h"

namespace rackprof::storage {

// How a raw chunk's bytes come back: as stored, or from the chunk's records.
enum class RawCodec : std::uint8_t {
    kVerbatim = 0,
    kLegacy3 = 1,  // the legacy binary encoding, 3-byte addresses
    kLegacy4 = 2,  // the same, 4-byte addresses
};
inline constexpr std::uint8_t kLastRawCodec = 2;

// The codec a wire's chunks may be rebuilt with (kVerbatim: none).
RawCodec raw_codec_of(const protocol::WireSpec& wire);

// A chunk's bytes are its records' encoding without its first `skip` bytes (the first record
// began in the chunk before), then the last `suffix` bytes of the chunk (a record the next
// chunk completes), stored as they are.
struct RawDerivation {
    std::uint32_t skip = 0;
    std::uint32_t suffix = 0;
};

// The derivation of `raw` from `records`, or nothing when they do not rebuild it exactly.
std::optional<RawDerivation> derive_raw(RawCodec codec, std::span<const std::uint8_t> raw,
                                        std::span<const protocol::Record> records);

// The chunk's bytes again: `suffix_bytes` are the stored last bytes, `length` the chunk's size.
// Throws StorageError when the records cannot give them (a damaged or mismatched row).
std::vector<std::uint8_t> rebuild_raw(RawCodec codec, RawDerivation derivation,
                                      std::span<const protocol::Record> records,
                                      std::span<const std::uint8_t> suffix_bytes,
                                      std::size_t length);

}  // namespace rackprof::storage
