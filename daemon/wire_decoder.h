// The one place a wire's description becomes a decoder: capture sessions, `rackprof convert`
// and the re-decoding of stored sessions all build theirs here, so they decode alike.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "protocol/legacy_format.h"
#include "protocol/stream_decoder.h"

namespace rackprof::daemon {

struct WireSpec {
    std::string protocol = "legacy";  // legacy | framed
    std::string format = "bin";       // legacy: bin | hex (framed is binary)
    int addr_bytes = 3;               // legacy: the width; framed: the width until a HELLO
    std::optional<protocol::AddressRange> code_range;  // legacy: from the ELF, tightens resync
};

// Throws std::invalid_argument for a protocol, format or width it cannot decode.
std::unique_ptr<protocol::StreamDecoder> make_decoder(const WireSpec& spec);

}  // namespace rackprof::daemon
