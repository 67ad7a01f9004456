#include "gmon/gmon_reader.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
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

// Where the bins of each histogram read lie (parallel to GmonData::histograms), when they
// are left in place rather than read.
using BinsFound = std::vector<BinsInPlace>;

void read_bins(Cursor& in, std::uint64_t count, Histogram& h, BinsFound* in_place) {
    in.need(count * 2, "histogram bins");
    if (in_place) {
        in_place->push_back({in.offset(), count});
        in.seek(in.offset() + count * 2, "histogram bins");
        return;
    }
    h.bins.resize(count);
    for (auto& bin : h.bins) bin = in.uint(2, "histogram bin");
}

GmonData parse_gnu(Cursor& in, const TargetLayout& layout, BinsFound* in_place) {
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
            read_bins(in, nbins, h, in_place);
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

GmonData parse_bsd(Cursor& in, const TargetLayout& layout, BinsFound* in_place) {
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
    read_bins(in, (ncnt - header_size) / 2, h, in_place);
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

GmonData parse(std::span<const std::uint8_t> bytes, const TargetLayout& layout,
               BinsFound* in_place) {
    if (layout.addr_bytes != 4 && layout.addr_bytes != 8) {
        throw GmonFormatError("address size must be 4 or 8 bytes");
    }
    Cursor in(bytes, layout);
    if (bytes.size() >= 4 && std::memcmp(bytes.data(), "gmon", 4) == 0) {
        in.need(20, "header");
        return parse_gnu(in, layout, in_place);
    }
    if (bytes.empty()) throw GmonFormatError("gmon.out is empty");
    return parse_bsd(in, layout, in_place);
}

std::vector<ArcCount> summed_arcs(const std::vector<ArcCount>& arcs) {
    std::map<std::pair<std::uint64_t, std::uint64_t>, std::uint64_t> sums;
    for (const ArcCount& a : arcs) sums[{a.from_pc, a.self_pc}] += a.count;
    std::vector<ArcCount> out;
    out.reserve(sums.size());
    for (const auto& [key, count] : sums) out.push_back({key.first, key.second, count});
    return out;
}

// Histograms with an identical range are one histogram; partial overlaps are refused (gprof
// cannot read them). `bins_of(i)` is the i-th histogram's bin count.
template <typename Merge>
void merge_by_range(const std::vector<Histogram>& histograms,
                    const std::function<std::uint64_t(std::size_t)>& bins_of, Merge&& merge) {
    // (low, high) -> the first histogram of that range. The ranges held never overlap, so in
    // order of their start they are in order of their end: only the last one that starts
    // before a new range ends can overlap it (a file may hold tens of thousands of them).
    std::map<std::pair<std::uint64_t, std::uint64_t>, std::size_t> firsts;
    for (std::size_t i = 0; i < histograms.size(); ++i) {
        const Histogram& h = histograms[i];
        const std::pair range{h.low_pc, h.high_pc};
        if (const auto same = firsts.find(range); same != firsts.end()) {
            if (bins_of(same->second) != bins_of(i)) {
                throw GmonFormatError("histograms with the same range have different bin counts");
            }
            merge(i, same->second);
            continue;
        }
        const auto after = firsts.lower_bound({h.high_pc, 0});
        if (after != firsts.begin() && h.low_pc < std::prev(after)->first.second) {
            throw GmonFormatError("histogram ranges overlap partially (gprof cannot read this)");
        }
        firsts.emplace(range, i);
        merge(i, std::nullopt);
    }
}

}  // namespace

GmonData parse_gmon(std::span<const std::uint8_t> bytes, const TargetLayout& layout) {
    return parse(bytes, layout, nullptr);
}

GmonIndex index_gmon(std::span<const std::uint8_t> bytes, const TargetLayout& layout) {
    BinsFound found;
    GmonData data = parse(bytes, layout, &found);
    GmonIndex index;
    index.layout = data.layout;
    index.format = data.format;
    index.arcs = summed_arcs(data.arcs);
    std::map<std::size_t, std::size_t> merged_at;  // first histogram of a range -> its index
    merge_by_range(
        data.histograms, [&](std::size_t i) { return found[i].count; },
        [&](std::size_t i, std::optional<std::size_t> into) {
            if (!into) {
                merged_at[i] = index.histograms.size();
                index.histograms.push_back({data.histograms[i], found[i].count, {found[i]}});
            } else {
                index.histograms[merged_at.at(*into)].copies.push_back(found[i]);
            }
        });
    std::sort(index.histograms.begin(), index.histograms.end(),
              [](const HistogramInPlace& a, const HistogramInPlace& b) {
                  return a.header.low_pc < b.header.low_pc;
              });
    return index;
}

std::uint64_t bin_in_place(std::span<const std::uint8_t> bytes, const HistogramInPlace& histogram,
                           std::uint64_t index, ByteOrder order) {
    std::uint64_t sum = 0;
    for (const BinsInPlace& copy : histogram.copies)
        sum += get_uint(bytes.data() + copy.offset + 2 * index, 2, order);
    return sum;
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
    data.arcs = summed_arcs(data.arcs);
    std::vector<Histogram> merged;
    std::map<std::size_t, std::size_t> merged_at;  // first histogram of a range -> its index
    merge_by_range(
        data.histograms,
        [&](std::size_t i) {  // a first histogram's bins have moved into `merged`
            const auto at = merged_at.find(i);
            return at == merged_at.end() ? data.histograms[i].bins.size()
                                         : merged[at->second].bins.size();
        },
        [&](std::size_t i, std::optional<std::size_t> into) {
            if (!into) {
                merged_at[i] = merged.size();
                merged.push_back(std::move(data.histograms[i]));  // its range stays behind
                return;
            }
            Histogram& same = merged[merged_at.at(*into)];
            const Histogram& h = data.histograms[i];
            for (std::size_t b = 0; b < h.bins.size(); ++b) same.bins[b] += h.bins[b];
        });
    std::sort(merged.begin(), merged.end(),
              [](const Histogram& a, const Histogram& b) { return a.low_pc < b.low_pc; });
    data.histograms = std::move(merged);
    return data;
}

}  // namespace rackprof::gmon
