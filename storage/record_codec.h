// The packed record blob of record_batches.records in rows written before schema v8 (one chunk
// each; later rows are chunk_blocks.h blocks): how a chunk's decoded records sat on disk.
//
// Each record is a kind byte (bit 7: an explicit count follows; absent, the count is 1), the
// 32-bit little-endian count when present, then the addresses, 32-bit little-endian: an arc's
// from_pc and self_pc, a PC sample's pc. Five bytes per PC sample, nine per arc, four more
// with a count. The bytes are the database's: change them only with a schema migration.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "protocol/record.h"

namespace rackprof::storage {

std::vector<std::uint8_t> pack_records(std::span<const protocol::Record> records);
// Throws StorageError for a blob cut short or holding an unknown kind.
std::vector<protocol::Record> unpack_records(std::span<const std::uint8_t> blob);

}  // namespace rackprof::storage
