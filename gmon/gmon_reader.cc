#include "gmon/gmon_reader.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include "gmon/byte_io.h"

namespace rackprof::gmon {

namespace {

constexpr std::uint32_t kBsd44Version = 0x00051879;

// A bounds-checked cursor: every read names what it was reading when the file ends.
class Cursor {
  public:
    Cursor(std::span<const std::uint8_t> bytes, const TargetLayout& layout)
        : bytes_(bytes), layout_(layout) {}

    std::size_t offset() const { return offset_; }
    std::size_t left() const { return bytes_.size() - offset_; }
    bool at_end() const { return offset_ == bytes_.size(); }
    // Past the end would make left() wrap and every later bounds check pass.
    void seek(std::size_t offset, const char* what) {
        if (offset > bytes_.size()) {
            throw GmonFormatError("gmon.out is truncated: " + std::string(what) +
                                  " ends at offset " + std::to_string(offset) + ", the file at " +
                                  std::to_string(bytes_.size()));
        }
        offset_ = offset;
    }

    std::uint64_t uint(int size, const char* what) {
        need(static_cast<std::size_t>(size), what);
        const std::uint64_t v = get_uint(bytes_.data() + offset_, size, layout_.order);
        offset_ += static_cast<std::size_t>(size);
        return v;
    }
    std::uint64_t address(const char* what) { return uint(layout_.addr_bytes, what); }
    std::uint8_t byte(const char* what) { return static_cast<std::uint8_t>(uint(1, what)); }
    std::string text(std::size_t size, const char* what) {
        need(size, what);
        const char* p = reinterpret_cast<const char*>(bytes_.data() + offset_);
        offset_ += size;
        return std::string(p, strnlen(p, size));
    }
    void need(std::size_t size, const char* what) const {
        if (left() < size) {
            throw GmonFormatError("gmon.out is truncated: " + std::string(what) + " at offset " +
                                  std::to_string(offset_) + " needs " + std::to_string(size) +
                                  " bytes, " + std::to_string(left()) + " left");
        }
    }

