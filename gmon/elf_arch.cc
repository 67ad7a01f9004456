#include "gmon/elf_arch.h"

#include <cstdint>
#include <optional>

namespace rackprof::gmon {

namespace {

constexpr int kEmArm = 40, kEmRiscv = 243, kEmX86_64 = 62;

// A bounded reader of the attribute section's fields (all little-endian here).
struct Cursor {
    std::string_view bytes;
    std::size_t at = 0;
    bool done() const { return at >= bytes.size(); }
    std::optional<std::uint64_t> uleb() {
        std::uint64_t v = 0;
        for (int shift = 0; shift < 64 && at < bytes.size(); shift += 7) {
            const auto b = static_cast<std::uint8_t>(bytes[at++]);
            v |= std::uint64_t{b & 0x7Fu} << shift;
            if (!(b & 0x80u)) return v;
        }
        return std::nullopt;
    }
    std::optional<std::string_view> ntbs() {
        const std::size_t end = bytes.find('\0', at);
        if (end == std::string_view::npos) return std::nullopt;
        const std::string_view s = bytes.substr(at, end - at);
        at = end + 1;
        return s;
    }
    std::optional<std::uint32_t> u32() {
        if (bytes.size() - at < 4) return std::nullopt;
        std::uint32_t v = 0;
        for (int i = 3; i >= 0; --i)
            v = (v << 8) | static_cast<std::uint8_t>(bytes[at + static_cast<std::size_t>(i)]);
        at += 4;
        return v;
    }
};

// The file-scope attributes of `vendor`'s subsection, as (tag, number or text) through `on`.
// A tag's value is text where `is_text(tag)` says so, else a ULEB128 number.
template <typename IsText, typename On>
void file_attributes(std::string_view section, std::string_view vendor, IsText is_text, On on) {
    if (section.empty() || section[0] != 'A') return;
    Cursor c{section, 1};
    while (!c.done()) {
        const std::size_t start = c.at;
        const auto length = c.u32();
        if (!length || *length < 4 || *length > section.size() - start) return;
        Cursor sub{section.substr(0, start + *length), c.at};
        c.at = start + *length;
        const auto name = sub.ntbs();
        if (!name || *name != vendor) continue;
        while (!sub.done()) {
            const std::size_t tag_start = sub.at;
            const auto tag = sub.uleb();
            const auto size = sub.u32();
            if (!tag || !size || *size < 5 || *size > sub.bytes.size() - tag_start) return;
            Cursor attrs{sub.bytes.substr(0, tag_start + *size), sub.at};
            sub.at = tag_start + *size;
            if (*tag != 1) continue;  // Tag_File; sections and symbols are not the image's
            while (!attrs.done()) {
                const auto a = attrs.uleb();
                if (!a) return;
                if (is_text(*a)) {
                    const auto text = attrs.ntbs();
                    if (!text) return;
                    on(*a, 0, *text);
                } else {
                    const auto v = attrs.uleb();
                    if (!v) return;
                    on(*a, *v, std::string_view{});
                }
            }
        }
    }
}

std::string arm_arch(std::string_view section) {
    std::uint64_t arch = 0, profile = 0;
    // Tags 4, 5 and 67 are text, tag 32 (compatibility) a number and a text; from 33 up, odd
    // tags are text.
    const auto is_text = [](std::uint64_t tag) {
        return tag == 4 || tag == 5 || tag == 67 || (tag > 32 && (tag & 1));
    };
    file_attributes(section, "aeabi", is_text,
                    [&](std::uint64_t tag, std::uint64_t v, std::string_view) {
                        if (tag == 6) arch = v;
                        if (tag == 7) profile = v;
                    });
    switch (arch) {
        case 11:
        case 12:
            return "armv6-m";
        case 10:
            return profile == 'M' ? "armv7-m" : "";
        case 13:
            return "armv7e-m";
        case 16:
            return "armv8-m.base";
        case 17:
            return "armv8-m.main";
        case 21:
            return "armv8.1-m.main";
        default:
            return "";
    }
}

// "rv32i2p1_m2p0_a2p1_c2p0_zicsr2p0" -> "rv32imac": the base and its single-letter extensions.
std::string riscv_arch(std::string_view section) {
    std::string arch;
    file_attributes(
        section, "riscv", [](std::uint64_t tag) { return (tag & 1) != 0; },
        [&](std::uint64_t tag, std::uint64_t, std::string_view text) {
            if (tag == 5) arch = std::string(text);
        });
    if (arch.rfind("rv32", 0) != 0 && arch.rfind("rv64", 0) != 0) return "";
    std::string out = arch.substr(0, 4);
    for (std::size_t at = 4; at < arch.size();) {
        const std::size_t end = std::min(arch.find('_', at), arch.size());
        const char letter = arch[at];
        if (letter >= 'a' && letter <= 'y' && letter != 'x')
            out += letter;  // not z*, x*: many letters
        at = end + 1;
    }
    return out;
}

}  // namespace

std::string arch_of_attributes(int machine, std::string_view attributes) {
    if (machine == kEmArm) return arm_arch(attributes);
    if (machine == kEmRiscv) return riscv_arch(attributes);
    return "";
}

const char* machine_family(int machine) {
    switch (machine) {
        case kEmArm:
            return "arm";
        case kEmRiscv:
            return "riscv";
        case kEmX86_64:
            return "x86-64";
        default:
            return "";
    }
}

}  // namespace rackprof::gmon
