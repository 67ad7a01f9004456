#include "protocol/legacy_format.h"

#include <stdexcept>

namespace rackprof::protocol {

void validate(const LegacyOptions& options) {
    if (options.addr_bytes != 3 && options.addr_bytes != 4) {
        throw std::invalid_argument("address width must be 3 or 4 bytes, not " +
                                    std::to_string(options.addr_bytes));
    }
}

namespace {
void put_be(std::uint32_t value, int width, std::vector<std::uint8_t>& out) {
    for (int shift = 8 * (width - 1); shift >= 0; shift -= 8) {
        out.push_back(static_cast<std::uint8_t>(value >> shift));
    }
}
}  // namespace

void encode_legacy(const Record& record, int addr_bytes, std::vector<std::uint8_t>& out) {
    for (std::uint32_t i = 0; i < record.count; ++i) {
        if (record.kind == RecordKind::kArc) {
            out.push_back(kLegacyArcTag);
            put_be(record.from_pc, addr_bytes, out);
        } else {
            out.push_back(kLegacyPcTag);
        }
        put_be(record.self_pc, addr_bytes, out);
    }
}

namespace {
template <int kWidth>
std::uint8_t* encode_run(std::span<const Record> records, std::uint8_t* out) {
    const auto put = [](std::uint32_t value, std::uint8_t* at) {
        for (int k = kWidth - 1; k >= 0; --k, value >>= 8) at[k] = static_cast<std::uint8_t>(value);
    };
    for (const Record& r : records) {
        if (r.kind == RecordKind::kArc) {
            out[0] = kLegacyArcTag;
            put(r.from_pc, out + 1);
            put(r.self_pc, out + 1 + kWidth);
            out += 1 + 2 * kWidth;
        } else {
            out[0] = kLegacyPcTag;
            put(r.self_pc, out + 1);
            out += 1 + kWidth;
        }
    }
    return out;
}
}  // namespace

std::uint8_t* encode_legacy_run(std::span<const Record> records, int addr_bytes,
                                std::uint8_t* out) {
    return addr_bytes == 4 ? encode_run<4>(records, out) : encode_run<3>(records, out);
}

void append_hex(std::span<const std::uint8_t> bytes, std::string& out) {
    static constexpr char kDigits[] = "0123456789ABCDEF";
    const std::size_t start = out.size();
    out.resize(start + 2 * bytes.size());
    char* dst = out.data() + start;
    for (std::uint8_t b : bytes) {
        *dst++ = kDigits[b >> 4];
        *dst++ = kDigits[b & 0xF];
    }
}

}  // namespace rackprof::protocol
