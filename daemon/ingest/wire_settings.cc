#include "daemon/ingest/wire_settings.h"

#include "daemon/ingest/capture_import.h"
#include "gmon/elf_arch.h"
#include "protocol/framed_format.h"

#include <stdexcept>

#include <nlohmann/json.hpp>

namespace rackprof::daemon::ingest {

WireSpec wire_spec_of(const config::BoardConfig& board) {
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

WireSpec wire_spec_of(const storage::NewSession& session) {
    return WireSpec{session.protocol, session.format, session.addr_bytes, std::nullopt,
                    swo_options_from_json(session.wire_options)};
}

std::optional<protocol::AddressRange> decode_range_of(const gmon::Symbolizer* elf) {
    if (!elf || elf->code_high() > 0x100000000ull) return std::nullopt;
    return protocol::AddressRange{static_cast<std::uint32_t>(elf->code_low()),
                                  static_cast<std::uint32_t>(elf->code_high())};
}

std::optional<gmon::CodeRange> announced_range(const storage::TargetInfo& target) {
    if (!target.has_text_range()) return std::nullopt;
    return gmon::CodeRange{target.text_lo, target.text_hi};
}

storage::TargetInfo target_info_of(const protocol::TargetHello& hello) {
    return {build_id_hex(hello.build_id), hello.text_lo, hello.text_hi,
            protocol::arch_name(hello.arch)};
}

std::string arch_conflict(const storage::TargetInfo& target, const gmon::Symbolizer& elf) {
    const std::string said = protocol::arch_family(target.arch);
    const std::string family = gmon::machine_family(elf.machine());
    if (said.empty() || family.empty() || said == family) return "";
    return "the target says it is " + target.arch + " (" + said + "), but " +
           elf.path().filename().string() + " is " + family + " code (" + elf.arch() + ")";
}

std::string wire_options_json(const WireSpec& wire) {
    return protocol::wire_format(wire.protocol).traits.swo ? swo_options_json(wire.swo) : "";
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

}  // namespace rackprof::daemon::ingest