  private:
    std::span<const std::uint8_t> bytes_;
    TargetLayout layout_;
    std::size_t offset_ = 0;
};

void read_bins(Cursor& in, std::uint64_t count, Histogram& h) {
    in.need(count * 2, "histogram bins");
    h.bins.resize(count);
    for (auto& bin : h.bins) bin = in.uint(2, "histogram bin");
}

GmonData parse_gnu(Cursor& in, const TargetLayout& layout) {
    GmonData data;
    data.layout = layout;
    data.format = GmonFormat::kGnu;
    in.seek(4, "header");
    const std::uint64_t version = in.uint(4, "version");
    if (version != 1) {
        throw GmonFormatError("gmon.out version " + std::to_string(version) +
                              " is not supported (expected 1); wrong byte order?");
    }
    in.seek(20, "header");
    while (!in.at_end()) {
        const std::size_t at = in.offset();
        const std::uint8_t tag = in.byte("record tag");
        if (tag == 0) {
            Histogram h;
            h.low_pc = in.address("histogram low_pc");
            h.high_pc = in.address("histogram high_pc");
            const std::uint64_t nbins = in.uint(4, "histogram size");
            h.prof_rate = static_cast<std::uint32_t>(in.uint(4, "histogram rate"));
            h.dimension = in.text(15, "histogram dimension");
            h.dimension_abbrev = static_cast<char>(in.byte("histogram dimension"));
            if (h.high_pc < h.low_pc) {
                throw GmonFormatError("histogram at offset " + std::to_string(at) +
                                      " has high_pc below low_pc");
            }
            read_bins(in, nbins, h);
            data.histograms.push_back(std::move(h));
        } else if (tag == 1) {
            ArcCount a;
            a.from_pc = in.address("arc from_pc");
            a.self_pc = in.address("arc self_pc");
            a.count = in.uint(4, "arc count");
            data.arcs.push_back(a);
        } else if (tag == 2) {
            const std::uint64_t n = in.uint(4, "basic-block count");
            in.need(n * static_cast<std::uint64_t>(layout.addr_bytes + layout.addr_bytes),
                    "basic blocks");
            in.seek(in.offset() + n * 2 * static_cast<std::size_t>(layout.addr_bytes),
                    "basic blocks");
        } else {
            throw GmonFormatError("unknown gmon.out record tag " + std::to_string(tag) +
                                  " at offset " + std::to_string(at));
        }
    }
    return data;
}

GmonData parse_bsd(Cursor& in, const TargetLayout& layout) {
    GmonData data;
    data.layout = layout;
    Histogram h;
    h.low_pc = in.address("header low_pc");
    h.high_pc = in.address("header high_pc");
    const std::uint64_t ncnt = in.uint(4, "header ncnt");
    std::size_t header_size = 3 * static_cast<std::size_t>(layout.addr_bytes);
    const std::uint64_t version = in.left() >= 4 ? in.uint(4, "header version") : 0;
    if (version == kBsd44Version) {
        data.format = GmonFormat::kBsd44;
        h.prof_rate = static_cast<std::uint32_t>(in.uint(4, "header profrate"));
        header_size = layout.addr_bytes == 4 ? 32 : 48;  // gprof's GMON_HDRSIZE_BSD44_32/64
    } else {
        data.format = GmonFormat::kBsd;
        h.prof_rate = 0;  // not recorded: the reader's caller decides (gprof uses the host's)
        header_size = layout.addr_bytes == 4 ? 12 : 24;  // old BSD header, padded on 64-bit
    }
    if (ncnt < header_size || h.high_pc < h.low_pc) {
        throw GmonFormatError(
            "not a gmon.out file: no \"gmon\" magic, and the BSD header is "
            "inconsistent (ncnt " +
            std::to_string(ncnt) + ")");
    }
    in.seek(header_size, "BSD header");
    read_bins(in, (ncnt - header_size) / 2, h);
    in.seek(header_size + (ncnt - header_size) / 2 * 2, "histogram bins");
    data.histograms.push_back(std::move(h));

    const std::size_t arc_size = 3 * static_cast<std::size_t>(layout.addr_bytes);
    if (in.left() % arc_size != 0) {
        throw GmonFormatError("gmon.out is truncated: " + std::to_string(in.left() % arc_size) +
                              " bytes of a partial call arc at the end");
    }
    while (!in.at_end()) {
        ArcCount a;
        a.from_pc = in.address("arc from_pc");
        a.self_pc = in.address("arc self_pc");
        a.count = in.address("arc count");  // pointer-sized in the BSD layouts
        data.arcs.push_back(a);
    }
    return data;
}

}  // namespace

GmonData parse_gmon(std::span<const std::uint8_t> bytes, const TargetLayout& layout) {
    if (layout.addr_bytes != 4 && layout.addr_bytes != 8) {
        throw GmonFormatError("address size must be 4 or 8 bytes");
    }
    Cursor in(bytes, layout);
    if (bytes.size() >= 4 && std::memcmp(bytes.data(), "gmon", 4) == 0) {
        in.need(20, "header");
        return parse_gnu(in, layout);
    }
    if (bytes.empty()) throw GmonFormatError("gmon.out is empty");
    return parse_bsd(in, layout);
}

GmonData read_gmon_file(const std::filesystem::path& path, const TargetLayout& layout) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot open " + path.string());
    std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(f)),
                                    std::istreambuf_iterator<char>());
    try {
        return parse_gmon(bytes, layout);
    } catch (const GmonFormatError& e) {
        throw GmonFormatError(path.string() + ": " + e.what());
    }
}

GmonData merge_duplicates(GmonData data) {
    std::map<std::pair<std::uint64_t, std::uint64_t>, std::uint64_t> arcs;
    for (const ArcCount& a : data.arcs) arcs[{a.from_pc, a.self_pc}] += a.count;
    data.arcs.clear();
    for (const auto& [key, count] : arcs) data.arcs.push_back({key.first, key.second, count});

    std::vector<Histogram> merged;
    for (Histogram& h : data.histograms) {
        auto same = std::find_if(merged.begin(), merged.end(), [&](const Histogram& m) {
            return m.low_pc == h.low_pc && m.high_pc == h.high_pc;
        });
        if (same == merged.end()) {
            for (const Histogram& m : merged) {
                if (h.low_pc < m.high_pc && m.low_pc < h.high_pc) {
                    throw GmonFormatError(
                        "histogram ranges overlap partially (gprof cannot read this)");
                }
            }
            merged.push_back(std::move(h));
            continue;
        }
        if (same->bins.size() != h.bins.size()) {
            throw GmonFormatError("histograms with the same range have different bin counts");
        }
        for (std::size_t i = 0; i < h.bins.size(); ++i) same->bins[i] += h.bins[i];
    }
    std::sort(merged.begin(), merged.end(),
              [](const Histogram& a, const Histogram& b) { return a.low_pc < b.low_pc; });
    data.histograms = std::move(merged);
    return data;
}

}  // namespace rackprof::gmon
