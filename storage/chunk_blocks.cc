#include "storage/chunk_blocks.h"

#include <zstd.h>

#include <algorithm>
#include <memory>
#include <string>

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
// The same into a buffer known to have room (at most 10 bytes); returns the end.
std::uint8_t* put_varint(std::uint8_t* out, std::uint64_t v) {
    while (v >= 0x80) {
        *out++ = static_cast<std::uint8_t>(v | 0x80);
        v >>= 7;
    }
    *out++ = static_cast<std::uint8_t>(v);
    return out;
}

std::uint64_t zigzag(std::int64_t v) {
    return (static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63);
}
std::int64_t unzigzag(std::uint64_t v) {
    return static_cast<std::int64_t>(v >> 1) ^ -static_cast<std::int64_t>(v & 1);
}

// Time steps wrap (two's complement) instead of overflowing: a damaged block gives wrong times,
// never undefined behaviour (the storage_blocks fuzz target checks it).
std::int64_t wrapping_add(std::int64_t a, std::int64_t b) {
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
}
std::int64_t wrapping_sub(std::int64_t a, std::int64_t b) {
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) - static_cast<std::uint64_t>(b));
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
    // A length that must fit in what is left.
    std::size_t varint_within() {
        const std::uint64_t n = varint();
        if (n > bytes_.size() - at_) throw StorageError("corrupt block: payload cut short");
        return static_cast<std::size_t>(n);
    }
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
    // The frame goes to a scratch buffer of the bound's size first, not zeroed (a vector of that
    // size would clear ~6x the bytes it keeps), and only what it holds is copied out.
    thread_local std::unique_ptr<std::uint8_t[]> scratch;
    thread_local std::size_t scratch_size = 0;
    const std::size_t bound = ZSTD_compressBound(payload.size());
    if (scratch_size < bound) {
        scratch.reset(new std::uint8_t[bound]);
        scratch_size = bound;
    }
    const std::size_t n = ZSTD_compressCCtx(cctx.get(), scratch.get(), bound, payload.data(),
                                            payload.size(), kBlockLevel);
    if (ZSTD_isError(n)) throw StorageError(std::string("zstd: ") + ZSTD_getErrorName(n));
    return std::vector<std::uint8_t>(scratch.get(), scratch.get() + n);
}

// Into `out`, whose room is kept (a reader thread reuses it for block after block).
void decompress_into(std::span<const std::uint8_t> blob, std::vector<std::uint8_t>& out) {
    const unsigned long long size = ZSTD_getFrameContentSize(blob.data(), blob.size());
    if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN)
        throw StorageError("corrupt block: not a zstd frame");
    if (size > kMaxBlockPayload)
        throw StorageError("corrupt block: claims " + std::to_string(size) + " bytes");
    thread_local std::unique_ptr<ZSTD_DCtx, DctxFree> dctx(ZSTD_createDCtx());
    out.resize(size);
    const std::size_t n =
        ZSTD_decompressDCtx(dctx.get(), out.data(), out.size(), blob.data(), blob.size());
    if (ZSTD_isError(n) || n != size)
        throw StorageError(std::string("corrupt block: ") +
                           (ZSTD_isError(n) ? ZSTD_getErrorName(n) : "size differs"));
}

std::vector<std::uint8_t> decompress(std::span<const std::uint8_t> blob) {
    std::vector<std::uint8_t> out;
    decompress_into(blob, out);
    return out;
}

// The index both kinds share: count, then per chunk its time delta, its length and its seq
// delta, and what `extra` appends (a raw chunk's codec).
template <class Chunks, class LengthOf, class Extra>
std::vector<std::uint8_t> index_of(const Chunks& chunks, LengthOf length_of, Extra extra) {
    std::vector<std::uint8_t> out;
    put_varint(out, chunks.size());
    std::int64_t previous = chunks.empty() ? 0 : chunks.front().received_ns;
    std::int64_t previous_seq = chunks.empty() ? 0 : chunks.front().seq;
    for (const auto& c : chunks) {
        put_varint(out, zigzag(wrapping_sub(c.received_ns, previous)));
        previous = c.received_ns;
        put_varint(out, length_of(c));
        put_varint(out, zigzag(wrapping_sub(c.seq, previous_seq)));
        previous_seq = c.seq;
        extra(c, out);
    }
    return out;
}

