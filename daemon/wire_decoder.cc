#include "daemon/wire_decoder.h"

#include <stdexcept>

#include "protocol/framed_decoder.h"
#include "protocol/legacy_decoder.h"

namespace rackprof::daemon {

std::unique_ptr<protocol::StreamDecoder> make_decoder(const WireSpec& spec) {
    if (spec.protocol == "framed") {
        if (spec.format != "bin")
            throw std::invalid_argument("the framed protocol is binary: format must be \"bin\"");
        return std::make_unique<protocol::FramedDecoder>(protocol::FramedOptions{spec.addr_bytes});
    }
    if (spec.protocol != "legacy")
        throw std::invalid_argument("unknown protocol '" + spec.protocol + "' (legacy or framed)");
    if (spec.format != "bin" && spec.format != "hex")
        throw std::invalid_argument("unknown format '" + spec.format + "' (bin or hex)");
    return std::make_unique<protocol::LegacyDecoder>(protocol::LegacyOptions{
        spec.addr_bytes,
        spec.format == "hex" ? protocol::LegacyEncoding::kHex : protocol::LegacyEncoding::kBinary,
        spec.code_range});
}

}  // namespace rackprof::daemon
