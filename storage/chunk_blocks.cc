#include "storage/chunk_blocks.h"

#include <zstd.h>

#include <memory>
#include <string>

#include "storage/record_codec.h"
#include "storage/storage_error.h"

namespace rackprof::storage {
namespace {

void put_varint(std::vector<std::uint8_t>& out, std::uint64_t v) {
    while (v >= 0x80) {
        out.push_back(static_cast<std::uint8_t>(v | 0x80));
        v >>= 7;
    }
    out.push_back(static_cast<std::uint8_t>(v));
}

std::uint64_t zigzag(std::int64_t v) {
    return (static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63);
}
std::int64_t unzigzag(std::uint64_t v) {
    return static_cast<std::int64_t>(v >> 1) ^ -static_cast<std::int64_t>(v & 1);
}

// Reads the uncompressed payload front to back; every read is bounds-checked.
class PayloadReader {
  public:
    explicit PayloadReader(std::span<const std::uint8_t> bytes) : bytes_(bytes) {}
    std::uint64_t varint() {
        std::uint64_t v = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (at_ >= bytes_.size()) throw StorageError("corrupt block: index cut short");
            const std::uint8_t b = bytes_[at_++];
            v |= static_cast<std::uint64_t>(b & 0x7F) << shift;
            if (!(b & 0x80)) return v;
        }
        throw StorageError("corrupt block: varint too long");
    }
    std::span<const std::uint8_t> take(std::size_t n) {
        if (n > bytes_.size() - at_) throw StorageError("corrupt block: payload cut short");
        const auto out = bytes_.subspan(at_, n);
        at_ += n;
        return out;
    }
    std::span<const std::uint8_t> rest() { return take(bytes_.size() - at_); }
    bool done() const { return at_ == bytes_.size(); }

  private:
    std::span<const std::uint8_t> bytes_;
    std::size_t at_ = 0;
};

struct CctxFree {
    void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct DctxFree {
    void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};

std::vector<std::uint8_t> compress(const std::vector<std::uint8_t>& payload) {
    // One context per thread: the writer compresses every block, and a context is costly to set
    // up (its tables) compared with a 16 KiB block.
    thread_local std::unique_ptr<ZSTD_CCtx, CctxFree> cctx(ZSTD_createCCtx());
    std::vector<std::uint8_t> out(ZSTD_compressBound(payload.size()));
    const std::size_t n = ZSTD_compressCCtx(cctx.get(), out.data(), out.size(), payload.data(),
                                            payload.size(), kBlockLevel);
    if (ZSTD_isError(n)) throw StorageError(std::string("zstd: ") + ZSTD_getErrorName(n));
    out.resize(n);
    return out;
}

std::vector<std::uint8_t> decompress(std::span<const std::uint8_t> blob) {
    const unsigned long long size = ZSTD_getFrameContentSize(blob.data(), blob.size());
    if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN)
        throw StorageError("corrupt block: not a zstd frame");
    if (size > kMaxBlockPayload)
        throw StorageError("corrupt block: claims " + std::to_string(size) + " bytes");
    thread_local std::unique_ptr<ZSTD_DCtx, DctxFree> dctx(ZSTD_createDCtx());
    std::vector<std::uint8_t> out(size);
    const std::size_t n =
        ZSTD_decompressDCtx(dctx.get(), out.data(), out.size(), blob.data(), blob.size());
    if (ZSTD_isError(n) || n != size)
        throw StorageError(std::string("corrupt block: ") +
                           (ZSTD_isError(n) ? ZSTD_getErrorName(n) : "size differs"));
    return out;
}

// The index both kinds share: count, then (time delta, length) per chunk.
template <class Chunks, class LengthOf>
std::vector<std::uint8_t> index_of(const Chunks& chunks, LengthOf length_of) {
    std::vector<std::uint8_t> out;
    put_varint(out, chunks.size());
    std::int64_t previous = chunks.empty() ? 0 : chunks.front().received_ns;
    for (const auto& c : chunks) {
        put_varint(out, zigzag(c.received_ns - previous));
        previous = c.received_ns;
        put_varint(out, length_of(c));
    }
    return out;
}

struct IndexEntry {
    std::int64_t received_ns;
    std::uint64_t length;
};

std::vector<IndexEntry> read_index(PayloadReader& in, std::int64_t row_received_ns,
                                   std::size_t payload_bytes) {
    const std::uint64_t count = in.varint();
    if (count > payload_bytes) throw StorageError("corrupt block: chunk count too large");
    std::vector<IndexEntry> index;
    index.reserve(count);
    std::int64_t t = row_received_ns;
    for (std::uint64_t i = 0; i < count; ++i) {
        t += unzigzag(in.varint());
        index.push_back({t, in.varint()});
    }
    return index;
}

}  // namespace

std::vector<std::uint8_t> encode_raw_block(std::span<const RawChunkView> chunks) {
    std::vector<std::uint8_t> payload =
        index_of(chunks, [](const RawChunkView& c) { return c.bytes.size(); });
    for (const auto& c : chunks) payload.insert(payload.end(), c.bytes.begin(), c.bytes.end());
    return compress(payload);
}

std::vector<std::uint8_t> encode_record_block(std::span<const RecordChunkView> chunks) {
    std::vector<std::uint8_t> payload =
        index_of(chunks, [](const RecordChunkView& c) { return c.records.size(); });
    for (const auto& c : chunks) pack_records_into(payload, c.records);
    return compress(payload);
}

std::vector<DecodedRawChunk> decode_raw_block(std::span<const std::uint8_t> blob,
                                              std::int64_t row_received_ns) {
    const auto payload = decompress(blob);
    PayloadReader in(payload);
    std::vector<DecodedRawChunk> out;
    for (const auto& e : read_index(in, row_received_ns, payload.size())) {
        const auto bytes = in.take(e.length);
        out.push_back({e.received_ns, {bytes.begin(), bytes.end()}});
    }
    if (!in.done()) throw StorageError("corrupt block: bytes after the last chunk");
    return out;
}

std::vector<DecodedRecordChunk> decode_record_block(std::span<const std::uint8_t> blob,
                                                    std::int64_t row_received_ns) {
    const auto payload = decompress(blob);
    PayloadReader in(payload);
    const auto index = read_index(in, row_received_ns, payload.size());
    std::vector<protocol::Record> all = unpack_records(in.rest());
    std::vector<DecodedRecordChunk> out;
    out.reserve(index.size());
    std::size_t at = 0;
    for (const auto& e : index) {
        if (e.length > all.size() - at)
            throw StorageError("corrupt block: fewer records than its index says");
        out.push_back({e.received_ns,
                       {all.begin() + static_cast<std::ptrdiff_t>(at),
                        all.begin() + static_cast<std::ptrdiff_t>(at + e.length)}});
        at += e.length;
    }
    if (at != all.size()) throw StorageError("corrupt block: more records than its index says");
    return out;
}

}  // namespace rackprof::storage
