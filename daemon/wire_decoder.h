// The one place a wire's description becomes a decoder: capture sessions, `rackprof convert`
// and the re-decoding of stored sessions all build theirs here, so they decode alike.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "daemon/config.h"
#include "protocol/legacy_format.h"
#include "protocol/stream_decoder.h"
#include "protocol/swo_decoder.h"

namespace rackprof::daemon {

struct WireSpec {
    WireSpec() = default;
    // swo last and optional, so the wires of the other protocols read as they always did.
    WireSpec(std::string protocol_name, std::string format_name, int width,
             std::optional<protocol::AddressRange> range, protocol::SwoOptions swo_options = {})
        : protocol(std::move(protocol_name)),
          format(std::move(format_name)),
          addr_bytes(width),
          code_range(range),
          swo(swo_options) {}

    std::string protocol = "legacy";  // legacy | framed | itm
    std::string format = "bin";       // legacy: bin | hex (framed and itm are binary)
    int addr_bytes = 3;  // legacy: the width; framed (also inside itm): the width until a HELLO
    std::optional<protocol::AddressRange> code_range;  // from the ELF: tightens resync
    protocol::SwoOptions swo;  // itm: TPIU and the stimulus ports' uses (code_range above)
};

// The wire a board's configuration describes (its code range comes from its ELF, later).
WireSpec wire_spec_of(const BoardConfig& board);

// The itm settings as a session stores them (JSON), so a re-decode reads the ports alike;
// "" reads as the defaults (sessions of other protocols, older sessions).
std::string swo_options_json(const protocol::SwoOptions& swo);
protocol::SwoOptions swo_options_from_json(const std::string& text);

// Throws std::invalid_argument for a protocol, format or width it cannot decode.
std::unique_ptr<protocol::StreamDecoder> make_decoder(const WireSpec& spec);

// The exception trace of an itm decoder (empty for other decoders).
std::map<std::uint16_t, protocol::ExceptionStats> exceptions_of(
    const protocol::StreamDecoder& decoder);

}  // namespace rackprof::daemon
