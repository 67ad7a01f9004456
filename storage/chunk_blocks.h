// Blocks: how raw chunks and record batches sit on disk. The storage writer
// puts every chunk one transaction brings for a session into one block row (two: one for the raw
// bytes, one for the records), compressed together with zstd, so the database grows by a
// fraction of the wire bytes instead of twice them.
//
// A block's blob is one zstd frame holding:
//   varint chunk count
//   per chunk: zigzag varint of (received_ns - the previous chunk's; the first: - the row's
//              received_ns), then varint length (raw blocks: bytes; record blocks: records);
//              from encoding 2 on, then the zigzag varint of (seq - the previous chunk's seq;
//              the first: - the row's seq), and in raw blocks a varint codec (raw_derivation.h): 0
//              the bytes are stored, else varints skip and suffix, and only the suffix's bytes are
//              stored
//   the chunks' payloads back to back: raw bytes as received (a rebuilt chunk's suffix); records
//   as a head byte each (kind, bit 7: a count follows) for all of them, then varints: an arc's
//   zigzag deltas of from_pc and self_pc to the block's previous arc, a PC sample's to the
//   previous sample, and the count where the head says. In encoding 3 the arcs' varints come
//   first, after their length as a varint, then the samples': an arc stream on its own repeats
//   as the firmware's call pattern does, which zstd then finds in long matches. Raw blocks of
//   encoding 3 are those of encoding 2.
// Rows of encoding 0 are one chunk each, uncompressed; readers take every encoding.
// A rebuilt raw chunk's records are those of the record chunk with the same seq.
// The bytes are the database's: change them only with a schema migration.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "gmon/aggregate.h"
#include "protocol/record.h"
#include "storage/raw_derivation.h"