struct IndexEntry {
    std::int64_t received_ns = 0;
    std::uint64_t length = 0;
    std::int64_t seq = -1;
    RawCodec codec = RawCodec::kVerbatim;
    RawDerivation derivation{};
    // What the payload holds for it: `length` bytes or records, a rebuilt chunk's suffix.
    std::uint64_t stored() const {
        return codec == RawCodec::kVerbatim ? length : derivation.suffix;
    }
};

enum class BlockKind { kRaw, kRecords };

std::vector<IndexEntry> read_index(PayloadReader& in, std::int64_t row_received_ns,
                                   std::int64_t row_seq, BlockEncoding encoding, BlockKind kind,
                                   std::size_t payload_bytes) {
    if (!is_block_encoding(static_cast<std::int64_t>(encoding)))
        throw StorageError("a stored block has an unknown encoding " +
                           std::to_string(static_cast<std::int64_t>(encoding)));
    const bool seqs = encoding != BlockEncoding::kZstdBlock;
    const std::uint64_t count = in.varint();
    if (count > payload_bytes) throw StorageError("corrupt block: chunk count too large");
    std::vector<IndexEntry> index;
    index.reserve(count);
    std::int64_t t = row_received_ns;
    std::int64_t seq = row_seq;
    for (std::uint64_t i = 0; i < count; ++i) {
        t = wrapping_add(t, unzigzag(in.varint()));
        IndexEntry e{t, in.varint()};
        if (seqs) {
            seq = wrapping_add(seq, unzigzag(in.varint()));
            e.seq = seq;
        }
        if (seqs && kind == BlockKind::kRaw) {
            const std::uint64_t codec = in.varint();
            if (codec > kLastRawCodec) throw StorageError("corrupt block: unknown raw codec");
            e.codec = static_cast<RawCodec>(codec);
            if (e.codec != RawCodec::kVerbatim) {
                const std::uint64_t skip = in.varint();
                const std::uint64_t suffix = in.varint();
                if (skip > 0xFFFF || suffix > 0xFFFF || suffix > e.length)
                    throw StorageError("corrupt block: a rebuilt chunk's bounds are wrong");
                e.derivation = {static_cast<std::uint32_t>(skip),
                                static_cast<std::uint32_t>(suffix)};
            }
        }
        index.push_back(e);
    }
    return index;
}

}  // namespace

RawChunkView raw_chunk_view(std::int64_t received_ns, std::span<const std::uint8_t> bytes,
                            std::int64_t seq, RawCodec codec,
                            std::span<const protocol::Record> records) {
    RawChunkView view{received_ns, bytes, seq};
    if (const auto derived = derive_raw(codec, bytes, records)) {
        view.codec = codec;
        view.derivation = *derived;
    }
    return view;
}

std::vector<std::uint8_t> encode_raw_block(std::span<const RawChunkView> chunks) {
    std::vector<std::uint8_t> payload = index_of(
        chunks, [](const RawChunkView& c) { return c.bytes.size(); },
        [](const RawChunkView& c, std::vector<std::uint8_t>& out) {
            put_varint(out, static_cast<std::uint8_t>(c.codec));
            if (c.codec == RawCodec::kVerbatim) return;
            put_varint(out, c.derivation.skip);
            put_varint(out, c.derivation.suffix);
        });
    for (const auto& c : chunks) {
        const auto stored =
            c.codec == RawCodec::kVerbatim ? c.bytes : c.bytes.last(c.derivation.suffix);
        payload.insert(payload.end(), stored.begin(), stored.end());
    }
    return compress(payload);
}

