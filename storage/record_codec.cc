#include "storage/record_codec.h"

#include "storage/storage_error.h"

namespace rackprof::storage {
namespace {

constexpr std::uint8_t kKindMask = 0x7F;
constexpr std::uint8_t kHasCount = 0x80;

std::uint32_t get32(const std::uint8_t* p) {
    return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
           static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}

}  // namespace

std::vector<std::uint8_t> pack_records(std::span<const protocol::Record> records) {
    // Sized for the worst case and cut back: a byte-wise push_back costs more than the packing.
    std::vector<std::uint8_t> out(records.size() * 13);
    std::uint8_t* p = out.data();
    auto put = [&p](std::uint32_t v) {
        p[0] = static_cast<std::uint8_t>(v);
        p[1] = static_cast<std::uint8_t>(v >> 8);
        p[2] = static_cast<std::uint8_t>(v >> 16);
        p[3] = static_cast<std::uint8_t>(v >> 24);
        p += 4;
    };
    for (const auto& r : records) {
        *p++ = static_cast<std::uint8_t>(static_cast<std::uint8_t>(r.kind) |
                                         (r.count != 1 ? kHasCount : 0));
        if (r.count != 1) put(r.count);
        if (r.kind == protocol::RecordKind::kArc) put(r.from_pc);
        put(r.self_pc);
    }
    out.resize(static_cast<std::size_t>(p - out.data()));
    return out;
}

std::vector<protocol::Record> unpack_records(std::span<const std::uint8_t> blob) {
    std::vector<protocol::Record> out;
    out.reserve(blob.size() / 5);
    std::size_t i = 0;
    auto need = [&](std::size_t n) {
        if (i + n > blob.size()) throw StorageError("corrupt record batch: truncated");
    };
    while (i < blob.size()) {
        const std::uint8_t head = blob[i++];
        protocol::Record r;
        r.kind = static_cast<protocol::RecordKind>(head & kKindMask);
        if (r.kind != protocol::RecordKind::kArc && r.kind != protocol::RecordKind::kPcSample) {
            throw StorageError("corrupt record batch: unknown kind");
        }
        if (head & kHasCount) {
            need(4);
            r.count = get32(&blob[i]);
            i += 4;
        }
        if (r.kind == protocol::RecordKind::kArc) {
            need(4);
            r.from_pc = get32(&blob[i]);
            i += 4;
        }
        need(4);
        r.self_pc = get32(&blob[i]);
        i += 4;
        out.push_back(r);
    }
    return out;
}

}  // namespace rackprof::storage
