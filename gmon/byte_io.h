// Endian-aware integer reading and writing for gmon.out's target-order fields.
#pragma once

#include <cstdint>
#include <vector>

#include "gmon/gmon_data.h"

namespace rackprof::gmon {

// `Bytes`: std::vector<std::uint8_t>, or std::string for a body that goes out as it is.
template <class Bytes>
inline void put_uint(Bytes& out, std::uint64_t v, int bytes, ByteOrder order) {
    for (int i = 0; i < bytes; ++i) {
        const int shift = order == ByteOrder::kLittle ? 8 * i : 8 * (bytes - 1 - i);
        out.push_back(static_cast<typename Bytes::value_type>(v >> shift));
    }
}

// put_uint at a known place, its size and order fixed at compile time (a large file's records,
// stored into a buffer sized for them); returns the byte after.
template <int Bytes, ByteOrder Order>
inline std::uint8_t* store_uint(std::uint8_t* p, std::uint64_t v) {
    for (int i = 0; i < Bytes; ++i) {
        const int shift = Order == ByteOrder::kLittle ? 8 * i : 8 * (Bytes - 1 - i);
        p[i] = static_cast<std::uint8_t>(v >> shift);
    }
    return p + Bytes;
}

inline std::uint64_t get_uint(const std::uint8_t* p, int bytes, ByteOrder order) {
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) {
        const int index = order == ByteOrder::kLittle ? bytes - 1 - i : i;
        v = (v << 8) | p[index];
    }
    return v;
}

}  // namespace rackprof::gmon
