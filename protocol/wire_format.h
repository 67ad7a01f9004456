// The registry of wire formats: one entry per protocol a board can speak (its name, defaults,
// the board keys only it accepts, how to build its decoder). Configuration checks, boards,
// `convert`, imports and storage ask here; no other code compares protocol names. Adding a
// protocol is one entry in wire_format.cc plus its decoder.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "protocol/legacy_format.h"
#include "protocol/stream_decoder.h"
#include "protocol/swo_decoder.h"

namespace rackprof::protocol {

// A wire as a decoder needs it: the protocol by name and that protocol's settings.
struct WireSpec {
    WireSpec() = default;
    // swo last and optional, so the wires of the other protocols read as they always did.
    WireSpec(std::string protocol_name, std::string format_name, int width,
             std::optional<AddressRange> range, SwoOptions swo_options = {})
        : protocol(std::move(protocol_name)),
          format(std::move(format_name)),
          addr_bytes(width),
          code_range(range),
          swo(swo_options) {}

    std::string protocol = "legacy";  // a registered wire format's name
    std::string format = "bin";       // bin | hex (only where the format has a text encoding)
    int addr_bytes = 3;  // legacy: the width; framed (also inside itm): the width until a HELLO
    std::optional<AddressRange> code_range;  // from the ELF: tightens resync
    SwoOptions swo;  // itm: TPIU and the stimulus ports' uses (code_range above)
};

// What a protocol can carry beyond arcs and PC samples; views and logs ask for these rather
// than for a protocol's name.
struct WireTraits {
    bool text_encoding = false;  // format = "hex" exists (hex-ASCII on the wire)
    bool frames = false;         // framed records: frame counters, target drops, HELLO
    bool swo = false;            // SWO: stimulus ports, overflows, sleep samples, exception trace,
                                 // console text; its settings are stored with each session
};

struct WireFormat {
    std::string_view name;
    std::string_view description;
    int default_addr_bytes = 4;
    WireTraits traits;
    // Board settings only this protocol accepts (elsewhere they would silently do nothing).
    std::span<const std::string_view> own_keys;
    std::unique_ptr<StreamDecoder> (*make_decoder)(const WireSpec& spec) = nullptr;
};

// Every registered format, in the order help texts list them.
std::span<const WireFormat> wire_formats();
// nullptr for a name no entry has.
const WireFormat* find_wire_format(std::string_view name);
// Throws std::invalid_argument naming the known protocols.
const WireFormat& wire_format(std::string_view name);
// "legacy, framed or itm" (quote "\"": "\"legacy\", ..."): for messages and help texts.
std::string wire_format_names(std::string_view last_separator = " or ",
                              std::string_view quote = "");
// The formats that accept a protocol-specific board key, as a message names them:
// `"itm"`, or `"a" or "b"`; empty when no format has that key.
std::string protocols_with_key(std::string_view key);
bool accepts_key(const WireFormat& format, std::string_view key);

// Throws std::invalid_argument for a protocol, format or width it cannot decode.
std::unique_ptr<StreamDecoder> make_decoder(const WireSpec& spec);

// The exception trace of an SWO decoder (empty for other decoders).
std::map<std::uint16_t, ExceptionStats> exceptions_of(const StreamDecoder& decoder);

}  // namespace rackprof::protocol