// Records as two streams: a head byte each (kind, bit 7: a count follows), then varints — per
// arc the zigzag deltas of from_pc and self_pc to the previous arc's, per PC sample the delta to
// the previous sample's, and the count where the head says. Consecutive records of a loop
// differ little, so this is a third of the packed size before zstd even starts (and zstd then
// has a third of the bytes to work through).
class RecordDeltas {
  public:
    // The record's head byte at `head`, its values at `arcs` (an arc's) or `pcs` (a sample's),
    // each with room for kMaxValueBytes; advances the one written.
    static constexpr std::size_t kMaxValueBytes = 3 * 5;  // 33-bit zigzags, a 32-bit count
    void put(const protocol::Record& r, std::uint8_t* head, std::uint8_t*& arcs,
             std::uint8_t*& pcs) {
        const bool counted = r.count != 1;
        *head = static_cast<std::uint8_t>(static_cast<std::uint8_t>(r.kind) | (counted ? 0x80 : 0));
        std::uint8_t*& values = r.kind == protocol::RecordKind::kArc ? arcs : pcs;
        if (r.kind == protocol::RecordKind::kArc) {
            values = put_varint(values, zigzag(std::int64_t{r.from_pc} - from_));
            values = put_varint(values, zigzag(std::int64_t{r.self_pc} - self_));
            from_ = r.from_pc;
            self_ = r.self_pc;
        } else {
            values = put_varint(values, zigzag(std::int64_t{r.self_pc} - pc_));
            pc_ = r.self_pc;
        }
        if (counted) values = put_varint(values, r.count);
    }
    // `arcs` and `pcs` are one reader in blocks before encoding 3.
    protocol::Record get(std::uint8_t head, PayloadReader& arcs, PayloadReader& pcs) {
        protocol::Record r;
        r.kind = static_cast<protocol::RecordKind>(head & 0x7F);
        PayloadReader* values = &pcs;
        if (r.kind == protocol::RecordKind::kArc) {
            values = &arcs;
            from_ = address(from_, unzigzag(arcs.varint()));
            self_ = address(self_, unzigzag(arcs.varint()));
            r.from_pc = static_cast<std::uint32_t>(from_);
            r.self_pc = static_cast<std::uint32_t>(self_);
        } else if (r.kind == protocol::RecordKind::kPcSample) {
            pc_ = address(pc_, unzigzag(pcs.varint()));
            r.self_pc = static_cast<std::uint32_t>(pc_);
        } else {
            throw StorageError("corrupt block: unknown record kind");
        }
        if (head & 0x80) {
            const std::uint64_t count = values->varint();
            if (count > 0xFFFFFFFFu) throw StorageError("corrupt block: count out of range");
            r.count = static_cast<std::uint32_t>(count);
        }
        return r;
    }

  private:
    // The previous address plus a stored delta; both stay within 32 bits, checked before the
    // sum so a damaged delta cannot overflow it.
    static std::int64_t address(std::int64_t previous, std::int64_t delta) {
        constexpr std::int64_t kMax = 0xFFFFFFFF;
        if (delta < -kMax || delta > kMax || previous + delta < 0 || previous + delta > kMax)
            throw StorageError("corrupt block: address out of range");
        return previous + delta;
    }
    std::int64_t from_ = 0, self_ = 0, pc_ = 0;
};

std::vector<std::uint8_t> encode_record_block(std::span<const RecordChunkView> chunks) {
    std::vector<std::uint8_t> payload = index_of(
        chunks, [](const RecordChunkView& c) { return c.records.size(); },
        [](const RecordChunkView&, std::vector<std::uint8_t>&) {});
    std::size_t total = 0;
    for (const auto& c : chunks) total += c.records.size();
    // Heads straight into the payload, each kind's values into a scratch buffer of its own with
    // room for the most a record can take (no bounds check, no clearing per byte), then
    // appended: the arcs' length, the arcs', the samples'.
    const std::size_t index_bytes = payload.size();
    payload.resize(index_bytes + total);
    // Grown, never shrunk, and never cleared: only the pages written become resident (an
    // import's large chunks would otherwise fault in all of twice their worst case).
    thread_local std::unique_ptr<std::uint8_t[]> scratch;
    thread_local std::size_t scratch_size = 0;
    const std::size_t room = total * RecordDeltas::kMaxValueBytes;
    if (!scratch || scratch_size < 2 * room) {
        scratch_size = std::max<std::size_t>(2 * room, 1);
        scratch.reset(new std::uint8_t[scratch_size]);
    }
    std::uint8_t* head = payload.data() + index_bytes;
    std::uint8_t* const arcs_begin = scratch.get();
    std::uint8_t* const pcs_begin = arcs_begin + room;
    std::uint8_t* arcs = arcs_begin;
    std::uint8_t* pcs = pcs_begin;
    RecordDeltas deltas;
    for (const auto& c : chunks) {
        for (const auto& r : c.records) deltas.put(r, head++, arcs, pcs);
    }
    put_varint(payload, static_cast<std::uint64_t>(arcs - arcs_begin));
    payload.insert(payload.end(), arcs_begin, arcs);
    payload.insert(payload.end(), pcs_begin, pcs);
    return compress(payload);
}

