// What session_store.cc, session_writes.cc and session_reads.cc share: how a stored row's
// blob is told apart and decoded, and the records after a seq summed. Internal to storage/.
#pragma once

#include <cstdint>
#include <vector>

#include "gmon/aggregate.h"
#include "storage/chunk_blocks.h"
#include "storage/sqlite.h"

namespace rackprof::storage::detail {

// Whether a raw_chunks / record_batches row is one plain chunk (written before v8) or a block.
bool plain_row(const Statement& row, int encoding_column);
BlockEncoding encoding_of(const Statement& row, int encoding_column);

// A record_batches row's chunks; the row's columns are received_ns, records, encoding (the
// chunks' seqs are counted from `row_seq`: readers that need them select the row's seq).
std::vector<DecodedRecordChunk> record_chunks_of(const Statement& row, std::int64_t row_seq = 0);

// The records of a session's rows after `seq`, summed.
gmon::Aggregate records_after(Database& db, std::int64_t session, std::int64_t seq);

}  // namespace rackprof::storage::detail
