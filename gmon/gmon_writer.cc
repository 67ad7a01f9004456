#include "gmon/gmon_writer.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <system_error>

#include "gmon/byte_io.h"

namespace rackprof::gmon {

namespace {

constexpr std::uint8_t kTagTimeHist = 0;
constexpr std::uint8_t kTagCgArc = 1;
constexpr std::uint64_t kMaxBin = 0xFFFF;
constexpr std::uint64_t kMaxArcCount = 0xFFFFFFFF;

template <class Bytes>
void write_histogram(const Histogram& h, const TargetLayout& t, Bytes& out) {
    const std::uint64_t peak = h.bins.empty() ? 0 : *std::max_element(h.bins.begin(), h.bins.end());
    // At least one record even when empty, so gprof knows the range and rate.
    const std::uint64_t records = std::max<std::uint64_t>(1, (peak + kMaxBin - 1) / kMaxBin);
    // dimen[15]: NUL-padded, not necessarily NUL-terminated.
    std::array<std::uint8_t, 15> dimension{};
    for (std::size_t i = 0; i < dimension.size() && i < h.dimension.size(); ++i) {
        dimension[i] = static_cast<std::uint8_t>(h.dimension[i]);
    }
    for (std::uint64_t r = 0; r < records; ++r) {
        out.push_back(static_cast<typename Bytes::value_type>(kTagTimeHist));
        put_uint(out, h.low_pc, t.addr_bytes, t.order);
        put_uint(out, h.high_pc, t.addr_bytes, t.order);
        put_uint(out, h.bins.size(), 4, t.order);
        put_uint(out, h.prof_rate, 4, t.order);
        for (std::uint8_t c : dimension) out.push_back(static_cast<typename Bytes::value_type>(c));
        out.push_back(static_cast<typename Bytes::value_type>(h.dimension_abbrev));
        const std::uint64_t already = r * kMaxBin;
        for (std::uint64_t bin : h.bins) {
            const std::uint64_t left = bin > already ? bin - already : 0;
            put_uint(out, std::min(left, kMaxBin), 2, t.order);
        }
    }
}

// The file's size before it is written. Wide counts take repeated records, so an absurd one
// (a corrupt import: a 64-bit BSD arc count, a PC_N of 2^32 - 1 many times) would otherwise
// mean terabytes written one record at a time.
double file_bytes(const GmonData& data) {
    const double addr = data.layout.addr_bytes;
    double bytes = 20;
    for (const Histogram& h : data.histograms) {
        const std::uint64_t peak =
            h.bins.empty() ? 0 : *std::max_element(h.bins.begin(), h.bins.end());
        const double records = std::max(1.0, std::ceil(static_cast<double>(peak) / kMaxBin));
        bytes += records * (1 + 2 * addr + 4 + 4 + 15 + 1 + 2.0 * h.bins.size());
    }
    for (const ArcCount& a : data.arcs)
        bytes += std::ceil(static_cast<double>(a.count) / kMaxArcCount) * (1 + 2 * addr + 4);
    return bytes;
}

// The arc records, a count wider than 32 bits in several; returns the byte after the last.
template <int AddrBytes, ByteOrder Order>
std::uint8_t* store_arcs(std::uint8_t* p, const std::vector<ArcCount>& arcs) {
    for (const ArcCount& a : arcs) {
        for (std::uint64_t left = a.count; left > 0;) {
            const std::uint64_t n = std::min(left, kMaxArcCount);
            *p++ = kTagCgArc;
            p = store_uint<AddrBytes, Order>(p, a.from_pc);
            p = store_uint<AddrBytes, Order>(p, a.self_pc);
            p = store_uint<4, Order>(p, n);
            left -= n;
        }
    }
    return p;
}

template <class Bytes>
Bytes serialize_as(const GmonData& data) {
    const TargetLayout& t = data.layout;
    const double bytes = file_bytes(data);
    if (bytes > kMaxGmonFileBytes) {
        throw std::length_error("gmon.out would take " + std::to_string(bytes / (1 << 20)) +
                                " MiB: counts too wide for its 16-bit bins and 32-bit arc counts");
    }
    Bytes out;
    out.reserve(static_cast<std::size_t>(bytes));  // exactly: it grows by no copy
    for (char c : {'g', 'm', 'o', 'n'}) out.push_back(static_cast<typename Bytes::value_type>(c));
    put_uint(out, 1, 4, t.order);                   // GMON_VERSION
    for (int i = 0; i < 12; ++i) out.push_back(0);  // spare
    for (const Histogram& h : data.histograms) write_histogram(h, t, out);
    // The arcs (most of a large file) are stored in place rather than appended byte by byte.
    const std::size_t at = out.size();
    out.resize(static_cast<std::size_t>(bytes));
    auto* const first = reinterpret_cast<std::uint8_t*>(out.data()) + at;
    const std::uint8_t* end = nullptr;
    if (t.addr_bytes == 4 && t.order == ByteOrder::kLittle)
        end = store_arcs<4, ByteOrder::kLittle>(first, data.arcs);
    else if (t.addr_bytes == 4)
        end = store_arcs<4, ByteOrder::kBig>(first, data.arcs);
    else if (t.order == ByteOrder::kLittle)
        end = store_arcs<8, ByteOrder::kLittle>(first, data.arcs);
    else
        end = store_arcs<8, ByteOrder::kBig>(first, data.arcs);
    if (end != reinterpret_cast<const std::uint8_t*>(out.data()) + out.size())
        throw std::logic_error("gmon.out: arc records do not fill the size computed for them");
    return out;
}

}  // namespace

std::vector<std::uint8_t> serialize_gmon(const GmonData& data) {
    return serialize_as<std::vector<std::uint8_t>>(data);
}

std::string serialize_gmon_string(const GmonData& data) {
    return serialize_as<std::string>(data);
}

namespace {

// A device, FIFO or socket already at `path` (/dev/null, a pipe to another program) is written
// in place: renaming over it would replace it with a regular file.
bool is_special_file(const std::filesystem::path& path) {
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    return !ec && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status) &&
           !std::filesystem::is_directory(status);
}

void write_in_place(const std::filesystem::path& path, const std::vector<std::uint8_t>& bytes) {
    std::ofstream f(path, std::ios::binary);
    if (f) {
        f.write(reinterpret_cast<const char*>(bytes.data()),
                static_cast<std::streamsize>(bytes.size()));
        f.flush();
    }
    if (!f) {
        throw std::runtime_error("cannot write " + path.string() + ": " +
                                 std::generic_category().message(errno));
    }
}

}  // namespace

void write_file_atomically(const std::filesystem::path& path,
                           const std::vector<std::uint8_t>& bytes) {
    if (is_special_file(path)) return write_in_place(path, bytes);
    const std::filesystem::path tmp =
        path.string() + ".tmp-" + std::to_string(static_cast<long>(::getpid()));
    {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        if (!f) {
            throw std::runtime_error("cannot write " + path.string() + ": " +
                                     std::generic_category().message(errno));
        }
        f.write(reinterpret_cast<const char*>(bytes.data()),
                static_cast<std::streamsize>(bytes.size()));
        f.flush();
        if (!f) {
            const std::string why = std::generic_category().message(errno);
            f.close();
            std::error_code ignored;
            std::filesystem::remove(tmp, ignored);
            throw std::runtime_error("cannot write " + path.string() + ": " + why);
        }
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) {
        std::error_code ignored;
        std::filesystem::remove(tmp, ignored);
        throw std::runtime_error("cannot write " + path.string() + ": " + ec.message());
    }
}

}  // namespace rackprof::gmon
