// libFuzzer target: the stored blocks (storage/chunk_blocks.h), what a damaged database hands a
// reader. The input is tried three ways: as a block blob itself (raw and records), and as a
// block's payload inside a valid zstd frame (what a flipped bit after decompression looks like).
// Either way the promise is a StorageError or chunks, never a crash or a runaway allocation.
// Records the decoder accepts must encode and decode to the same records, times and seqs again.
// Every block encoding (v8's; v13's with seqs and rebuilt raw chunks; v14's with the arcs'
// and the samples' values apart) is tried.
#include <zstd.h>

#include "storage/chunk_blocks.h"
#include "storage/storage_error.h"
#include "tests/fuzz/fuzz_input.h"

namespace rackprof::fuzz {
namespace {

void decode_records_again(const std::vector<storage::DecodedRecordChunk>& chunks) {
    std::vector<storage::RecordChunkView> views;
    for (const auto& c : chunks) views.push_back({c.received_ns, c.records, c.seq});
    if (views.empty()) return;
    const auto again = storage::decode_record_block(storage::encode_record_block(views),
                                                    views.front().received_ns, views.front().seq);
    FUZZ_CHECK(again.size() == chunks.size());
    for (std::size_t i = 0; i < chunks.size(); ++i) {
        FUZZ_CHECK(again[i].received_ns == chunks[i].received_ns);
        FUZZ_CHECK(again[i].records == chunks[i].records);
        FUZZ_CHECK(again[i].seq == chunks[i].seq);
    }
}

void try_blob(Bytes blob) {
    for (const auto encoding :
         {storage::BlockEncoding::kZstdBlock, storage::BlockEncoding::kZstdBlockSeq,
          storage::BlockEncoding::kZstdBlockColumns}) {
        try {
            for (const auto& c : storage::decode_raw_block(blob, 1000, 7, encoding))
                FUZZ_CHECK(c.bytes.size() <= c.length);
        } catch (const storage::StorageError&) {
        }
        try {
            decode_records_again(storage::decode_record_block(blob, 1000, 7, encoding));
        } catch (const storage::StorageError&) {
        }
    }
}

}  // namespace
}  // namespace rackprof::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace rackprof::fuzz;
    try_blob(Bytes(data, size));
    std::vector<std::uint8_t> framed(ZSTD_compressBound(size));
    const std::size_t n = ZSTD_compress(framed.data(), framed.size(), data, size, 1);
    if (!ZSTD_isError(n)) try_blob(Bytes(framed.data(), n));
    return 0;
}
