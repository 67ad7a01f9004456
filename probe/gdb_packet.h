// GDB's remote serial protocol, its framing only (GDB manual, "Remote Protocol: Overview"):
// `$payload#cs` with a two-digit checksum, `}` escapes, `*` run lengths, `%` notifications and
// the `+` / `-` acknowledgements. Bytes in, whole packets out; no I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rackprof::probe {

// `payload` as one packet: `$`, the payload with `#`, `$`, `}` and `*` escaped, `#`, checksum.
std::string frame_packet(std::string_view payload);

// What a server sent, one item at a time, whatever the chunking of the bytes.
struct RspItem {
    enum class Kind {
        kAck,           // '+'
        kNak,           // '-': the last packet sent arrived damaged; send it again
        kPacket,        // a reply or stop reply, escapes and run lengths undone
        kNotification,  // '%name:data' (non-stop mode); never acknowledged
    };
    Kind kind = Kind::kAck;
    std::string payload;
    bool checksum_ok = true;  // packets and notifications: the checksum matched
};

// Reads a server's bytes. Anything outside a packet that is not an acknowledgement is counted
// and dropped; a packet longer than `max_payload` is dropped whole and counted, so a hostile
// server costs bounded memory.
class RspReader {
  public:
    explicit RspReader(std::size_t max_payload = std::size_t{1} << 20) : max_(max_payload) {}

    void feed(std::string_view bytes) { pending_.append(bytes); }
    // The next complete item, or nothing until more bytes come.
    std::optional<RspItem> next();
    // Bytes that were no item: noise between packets, packets too long.
    std::uint64_t bytes_discarded() const { return discarded_; }
    // Bytes fed and not yet taken into an item.
    std::size_t bytes_pending() const { return pending_.size() - at_; }

  private:
    // Undoes escapes and run lengths of raw packet data; false when they are malformed.
    static bool expand(std::string_view raw, std::string& out, std::size_t max);
    void compact();
    bool skip_oversized();

    std::size_t max_;
    std::string pending_;
    std::size_t at_ = 0;  // pending_[0, at_) is consumed
    std::uint64_t discarded_ = 0;
    // Dropping a packet too long to keep: -1 until its '#', then the checksum digits left.
    int skip_tail_ = 0;
};

// Calls `f` with each non-empty field of a ';'-separated list, in order, until it returns
// false; false when one did. (qSupported replies, stop replies' pairs.)
template <typename F>
bool for_each_field(std::string_view list, F&& f) {
    while (!list.empty()) {
        const auto semicolon = list.find(';');
        const std::string_view field = list.substr(0, semicolon);
        list =
            semicolon == std::string_view::npos ? std::string_view() : list.substr(semicolon + 1);
        if (!field.empty() && !f(field)) return false;
    }
    return true;
}

// Hex text (two digits a byte, as replies carry memory and registers) to bytes; nothing when
// a character is not a hex digit or the count is odd.
std::optional<std::string> hex_to_bytes(std::string_view hex);
std::string bytes_to_hex(std::string_view bytes);
// A register's or memory's bytes read as a little-endian number (ARM and RISC-V targets);
// nothing for more than 8 bytes.
std::optional<std::uint64_t> little_endian_value(std::string_view bytes);

}  // namespace rackprof::probe
