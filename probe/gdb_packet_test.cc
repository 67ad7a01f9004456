#include "probe/gdb_packet.h"

#include <doctest/doctest.h>

#include <cstdio>
#include <string>
#include <vector>

namespace rackprof::probe {
namespace {

std::vector<RspItem> read_all(RspReader& reader) {
    std::vector<RspItem> items;
    while (auto item = reader.next()) items.push_back(*item);
    return items;
}

// `raw` sent as it stands (run lengths, escapes), with its right checksum.
std::string raw_packet(char start, const std::string& raw) {
    unsigned sum = 0;
    for (char c : raw) sum += static_cast<unsigned char>(c);
    char digits[3];
    std::snprintf(digits, sizeof digits, "%02x", sum & 0xff);
    return start + raw + "#" + digits;
}

TEST_CASE("packets: framed with GDB's checksum, the four special bytes escaped") {
    // Checksums as GDB's own logs show them.
    CHECK(frame_packet("OK") == "$OK#9a");
    CHECK(frame_packet("g") == "$g#67");
    CHECK(frame_packet("?") == "$?#3f");
    CHECK(frame_packet("") == "$#00");
    // '#', '$', '}' and '*' go as '}' and the byte XOR 0x20; the checksum is over what is sent.
    CHECK(frame_packet("a#$}*") == raw_packet('$', "a}\x03}\x04}]}\x0a"));
    RspReader reader;
    const std::string binary = std::string("X\0#$}*\xff", 7);
    reader.feed(frame_packet(binary));
    const auto items = read_all(reader);
    REQUIRE(items.size() == 1);
    CHECK(items[0].kind == RspItem::Kind::kPacket);
    CHECK(items[0].checksum_ok);
    CHECK(items[0].payload == binary);
}

TEST_CASE("replies: acks, run lengths, notifications and damage, whatever the chunking") {
    // "0* " is '0' and 3 more (' ' is 32 = 29 + 3); "}]" is '}'.
    const std::string stream = "+-noise" + raw_packet('$', "0* ") + "$OK#00" +
                               raw_packet('%', "Stop:T05") + raw_packet('$', "1}]") + "+";
    for (std::size_t step : {std::size_t{1}, std::size_t{3}, stream.size()}) {
        CAPTURE(step);
        RspReader reader;
        std::vector<RspItem> items;
        for (std::size_t at = 0; at < stream.size(); at += step) {
            reader.feed(std::string_view(stream).substr(at, step));
            for (auto& item : read_all(reader)) items.push_back(item);
        }
        REQUIRE(items.size() == 7);
        CHECK(items[0].kind == RspItem::Kind::kAck);
        CHECK(items[1].kind == RspItem::Kind::kNak);
        CHECK(items[2].kind == RspItem::Kind::kPacket);
        CHECK(items[2].payload == "0000");
        CHECK(items[2].checksum_ok);
        CHECK(items[3].payload == "OK");
        CHECK_FALSE(items[3].checksum_ok);  // the caller asks again ('-')
        CHECK(items[4].kind == RspItem::Kind::kNotification);
        CHECK(items[4].payload == "Stop:T05");
        CHECK(items[5].payload == "1}");
        CHECK(items[6].kind == RspItem::Kind::kAck);
        CHECK(reader.bytes_discarded() == 5);  // "noise"
        CHECK(reader.bytes_pending() == 0);
    }
}

TEST_CASE("a hostile server: malformed run lengths and endless packets cost bounded memory") {
    RspReader reader(64);
    reader.feed("$*5#00");      // a run length with nothing to repeat: dropped, counted
    reader.feed("$0*\x7f#00");  // a count past 126: dropped
    CHECK_FALSE(reader.next());
    CHECK(reader.bytes_discarded() == 6 + 7);
    // A '$' and then no end: held up to about twice the largest packet, then dropped.
    reader.feed("$");
    for (int i = 0; i < 100; ++i) reader.feed(std::string(10, 'x'));
    CHECK_FALSE(reader.next());
    CHECK(reader.bytes_pending() < 2 * 64 + 8);
    // A packet longer than 64 bytes once expanded is dropped whole; the next one is read.
    RspReader small(64);
    small.feed(frame_packet(std::string(65, 'a')) + frame_packet("OK"));
    const auto items = read_all(small);
    REQUIRE(items.size() == 1);
    CHECK(items[0].payload == "OK");
    CHECK(small.bytes_discarded() == 65 + 4);
}

TEST_CASE("a packet too long is dropped the same whether it comes whole or a byte at a time") {
    // Longer than twice the limit before its '#': a reader fed a byte at a time gives up on it
    // before its end arrives, and must then drop the rest, up to its checksum, as a reader that
    // saw it whole drops it all (the fuzzer's find).
    const std::string stream = "$" + std::string(200, 'x') + "#00" + frame_packet("OK") + "+";
    for (bool bytewise : {false, true}) {
        CAPTURE(bytewise);
        RspReader reader(64);
        std::vector<RspItem> items;
        for (std::size_t at = 0; at < stream.size(); at += bytewise ? 1 : stream.size()) {
            reader.feed(std::string_view(stream).substr(at, bytewise ? 1 : stream.size()));
            for (auto& item : read_all(reader)) items.push_back(item);
            CHECK(reader.bytes_pending() <= 2 * 64 + 5);
        }
        REQUIRE(items.size() == 2);
        CHECK(items[0].payload == "OK");
        CHECK(items[1].kind == RspItem::Kind::kAck);
        CHECK(reader.bytes_discarded() == 1 + 200 + 3);
    }
}

TEST_CASE("hex: memory and registers as bytes and little-endian numbers") {
    CHECK(hex_to_bytes("00ff7F") == std::string("\x00\xff\x7f", 3));
    CHECK_FALSE(hex_to_bytes("0"));
    CHECK_FALSE(hex_to_bytes("0g"));
    CHECK(bytes_to_hex(std::string("\x00\xff\x7f", 3)) == "00ff7f");
    // An ARM pc of 0x000001f4 as 'p f' answers it.
    CHECK(little_endian_value(*hex_to_bytes("f4010000")) == 0x1f4u);
    CHECK(little_endian_value(*hex_to_bytes("0102030405060708")) == 0x0807060504030201u);
    CHECK_FALSE(little_endian_value(std::string(9, '\0')));
}

}  // namespace
}  // namespace rackprof::probe
