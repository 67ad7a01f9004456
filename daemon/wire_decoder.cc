#include "daemon/wire_decoder.h"

#include <stdexcept>

#include <nlohmann/json.hpp>

#include "protocol/framed_decoder.h"
#include "protocol/legacy_decoder.h"
#include "protocol/swo_decoder.h"

namespace rackprof::daemon {

WireSpec wire_spec_of(const BoardConfig& board) {
    WireSpec wire{board.protocol, board.format, board.addr_bytes, std::nullopt, {}};
    wire.swo.tpiu = board.tpiu;
    wire.swo.tpiu_stream = static_cast<std::uint8_t>(board.tpiu_stream);
    auto port = [](const std::optional<int>& p) -> std::optional<std::uint16_t> {
        if (!p) return std::nullopt;
        return static_cast<std::uint16_t>(*p);
    };
    wire.swo.framed_port = port(board.framed_port);
    wire.swo.orbstat_port = port(board.orbstat_port);
    wire.swo.console_port = port(board.console_port);
    return wire;
}

namespace {
constexpr std::pair<const char*, std::optional<std::uint16_t> protocol::SwoOptions::*> kPorts[] = {
    {"framed_port", &protocol::SwoOptions::framed_port},
    {"orbstat_port", &protocol::SwoOptions::orbstat_port},
    {"console_port", &protocol::SwoOptions::console_port}};
}  // namespace

std::string swo_options_json(const protocol::SwoOptions& swo) {
    nlohmann::json j = {{"tpiu", swo.tpiu}, {"tpiu_stream", swo.tpiu_stream}};
    for (const auto& [key, port] : kPorts) {
        if (swo.*port) j[key] = *(swo.*port);
    }
    return j.dump();
}

protocol::SwoOptions swo_options_from_json(const std::string& text) {
    protocol::SwoOptions swo;
    if (text.empty()) return swo;
    const auto j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_object()) throw std::invalid_argument("stored wire options are not a JSON object");
    swo.tpiu = j.value("tpiu", false);
    swo.tpiu_stream = j.value<std::uint8_t>("tpiu_stream", 1);
    for (const auto& [key, port] : kPorts) {
        if (j.contains(key)) swo.*port = j[key].get<std::uint16_t>();
    }
    return swo;
}

std::unique_ptr<protocol::StreamDecoder> make_decoder(const WireSpec& spec) {
    if (spec.protocol == "framed" || spec.protocol == "itm") {
        if (spec.format != "bin")
            throw std::invalid_argument("the " + spec.protocol +
                                        " protocol is binary: format must be \"bin\"");
    }
    if (spec.protocol == "framed")
        return std::make_unique<protocol::FramedDecoder>(protocol::FramedOptions{spec.addr_bytes});
    if (spec.protocol == "itm") {
        protocol::SwoOptions swo = spec.swo;
        swo.code_range = spec.code_range;
        std::unique_ptr<protocol::StreamDecoder> framed;
        if (swo.framed_port) {
            framed =
                std::make_unique<protocol::FramedDecoder>(protocol::FramedOptions{spec.addr_bytes});
        }
        return std::make_unique<protocol::SwoDecoder>(swo, std::move(framed));
    }
    if (spec.protocol != "legacy")
        throw std::invalid_argument("unknown protocol '" + spec.protocol +
                                    "' (legacy, framed or itm)");
    if (spec.format != "bin" && spec.format != "hex")
        throw std::invalid_argument("unknown format '" + spec.format + "' (bin or hex)");
    return std::make_unique<protocol::LegacyDecoder>(protocol::LegacyOptions{
        spec.addr_bytes,
        spec.format == "hex" ? protocol::LegacyEncoding::kHex : protocol::LegacyEncoding::kBinary,
        spec.code_range});
}

std::map<std::uint16_t, protocol::ExceptionStats> exceptions_of(
    const protocol::StreamDecoder& decoder) {
    const auto* swo = dynamic_cast<const protocol::SwoDecoder*>(&decoder);
    return swo ? swo->exceptions() : std::map<std::uint16_t, protocol::ExceptionStats>{};
}

}  // namespace rackprof::daemon