EncodedChunk encode_chunk(std::int64_t received_ns, std::span<const std::uint8_t> raw,
                          std::span<const protocol::Record> records, RawCodec codec) {
    EncodedChunk out;
    if (!raw.empty()) {
        const RawChunkView view = raw_chunk_view(received_ns, raw, 0, codec, records);
        out.raw_block = encode_raw_block(std::span(&view, 1));
        out.raw_bytes = raw.size();
    }
    if (!records.empty()) {
        const RecordChunkView view{received_ns, records};
        out.record_block = encode_record_block(std::span(&view, 1));
        out.records = records.size();
    }
    return out;
}

std::vector<DecodedRawChunk> decode_raw_block(std::span<const std::uint8_t> blob,
                                              std::int64_t row_received_ns, std::int64_t row_seq,
                                              BlockEncoding encoding) {
    const auto payload = decompress(blob);
    PayloadReader in(payload);
    std::vector<DecodedRawChunk> out;
    for (const auto& e :
         read_index(in, row_received_ns, row_seq, encoding, BlockKind::kRaw, payload.size())) {
        const auto bytes = in.take(e.stored());
        out.push_back(
            {e.received_ns, {bytes.begin(), bytes.end()}, e.seq, e.codec, e.derivation, e.length});
    }
    if (!in.done()) throw StorageError("corrupt block: bytes after the last chunk");
    return out;
}

std::vector<DecodedRecordChunk> decode_record_block(std::span<const std::uint8_t> blob,
                                                    std::int64_t row_received_ns,
                                                    std::int64_t row_seq, BlockEncoding encoding) {
    const auto payload = decompress(blob);
    PayloadReader in(payload);
    const auto index =
        read_index(in, row_received_ns, row_seq, encoding, BlockKind::kRecords, payload.size());
    std::uint64_t total = 0;
    for (const auto& e : index) {
        if (e.length > payload.size() || total + e.length > payload.size())  // no wrap-around
            throw StorageError("corrupt block: record count too large");
        total += e.length;
    }
    const auto heads = in.take(total);  // one head byte per record
    // Since encoding 3 the arcs' values and the samples' follow one another; before, one run.
    const bool columns = encoding == BlockEncoding::kZstdBlockColumns;
    PayloadReader arcs(columns ? in.take(in.varint_within()) : in.rest());
    PayloadReader samples(in.rest());
    PayloadReader& pcs = columns ? samples : arcs;
    RecordDeltas deltas;
    std::vector<DecodedRecordChunk> out;
    out.reserve(index.size());
    std::size_t at = 0;
    for (const auto& e : index) {
        DecodedRecordChunk chunk{e.received_ns, {}, e.seq};
        chunk.records.reserve(e.length);
        for (std::uint64_t i = 0; i < e.length; ++i)
            chunk.records.push_back(deltas.get(heads[at++], arcs, pcs));
        out.push_back(std::move(chunk));
    }
    if (!arcs.done() || !samples.done())
        throw StorageError("corrupt block: bytes after the last record");
    return out;
}

std::vector<std::uint8_t> encode_sums_block(const gmon::Aggregate& sums) {
    std::vector<std::uint8_t> payload;
    payload.reserve((sums.distinct_arcs() + sums.distinct_pcs()) * 5 + 16);
    const auto arcs = sums.arcs();
    put_varint(payload, arcs.size());
    std::uint64_t from = 0, self = 0;
    for (const auto& a : arcs) {
        put_varint(payload, zigzag(wrapping_sub(static_cast<std::int64_t>(a.from_pc),
                                                static_cast<std::int64_t>(from))));
        put_varint(payload, zigzag(wrapping_sub(static_cast<std::int64_t>(a.self_pc),
                                                static_cast<std::int64_t>(self))));
        put_varint(payload, a.count);
        from = a.from_pc;
        self = a.self_pc;
    }
    const auto pcs = sums.pc_samples();
    put_varint(payload, pcs.size());
    std::uint64_t pc = 0;
    for (const auto& p : pcs) {
        put_varint(payload, p.pc - pc);  // sorted: never negative
        put_varint(payload, p.count);
        pc = p.pc;
    }
    return compress(payload);
}

