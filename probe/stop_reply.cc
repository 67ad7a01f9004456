#include "probe/stop_reply.h"

#include "probe/gdb_packet.h"

#include <charconv>

namespace rackprof::probe {

namespace {

std::optional<int> hex_byte(std::string_view two) {
    const auto bytes = hex_to_bytes(two);
    if (!bytes || bytes->size() != 1) return std::nullopt;
    return static_cast<unsigned char>((*bytes)[0]);
}

std::optional<unsigned> hex_number(std::string_view text) {
    unsigned v = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), v, 16);
    if (text.empty() || error != std::errc() || end != text.data() + text.size())
        return std::nullopt;
    return v;
}

// 'n1:r1;n2:r2;...' after a T reply's signal.
bool parse_pairs(std::string_view rest, StopReply& out) {
    return for_each_field(rest, [&](std::string_view pair) {
        const auto colon = pair.find(':');
        if (colon == std::string_view::npos || colon == 0) return false;
        const std::string_view name = pair.substr(0, colon), value = pair.substr(colon + 1);
        if (const auto reg = hex_number(name)) {
            const auto bytes = hex_to_bytes(value);
            if (!bytes) return false;
            out.registers[*reg] = *bytes;
        } else if (name == "thread") {
            out.thread = std::string(value);
        } else {
            out.other[std::string(name)] = std::string(value);
        }
        return true;
    });
}

}  // namespace

std::optional<StopReply> parse_stop_reply(std::string_view payload) {
    if (payload.size() < 3) return std::nullopt;
    StopReply reply;
    const char kind = payload[0];
    if (kind == 'S' || kind == 'T') {
        reply.kind = StopReply::Kind::kStopped;
    } else if (kind == 'W') {
        reply.kind = StopReply::Kind::kExited;
    } else if (kind == 'X') {
        reply.kind = StopReply::Kind::kTerminated;
    } else {
        return std::nullopt;
    }
    const auto signal = hex_byte(payload.substr(1, 2));
    if (!signal) return std::nullopt;
    reply.signal = *signal;
    std::string_view rest = payload.substr(3);
    if (kind == 'T') {
        if (!parse_pairs(rest, reply)) return std::nullopt;
    } else if (!rest.empty() && rest[0] != ';') {
        return std::nullopt;  // 'W AA;process:pid' is the only tail the others may have
    }
    return reply;
}

}  // namespace rackprof::probe
