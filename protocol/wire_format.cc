#include "protocol/wire_format.h"

#include <array>
#include <stdexcept>

#include "protocol/framed_decoder.h"
#include "protocol/legacy_decoder.h"
#include "protocol/named_table.h"
#include "protocol/swo_decoder.h"

namespace rackprof::protocol {

namespace {

std::unique_ptr<StreamDecoder> make_legacy(const WireSpec& spec) {
    if (spec.format != "bin" && spec.format != "hex")
        throw std::invalid_argument("unknown format '" + spec.format + "' (bin or hex)");
    return std::make_unique<LegacyDecoder>(LegacyOptions{
        spec.addr_bytes, spec.format == "hex" ? LegacyEncoding::kHex : LegacyEncoding::kBinary,
        spec.code_range});
}

std::unique_ptr<StreamDecoder> make_framed(const WireSpec& spec) {
    return std::make_unique<FramedDecoder>(FramedOptions{spec.addr_bytes});
}

std::unique_ptr<StreamDecoder> make_swo(const WireSpec& spec) {
    SwoOptions swo = spec.swo;
    swo.code_range = spec.code_range;
    std::unique_ptr<StreamDecoder> framed;
    if (swo.framed_port) framed = make_framed(spec);
    return std::make_unique<SwoDecoder>(swo, std::move(framed));
}

constexpr std::array<std::string_view, 5> kSwoKeys = {"tpiu", "tpiu_stream", "framed_port",
                                                      "orbstat_port", "console_port"};

const std::array<WireFormat, 3> kFormats = {{
    {"legacy",
     "the thesis' format: 'A' from to, 'P' pc; binary or hex-ASCII",
     3,
     WireTraits{.text_encoding = true},
     {},
     make_legacy},
    {"framed",
     "rackprof framed protocol v1: COBS frames, CRC-16, sequence numbers",
     4,
     WireTraits{.frames = true},
     {},
     make_framed},
    {"itm", "SWO: ITM/DWT packets, raw or in TPIU frames", 4,
     WireTraits{.frames = true, .swo = true}, kSwoKeys, make_swo},
}};

}  // namespace

std::span<const WireFormat> wire_formats() {
    return kFormats;
}

const WireFormat* find_wire_format(std::string_view name) {
    return find_named(wire_formats(), name);
}

std::string wire_format_names(std::string_view last_separator, std::string_view quote) {
    return join_names(wire_formats(), last_separator, quote);
}

const WireFormat& wire_format(std::string_view name) {
    if (const auto* f = find_wire_format(name)) return *f;
    throw std::invalid_argument("unknown protocol '" + std::string(name) + "' (" +
                                wire_format_names() + ")");
}

bool accepts_key(const WireFormat& format, std::string_view key) {
    for (const auto k : format.own_keys) {
        if (k == key) return true;
    }
    return false;
}

std::string protocols_with_key(std::string_view key) {
    std::string out;
    for (const auto& f : kFormats) {
        if (!accepts_key(f, key)) continue;
        out += (out.empty() ? "\"" : " or \"") + std::string(f.name) + "\"";
    }
    return out;
}

std::unique_ptr<StreamDecoder> make_decoder(const WireSpec& spec) {
    const WireFormat& format = wire_format(spec.protocol);
    if (!format.traits.text_encoding && spec.format != "bin")
        throw std::invalid_argument("the " + spec.protocol +
                                    " protocol is binary: format must be \"bin\"");
    return format.make_decoder(spec);
}

std::map<std::uint16_t, ExceptionStats> exceptions_of(const StreamDecoder& decoder) {
    const auto* swo = dynamic_cast<const SwoDecoder*>(&decoder);
    return swo ? swo->exceptions() : std::map<std::uint16_t, ExceptionStats>{};
}

}  // namespace rackprof::protocol