SumsBlockReader::SumsBlockReader(std::span<const std::uint8_t> blob,
                                 std::vector<std::uint8_t>& payload) {
    decompress_into(blob, payload);
    at_ = payload.data();
    end_ = payload.data() + payload.size();
    arcs_left_ = varint();
    if (arcs_left_ > payload.size()) throw StorageError("corrupt sums: arc count too large");
}

// A block's varints are mostly one byte (deltas between neighbouring addresses, small counts).
inline std::uint64_t SumsBlockReader::varint() {
    if (at_ < end_ && *at_ < 0x80) return *at_++;
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (at_ >= end_) throw StorageError("corrupt block: index cut short");
        const std::uint8_t b = *at_++;
        v |= static_cast<std::uint64_t>(b & 0x7F) << shift;
        if (!(b & 0x80)) return v;
    }
    throw StorageError("corrupt block: varint too long");
}

std::size_t SumsBlockReader::arcs(std::span<gmon::ArcCount> out) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(arcs_left_, out.size()));
    for (std::size_t i = 0; i < n; ++i) {
        from_ = wrapping_add(from_, unzigzag(varint()));
        self_ = wrapping_add(self_, unzigzag(varint()));
        out[i] = {static_cast<std::uint64_t>(from_), static_cast<std::uint64_t>(self_), varint()};
    }
    arcs_left_ -= n;
    return n;
}

void SumsBlockReader::start_pcs() {
    while (arcs_left_ > 0) {  // arcs not asked for are skipped
        gmon::ArcCount skipped[64];
        arcs(skipped);
    }
    pcs_started_ = true;
    pcs_left_ = varint();
    if (pcs_left_ > static_cast<std::uint64_t>(end_ - at_))
        throw StorageError("corrupt sums: PC count too large");
}

std::size_t SumsBlockReader::pcs(std::span<gmon::PcCount> out) {
    if (!pcs_started_) start_pcs();
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(pcs_left_, out.size()));
    for (std::size_t i = 0; i < n; ++i) {
        pc_ += varint();  // sorted: never negative
        out[i] = {pc_, varint()};
    }
    pcs_left_ -= n;
    if (pcs_left_ == 0 && at_ != end_) throw StorageError("corrupt sums: bytes after the last PC");
    return n;
}

void read_sums_block(std::span<const std::uint8_t> blob, SumsBlock& into) {
    // Kept per thread: a window reads a slice's megabyte after another, and fresh pages fault.
    thread_local std::vector<std::uint8_t> payload;
    SumsBlockReader in(blob, payload);
    into.arcs.resize(static_cast<std::size_t>(in.arcs_left()));
    in.arcs(into.arcs);
    in.pcs({});  // reads the PC count
    into.pcs.resize(static_cast<std::size_t>(in.pcs_left()));
    in.pcs(into.pcs);
}

void add_sums_block(std::span<const std::uint8_t> blob, gmon::Aggregate& into) {
    SumsBlock block;
    read_sums_block(blob, block);
    if (into.empty()) {
        // A whole aggregate read back: its table sized once, its PCs kept as sorted.
        into.reserve(block.arcs.size(), 0);
        for (const auto& a : block.arcs) into.add_arc(a.from_pc, a.self_pc, a.count);
        const bool sorted = std::adjacent_find(block.pcs.begin(), block.pcs.end(),
                                               [](const auto& a, const auto& b) {
                                                   return a.pc >= b.pc;
                                               }) == block.pcs.end();
        if (sorted) return into.adopt_sorted_pcs(std::move(block.pcs));
        for (const auto& p : block.pcs) into.add_pc(p.pc, p.count);
        return;
    }
    for (const auto& a : block.arcs) into.add_arc(a.from_pc, a.self_pc, a.count);
    for (const auto& p : block.pcs) into.add_pc(p.pc, p.count);
}

}  // namespace rackprof::storage
