#include "protocol/wire_format.h"

#include <doctest/doctest.h>

#include <set>
#include <stdexcept>

#include "protocol/framed_decoder.h"
#include "protocol/legacy_decoder.h"
#include "protocol/legacy_format.h"
#include "protocol/swo_decoder.h"

namespace rackprof::protocol {
namespace {

TEST_CASE("every registered wire format has a unique name and builds its decoder") {
    std::set<std::string_view> names;
    for (const auto& f : wire_formats()) {
        CHECK(names.insert(f.name).second);
        CHECK(find_wire_format(f.name) == &f);
        CHECK((f.default_addr_bytes == 3 || f.default_addr_bytes == 4));
        REQUIRE(static_cast<bool>(f.make_decoder));
        const auto decoder =
            make_decoder(WireSpec{std::string(f.name), "bin", f.default_addr_bytes, std::nullopt});
        REQUIRE(decoder != nullptr);
        CHECK(decoder->stats().bytes_in == 0);
    }
    CHECK(wire_format_names() == "legacy, framed or itm");
    CHECK(wire_format_names(" or ", "\"") == "\"legacy\", \"framed\" or \"itm\"");
}

TEST_CASE("the registry builds the decoder its entry names") {
    CHECK(dynamic_cast<LegacyDecoder*>(make_decoder({"legacy", "hex", 3, std::nullopt}).get()));
    CHECK(dynamic_cast<FramedDecoder*>(make_decoder({"framed", "bin", 4, std::nullopt}).get()));
    CHECK(dynamic_cast<SwoDecoder*>(make_decoder({"itm", "bin", 4, std::nullopt}).get()));
}

TEST_CASE("a legacy decoder from the registry decodes what the encoder wrote") {
    std::vector<std::uint8_t> wire;
    encode_legacy(Record::arc(0x100, 0x200), 3, wire);
    encode_legacy(Record::pc_sample(0x104), 3, wire);
    std::string text;
    append_hex(wire, text);
    const std::vector<std::uint8_t> bytes(text.begin(), text.end());
    const auto decoder = make_decoder({"legacy", "hex", 3, std::nullopt});
    RecordCollector sink;
    decoder->feed(bytes, sink);
    decoder->finish(sink);
    REQUIRE(sink.records.size() == 2);
    CHECK(sink.records[0] == Record::arc(0x100, 0x200));
    CHECK(sink.records[1] == Record::pc_sample(0x104));
}

TEST_CASE("unknown protocols and text on binary protocols are refused with the names") {
    CHECK(find_wire_format("serial") == nullptr);
    CHECK_THROWS_WITH_AS(wire_format("serial"), "unknown protocol 'serial' (legacy, framed or itm)",
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(make_decoder({"framed", "hex", 4, std::nullopt}),
                         "the framed protocol is binary: format must be \"bin\"",
                         std::invalid_argument);
    CHECK_THROWS_AS(make_decoder({"legacy", "base64", 3, std::nullopt}), std::invalid_argument);
}

TEST_CASE("protocol-specific board keys and traits come from the entries") {
    CHECK(protocols_with_key("console_port") == "\"itm\"");
    CHECK(protocols_with_key("tpiu") == "\"itm\"");
    CHECK(protocols_with_key("name").empty());
    CHECK(accepts_key(wire_format("itm"), "framed_port"));
    CHECK_FALSE(accepts_key(wire_format("legacy"), "framed_port"));
    CHECK(wire_format("legacy").traits.text_encoding);
    CHECK(wire_format("framed").traits.frames);
    CHECK(wire_format("itm").traits.swo);
    CHECK(wire_format("legacy").default_addr_bytes == 3);
    CHECK(wire_format("framed").default_addr_bytes == 4);
}

}  // namespace
}  // namespace rackprof::protocol