namespace rackprof::storage {

// The `encoding` column of raw_chunks and record_batches.
enum class BlockEncoding : std::int64_t {
    kPlainChunk = 0,        // v7 and before: one chunk, raw bytes or packed records as they are
    kZstdBlock = 1,         // v8: a block as above
    kZstdBlockSeq = 2,      // v13: each chunk's seq; raw chunks may be rebuilt from their records
    kZstdBlockColumns = 3,  // v14: record values as two runs, the arcs' and the samples'
};
// Whether a row's `encoding` is one of the block encodings above (not a plain chunk): the one
// list readers check, so that a new encoding is added here once.
constexpr bool is_block_encoding(std::int64_t encoding) {
    return encoding >= static_cast<std::int64_t>(BlockEncoding::kZstdBlock) &&
           encoding <= static_cast<std::int64_t>(BlockEncoding::kZstdBlockColumns);
}
// What encode_raw_block / encode_record_block write.
inline constexpr BlockEncoding kBlockEncoding = BlockEncoding::kZstdBlockColumns;

// Bounds on one block: the writer starts a new row past them; a reader refuses a blob whose
// frame claims more (a damaged database must not make a reader allocate gigabytes).
inline constexpr std::size_t kBlockRawBytes = 256u << 10;
inline constexpr std::size_t kBlockRecords = 32u << 10;
inline constexpr std::size_t kMaxBlockPayload = 16u << 20;

struct RawChunkView {
    std::int64_t received_ns = 0;
    std::span<const std::uint8_t> bytes;  // all of them, also when rebuilt
    std::int64_t seq = 0;
    RawCodec codec = RawCodec::kVerbatim;  // else: stored as `derivation` and the suffix
    RawDerivation derivation{};
};
// A chunk's view, stored as its records' encoding when `codec` rebuilds it from them exactly.
RawChunkView raw_chunk_view(std::int64_t received_ns, std::span<const std::uint8_t> bytes,
                            std::int64_t seq, RawCodec codec,
                            std::span<const protocol::Record> records);
struct RecordChunkView {
    std::int64_t received_ns = 0;
    std::span<const protocol::Record> records;
    std::int64_t seq = 0;
};

struct DecodedRawChunk {
    std::int64_t received_ns = 0;
    std::vector<std::uint8_t> bytes;  // a rebuilt chunk's: its suffix only
    std::int64_t seq = -1;            // -1: not stored (before v13)
    RawCodec codec = RawCodec::kVerbatim;
    RawDerivation derivation{};
    std::size_t length = 0;  // the chunk's size (bytes.size() unless rebuilt)
};
struct DecodedRecordChunk {
    std::int64_t received_ns = 0;
    std::vector<protocol::Record> records;
    std::int64_t seq = -1;  // -1: not stored (before v13)
};

// Both take the row's received_ns (the first chunk's) as the base of the times. zstd level:
// kBlockLevel (fast; the ratio comes from the wire's repetition, not from effort).
inline constexpr int kBlockLevel = 1;
std::vector<std::uint8_t> encode_raw_block(std::span<const RawChunkView> chunks);
std::vector<std::uint8_t> encode_record_block(std::span<const RecordChunkView> chunks);

// One chunk as blocks of its own (a raw_chunks row and a record_batches row holding it alone):
// what the storage writer would store for a transaction that brought only this chunk. A sender
// with time to spare encodes its chunk itself while the writer is behind, so the two threads
// share the compression (storage_writer.h, ChunkOp::encoded).
struct EncodedChunk {
    std::vector<std::uint8_t> raw_block;  // empty: no raw bytes
    std::size_t raw_bytes = 0;
    std::vector<std::uint8_t> record_block;  // empty: no records
    std::size_t records = 0;
};
// Raw bytes that `codec` rebuilds from the records are stored as such (raw_derivation.h).
EncodedChunk encode_chunk(std::int64_t received_ns, std::span<const std::uint8_t> raw,
                          std::span<const protocol::Record> records,
                          RawCodec codec = RawCodec::kVerbatim);

// Throw StorageError for a blob that is not a block (damaged, cut short, too large).
// The row's received_ns, seq and encoding (kZstdBlock, kZstdBlockSeq or kZstdBlockColumns)
// are its columns'.
std::vector<DecodedRawChunk> decode_raw_block(std::span<const std::uint8_t> blob,
                                              std::int64_t row_received_ns,
                                              std::int64_t row_seq = 0,
                                              BlockEncoding encoding = kBlockEncoding);
std::vector<DecodedRecordChunk> decode_record_block(std::span<const std::uint8_t> blob,
                                                    std::int64_t row_received_ns,
                                                    std::int64_t row_seq = 0,
                                                    BlockEncoding encoding = kBlockEncoding);

// Sums (record_slices.sums): an aggregate as one zstd frame holding
//   varint arc count, per arc (sorted) the zigzag deltas of from_pc and self_pc to the
//   previous arc's and the count; varint PC count, per PC (sorted) its delta to the previous
//   PC's and the count.
std::vector<std::uint8_t> encode_sums_block(const gmon::Aggregate& sums);
// Adds the block's counts to `into`; throws StorageError for a damaged blob.
void add_sums_block(std::span<const std::uint8_t> blob, gmon::Aggregate& into);
// A sums block's counts in the block's order: arcs, then PCs, each sorted by address.
struct SumsBlock {
    std::vector<gmon::ArcCount> arcs;
    std::vector<gmon::PcCount> pcs;
};
// Replaces `into`'s counts with the block's, keeping the vectors' room (one SumsBlock reads a
// window's slices one after another); throws StorageError for a damaged blob.
void read_sums_block(std::span<const std::uint8_t> blob, SumsBlock& into);

// A sums block read a run at a time, for a reader that adds the counts where it likes (a
// window's array by address) without building the block's vectors: all arcs first, then the
// PCs, each sorted by address (a damaged block's need not be). The frame is decompressed into
// `payload`, whose room the caller keeps for the next block. Throws StorageError for a damaged
// blob, at the latest when the last PC is read.
class SumsBlockReader {
  public:
    SumsBlockReader(std::span<const std::uint8_t> blob, std::vector<std::uint8_t>& payload);
    // Up to out.size() of the next arcs into `out`; how many (0: the arcs are done).
    std::size_t arcs(std::span<gmon::ArcCount> out);
    // Up to out.size() of the next PCs (once the arcs are done); how many (0: the end).
    std::size_t pcs(std::span<gmon::PcCount> out);
    std::uint64_t arcs_left() const { return arcs_left_; }
    std::uint64_t pcs_left() const { return pcs_left_; }

  private:
    std::uint64_t varint();
    void start_pcs();

    const std::uint8_t* at_;
    const std::uint8_t* end_;
    std::uint64_t arcs_left_ = 0;
    std::uint64_t pcs_left_ = 0;
    bool pcs_started_ = false;
    std::int64_t from_ = 0, self_ = 0;
    std::uint64_t pc_ = 0;
};

}  // namespace rackprof::storage
