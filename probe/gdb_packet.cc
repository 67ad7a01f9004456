#include "probe/gdb_packet.h"

#include <array>

namespace rackprof::probe {

namespace {

constexpr char kHex[] = "0123456789abcdef";

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

std::uint8_t checksum_of(std::string_view raw) {
    unsigned sum = 0;
    for (char c : raw) sum += static_cast<unsigned char>(c);
    return static_cast<std::uint8_t>(sum);
}

}  // namespace

std::string frame_packet(std::string_view payload) {
    std::string out = "$";
    out.reserve(payload.size() + 4);
    for (char c : payload) {
        if (c == '#' || c == '$' || c == '}' || c == '*') {
            out += '}';
            out += static_cast<char>(c ^ 0x20);
        } else {
            out += c;
        }
    }
    const std::uint8_t sum = checksum_of(std::string_view(out).substr(1));
    out += '#';
    out += kHex[sum >> 4];
    out += kHex[sum & 15];
    return out;
}

// A run length `X*n` repeats X (n - 29) more times (n printable, never '#' or '$'); `}c` is c
// XOR 0x20. GDB's own reader undoes both in one pass, as here.
bool RspReader::expand(std::string_view raw, std::string& out, std::size_t max) {
    out.clear();
    for (std::size_t i = 0; i < raw.size(); ++i) {
        const char c = raw[i];
        if (c == '}') {
            if (++i == raw.size()) return false;
            out += static_cast<char>(raw[i] ^ 0x20);
        } else if (c == '*') {
            if (out.empty() || ++i == raw.size()) return false;
            const int n = static_cast<unsigned char>(raw[i]) - 29;
            // Refused before it grows: a run length multiplies bytes by up to 97.
            if (n < 3 || n > 126 - 29 || out.size() + static_cast<std::size_t>(n) > max)
                return false;
            out.append(static_cast<std::size_t>(n), out.back());
        } else {
            out += c;
        }
    }
    return true;
}

// Drops the rest of a packet too long to keep, through its '#' and checksum, as a packet
// read whole would have been dropped: what comes out never depends on how bytes were cut.
bool RspReader::skip_oversized() {
    while (at_ < pending_.size() && skip_tail_ != 0) {
        const char c = pending_[at_++];
        ++discarded_;
        if (skip_tail_ < 0) {
            if (c == '#') skip_tail_ = 2;
        } else {
            --skip_tail_;
        }
    }
    return skip_tail_ == 0;
}

std::optional<RspItem> RspReader::next() {
    if (skip_tail_ != 0 && !skip_oversized()) {
        compact();
        return std::nullopt;
    }
    while (at_ < pending_.size()) {
        const char c = pending_[at_];
        if (c == '+' || c == '-') {
            ++at_;
            compact();
            return RspItem{c == '+' ? RspItem::Kind::kAck : RspItem::Kind::kNak, {}, true};
        }
        if (c != '$' && c != '%') {
            ++at_;
            ++discarded_;
            continue;
        }
        const std::size_t hash = pending_.find('#', at_ + 1);
        if (hash == std::string::npos) {
            // Undecided: wait for the rest, unless it is already longer than any packet may be
            // (escapes at most double a payload): then it is dropped up to its end.
            if (pending_.size() - at_ > 2 * max_ + 4) {
                skip_tail_ = -1;
                skip_oversized();
            }
            compact();
            return std::nullopt;
        }
        if (hash - at_ > 2 * max_ + 4) {  // too long whatever it holds: dropped up to its end
            discarded_ += hash + 1 - at_;
            at_ = hash + 1;
            skip_tail_ = 2;
            if (!skip_oversized()) break;
            continue;
        }
        if (hash + 2 >= pending_.size()) return std::nullopt;  // the checksum's digits to come
        const std::string_view raw(pending_.data() + at_ + 1, hash - at_ - 1);
        const int high = hex_digit(pending_[hash + 1]), low = hex_digit(pending_[hash + 2]);
        const std::size_t end = hash + 3;
        RspItem item;
        item.kind = c == '$' ? RspItem::Kind::kPacket : RspItem::Kind::kNotification;
        item.checksum_ok =
            high >= 0 && low >= 0 && checksum_of(raw) == static_cast<std::uint8_t>(high * 16 + low);
        const bool expanded = expand(raw, item.payload, max_) && item.payload.size() <= max_;
        if (!expanded) {
            discarded_ += end - at_;
            at_ = end;
            continue;
        }
        at_ = end;
        compact();
        return item;
    }
    compact();
    return std::nullopt;
}

void RspReader::compact() {
    if (at_ == 0) return;
    if (at_ >= pending_.size()) {
        pending_.clear();
    } else if (at_ > 4096 && at_ * 2 > pending_.size()) {
        pending_.erase(0, at_);
    } else {
        return;
    }
    at_ = 0;
}

std::optional<std::string> hex_to_bytes(std::string_view hex) {
    if (hex.size() % 2) return std::nullopt;
    std::string out;
    out.reserve(hex.size() / 2);
    for (std::size_t i = 0; i < hex.size(); i += 2) {
        const int high = hex_digit(hex[i]), low = hex_digit(hex[i + 1]);
        if (high < 0 || low < 0) return std::nullopt;
        out += static_cast<char>(high * 16 + low);
    }
    return out;
}

std::string bytes_to_hex(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size() * 2);
    for (char c : bytes) {
        const auto b = static_cast<unsigned char>(c);
        out += kHex[b >> 4];
        out += kHex[b & 15];
    }
    return out;
}

std::optional<std::uint64_t> little_endian_value(std::string_view bytes) {
    if (bytes.size() > 8) return std::nullopt;
    std::uint64_t v = 0;
    for (std::size_t i = bytes.size(); i-- > 0;)
        v = (v << 8) | static_cast<unsigned char>(bytes[i]);
    return v;
}

}  // namespace rackprof::probe
