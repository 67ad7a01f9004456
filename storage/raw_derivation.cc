#include "storage/raw_derivation.h"

#include <cstring>
#include <memory>
#include <string>

#include "protocol/legacy_format.h"
#include "storage/storage_error.h"

namespace rackprof::storage {
namespace {

int addr_bytes_of(RawCodec codec) {
    return codec == RawCodec::kLegacy4 ? 4 : 3;
}

// The records' wire bytes in a buffer this thread keeps (the writer derives chunk after chunk).
std::span<const std::uint8_t> encoded(RawCodec codec, std::span<const protocol::Record> records) {
    thread_local std::unique_ptr<std::uint8_t[]> buffer;
    thread_local std::size_t room = 0;
    const int width = addr_bytes_of(codec);
    const std::size_t need =
        records.size() * protocol::legacy_record_size(protocol::kLegacyArcTag, width);
    if (room < need) {
        buffer.reset(new std::uint8_t[need]);
        room = need;
    }
    const std::uint8_t* end = protocol::encode_legacy_run(records, width, buffer.get());
    return {buffer.get(), static_cast<std::size_t>(end - buffer.get())};
}

}  // namespace

RawCodec raw_codec_of(const protocol::WireSpec& wire) {
    if (wire.protocol != "legacy" || wire.format != "bin") return RawCodec::kVerbatim;
    if (wire.addr_bytes == 3) return RawCodec::kLegacy3;
    if (wire.addr_bytes == 4) return RawCodec::kLegacy4;
    return RawCodec::kVerbatim;
}

std::optional<RawDerivation> derive_raw(RawCodec codec, std::span<const std::uint8_t> raw,
                                        std::span<const protocol::Record> records) {
    if (codec == RawCodec::kVerbatim || records.empty() || raw.empty()) return std::nullopt;
    const auto wire = encoded(codec, records);
    // The decoder holds a whole record back until the byte after it shows whether another
    // starts there, so a chunk's tail (and the next one's skipped head) can be a record and a
    // part of the next: both are shorter than two records. Each tail is tried.
    const std::size_t reach =
        2 * protocol::legacy_record_size(protocol::kLegacyArcTag, addr_bytes_of(codec));
    for (std::size_t suffix = 0; suffix < reach && suffix <= raw.size(); ++suffix) {
        const std::size_t body = raw.size() - suffix;
        if (body > wire.size()) continue;
        const std::size_t skip = wire.size() - body;
        if (skip >= reach) continue;
        if (std::memcmp(raw.data(), wire.data() + skip, body) == 0)
            return RawDerivation{static_cast<std::uint32_t>(skip),
                                 static_cast<std::uint32_t>(suffix)};
    }
    return std::nullopt;
}

std::vector<std::uint8_t> rebuild_raw(RawCodec codec, RawDerivation derivation,
                                      std::span<const protocol::Record> records,
                                      std::span<const std::uint8_t> suffix_bytes,
                                      std::size_t length) {
    if (codec == RawCodec::kVerbatim || static_cast<std::uint8_t>(codec) > kLastRawCodec)
        throw StorageError("corrupt block: unknown raw codec");
    const auto wire = encoded(codec, records);
    if (suffix_bytes.size() != derivation.suffix || derivation.skip > wire.size() ||
        wire.size() - derivation.skip + derivation.suffix != length)
        throw StorageError("corrupt block: a chunk's records do not rebuild its " +
                           std::to_string(length) + " raw bytes");
    std::vector<std::uint8_t> out;
    out.reserve(length);
    out.insert(out.end(), wire.begin() + derivation.skip, wire.end());
    out.insert(out.end(), suffix_bytes.begin(), suffix_bytes.end());
    return out;
}

}  // namespace rackprof::storage
