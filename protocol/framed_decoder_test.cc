#include "protocol/framed_decoder.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "protocol/framed_format.h"

namespace rackprof::protocol {
namespace {

using Bytes = std::vector<std::uint8_t>;

Bytes hex(const std::string& text) {
    Bytes out;
    for (std::size_t i = 0; i + 1 < text.size(); i += 3) {
        out.push_back(static_cast<std::uint8_t>(std::stoi(text.substr(i, 2), nullptr, 16)));
    }
    return out;
}

// Records and events in the order the sink saw them.
struct Collector : RecordSink {
    std::vector<Record> records;
    std::vector<std::pair<std::size_t, StreamEvent>> events;  // (records before it, event)
    void on_records(std::span<const Record> batch) override {
        records.insert(records.end(), batch.begin(), batch.end());
    }
    void on_event(const StreamEvent& event) override { events.emplace_back(records.size(), event); }
};

struct Decoded {
    std::vector<Record> records;
    std::vector<std::pair<std::size_t, StreamEvent>> events;
    DecoderStats stats;
};

Decoded decode(std::span<const std::uint8_t> wire, const std::vector<std::size_t>& cuts = {},
               int addr_bytes = 4) {
    FramedDecoder decoder({addr_bytes});
    Collector sink;
    std::size_t start = 0;
    for (std::size_t cut : cuts) {
        decoder.feed(wire.subspan(start, cut - start), sink);
        start = cut;
    }
    decoder.feed(wire.subspan(start), sink);
    decoder.finish(sink);
    return {sink.records, sink.events, decoder.stats()};
}

TargetHello sample_hello(std::uint8_t addr_bytes = 4) {
    return {kFramedVersion, addr_bytes, kHelloArcCache, 0x400,
            0x2000,         1000,       48'000'000,     {0xDE, 0xAD, 0xBE, 0xEF}};
}

TEST_CASE("CRC-16/CCITT-FALSE has its check value") {
    const std::string check = "123456789";
    CHECK(crc16_ccitt_false(Bytes(check.begin(), check.end())) == 0x29B1);
    CHECK(crc16_ccitt_false({}) == 0xFFFF);
    // Folded by carry-less multiplies (x86-64 from 32 bytes) and table-driven (sixteen and
    // eight bytes a step): both equal to the bit-by-bit definition at every length.
    auto bitwise = [](const Bytes& data) {
        std::uint16_t crc = 0xFFFF;
        for (std::uint8_t b : data) {
            crc = static_cast<std::uint16_t>(crc ^ (b << 8));
            for (int i = 0; i < 8; ++i)
                crc = static_cast<std::uint16_t>(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
        }
        return crc;
    };
    std::mt19937 rng(5);
    for (std::size_t size = 0; size < 300; ++size) {
        Bytes data(size);
        for (auto& b : data) b = static_cast<std::uint8_t>(rng());
        CHECK(crc16_ccitt_false(data) == bitwise(data));
        CHECK(crc16_ccitt_false_by_table(data) == bitwise(data));
    }
}

TEST_CASE("COBS matches the published examples and round-trips") {
    const std::vector<std::pair<std::string, std::string>> examples = {
        {"00 ", "01 01 "},
        {"00 00 ", "01 01 01 "},
        {"11 22 00 33 ", "03 11 22 02 33 "},
        {"11 22 33 44 ", "05 11 22 33 44 "},
        {"11 00 00 00 ", "02 11 01 01 01 "},
    };
    for (const auto& [plain, encoded] : examples) {
        Bytes out;
        cobs_encode(hex(plain), out);
        CHECK(out == hex(encoded));
        Bytes back;
        REQUIRE(cobs_decode(out, back));
        CHECK(back == hex(plain));
    }
    std::mt19937 rng(3);
    for (std::size_t size : {0u, 1u, 253u, 254u, 255u, 600u}) {
        Bytes plain(size);
        for (auto& b : plain) b = static_cast<std::uint8_t>(rng() % 3 == 0 ? 0 : rng() | 1);
        Bytes out, back;
        cobs_encode(plain, out);
        CHECK(std::find(out.begin(), out.end(), 0) == out.end());
        REQUIRE(cobs_decode(out, back));
        CHECK(back == plain);
    }
    Bytes back;
    CHECK_FALSE(cobs_decode(hex("05 11 22 "), back));  // the code points past the end
    CHECK_FALSE(cobs_decode(hex("03 11 00 "), back));  // a zero inside
}

TEST_CASE("COBS without the zero check agrees with the checked decoder, valid or not") {
    // The decoder's in-place path uses the unchecked form (16-byte moves into slack): it must
    // give the same bytes, and refuse the same encodings, at every length and run pattern.
    // Both ways of walking the codes (four alike at once, or one by one) are checked, on random
    // codes and on a sampler's frames: runs of one code, broken, damaged or cut anywhere.
    std::mt19937 rng(9);
    std::size_t valid = 0, invalid = 0;
    for (int round = 0; round < 6000; ++round) {
        Bytes encoded;
        if (round % 2) {
            encoded.resize(1 + rng() % 300);
            for (auto& b : encoded)
                b = static_cast<std::uint8_t>(1 + rng() % (rng() % 2 ? 20 : 255));
        } else {
            Bytes data(rng() % 260);  // items of one size, one zero in each, now and then not
            const std::size_t period = 1 + rng() % 12;
            for (std::size_t i = 0; i < data.size(); ++i)
                data[i] = static_cast<std::uint8_t>(i % period == 0 && rng() % 40 ? 0 : 1 + i);
            cobs_encode(data, encoded);
            if (rng() % 3 == 0)
                encoded[rng() % encoded.size()] = static_cast<std::uint8_t>(1 + rng());
            if (rng() % 3 == 0) encoded.resize(1 + rng() % encoded.size());
        }
        Bytes checked;
        const bool ok = cobs_decode(encoded, checked);
        (ok ? valid : invalid)++;
        for (CodeRuns runs : {CodeRuns::kUnlikely, CodeRuns::kLikely}) {
            Bytes out(encoded.size() + kCobsSlack);
            const auto n = cobs_decode_unchecked(encoded, out.data(), runs);
            REQUIRE(n.has_value() == ok);
            if (ok)
                REQUIRE(Bytes(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(*n)) ==
                        checked);
        }
    }
    CHECK(valid > 2000);
    CHECK(invalid > 2000);
}

TEST_CASE("COBS frames decoded together equal each decoded alone, valid or not") {
    // Real encodings (runs of zero-free bytes long enough for 0xFF blocks among them) and
    // random codes, which mostly point past the end, side by side in every group size.
    std::mt19937 rng(11);
    auto frame = [&] {
        Bytes encoded;
        if (rng() % 3 == 0) {
            encoded.resize(1 + rng() % 300);
            for (auto& b : encoded) b = static_cast<std::uint8_t>(1 + rng() % 255);
            return encoded;
        }
        Bytes data(rng() % 600);
        const unsigned zeros = rng() % 2 ? 4 : 300;  // one in `zeros` bytes is a zero
        for (auto& b : data) b = static_cast<std::uint8_t>(rng() % zeros ? 1 + rng() % 255 : 0);
        if (rng() % 3 == 0) {  // a sampler's: every fourth byte a zero
            for (std::size_t i = 0; i < data.size(); ++i) data[i] = i % 4 == 3 ? 0 : 4;
        }
        cobs_encode(data, encoded);
        return encoded;
    };
    std::size_t valid = 0, invalid = 0;
    for (int round = 0; round < 2000; ++round) {
        const std::size_t count = 1 + rng() % kCobsTogether;
        std::vector<Bytes> encoded, outs;
        for (std::size_t i = 0; i < count; ++i) {
            encoded.push_back(frame());
            outs.emplace_back(encoded.back().size() + kCobsSlack);
        }
        std::vector<std::span<const std::uint8_t>> spans(encoded.begin(), encoded.end());
        std::vector<std::uint8_t*> out;
        for (auto& o : outs) out.push_back(o.data());
        std::vector<std::optional<std::size_t>> sizes(count);
        cobs_decode_unchecked_together(spans, out, sizes,
                                       rng() % 2 ? CodeRuns::kLikely : CodeRuns::kUnlikely);
        for (std::size_t i = 0; i < count; ++i) {
            Bytes alone(encoded[i].size() + kCobsSlack);
            const auto n = cobs_decode_unchecked(encoded[i], alone.data());
            REQUIRE(sizes[i] == n);
            if (!n) {
                ++invalid;
                continue;
            }
            ++valid;
            REQUIRE(std::equal(alone.begin(), alone.begin() + static_cast<std::ptrdiff_t>(*n),
                               outs[i].begin()));
        }
    }
    CHECK(valid > 1000);
    CHECK(invalid > 500);
}

TEST_CASE("the spec's example vectors, byte for byte, both ways") {
    const Bytes frame1 = hex("02 01 04 02 11 04 01 03 01 05 01 03 c4 ec 00 ");
    const Bytes frame2 = hex("02 02 04 03 11 04 01 03 01 05 01 06 ac 02 04 20 04 01 03 e3 24 00 ");
    FramedEncoder encoder;
    encoder.record(Record::pc_sample(0x400));
    encoder.flush();  // seq 0, not part of the examples
    encoder.take_wire();
    encoder.record(Record::arc(0x411, 0x501));
    encoder.flush();
    CHECK(encoder.take_wire() == frame1);
    encoder.record(Record::arc(0x411, 0x501, 300));
    encoder.record(Record::pc_sample(0x420));
    encoder.flush();
    CHECK(encoder.take_wire() == frame2);

    Bytes wire = frame1;
    wire.insert(wire.end(), frame2.begin(), frame2.end());
    const auto d = decode(wire);
    CHECK(d.records == std::vector<Record>{Record::arc(0x411, 0x501),
                                           Record::arc(0x411, 0x501, 300),
                                           Record::pc_sample(0x420)});
    CHECK(d.stats.frames == 2);
    CHECK(d.stats.frames_bad == 0);
    CHECK(d.stats.frames_lost == 0);
    CHECK(d.stats.bytes_discarded == 0);
    CHECK(d.stats.bytes_in == wire.size());
    CHECK(d.stats.arcs == 2);
    CHECK(d.stats.pc_samples == 1);
}

TEST_CASE("the spec's version-2 example vector, byte for byte, both ways") {
    const Bytes frame = hex(
        "02 03 04 09 01 01 03 13 10 08 78 56 34 12 0c 01 01 03 13 10 01 05 57 34 12 0f 03 6f b3 "
        "00 ");
    const FunctionEvent enter{true, 0x1013, 0x101, 0x12345678, 32, 0};
    const FunctionEvent exit{false, 0x1013, 0x101, 0x12345700, 32, 15};
    FramedEncoder encoder(3);
    for (int i = 0; i < 3; ++i) {  // seq 0..2, not part of the example
        encoder.record(Record::pc_sample(0x400));
        encoder.flush();
    }
    encoder.take_wire();
    encoder.function_event(enter);
    encoder.function_event(exit);
    encoder.flush();
    CHECK(encoder.take_wire() == frame);
    const auto d = decode(frame, {}, 3);
    REQUIRE(d.events.size() == 2);
    CHECK(d.events[0].second == StreamEvent{enter});
    CHECK(d.events[1].second == StreamEvent{exit});
    CHECK(d.records == std::vector<Record>{Record::arc(0x1013, 0x101)});
    CHECK(d.stats.frames_bad == 0);
}

// The HELLO's arch byte (flags bit 5), after the build-id: a RISC-V target's.
TEST_CASE("the spec's HELLO with an arch byte, byte for byte, both ways") {
    const Bytes frame =
        hex("01 01 05 01 01 04 21 01 01 02 80 02 10 04 80 e8 03 01 04 80 96 98 07 02 ab cd 11 a6 "
            "ad 00 ");
    TargetHello hello{1, 4, kHelloArcCache, 0x80000000, 0x80001000, 1000, 10000000, {0xab, 0xcd}};
    hello.arch = static_cast<std::uint8_t>(TargetArch::kRv32imac);
    FramedEncoder encoder;
    encoder.hello(hello);
    encoder.flush();
    const Bytes wire = encoder.take_wire();
    CHECK(wire == frame);
    const auto d = decode(wire);
    REQUIRE(d.events.size() == 1);
    const auto& got = std::get<TargetHello>(d.events[0].second);
    CHECK(got.arch == 0x11);
    CHECK((got.flags & kHelloArch) != 0);
    CHECK(std::string(arch_name(got.arch)) == "rv32imac");
    CHECK(d.stats.frames_bad == 0);
    // Without bit 5 no byte is read: a HELLO of an older target decodes as before.
    hello.arch = 0;
    encoder.hello(hello);
    encoder.flush();
    const auto old = decode(encoder.take_wire());
    REQUIRE(old.events.size() == 1);
    CHECK(std::get<TargetHello>(old.events[0].second).arch == 0);
    CHECK(std::string(arch_family("armv8-m.main")) == "arm");
    CHECK(std::string(arch_family("rv32imc")) == "riscv");
}

// A stream with every kind of item, and a target reset in the middle.
Bytes every_item_stream(std::vector<Record>& records) {
    FramedEncoder encoder(4, 40);
    encoder.hello(sample_hello(3));
    records = {Record::arc(0x153D, 0x14E5), Record::pc_sample(0x14B4),
               Record::arc(0x150D, 0x1499, 70000), Record::pc_sample(0x146E, 2)};
    encoder.marker({true});
    for (const Record& r : records) encoder.record(r);
    encoder.dropped(5);
    encoder.marker({false});
    encoder.reset();
    encoder.hello(sample_hello(4));
    encoder.record(Record::arc(0x0800153D, 0x080014E5));
    encoder.dropped(2);
    encoder.flush();
    records.push_back(Record::arc(0x0800153D, 0x080014E5));
    return encoder.take_wire();
}

TEST_CASE("HELLO, markers, DROPPED and a reset: events in order, no loss, widths followed") {
    std::vector<Record> records;
    const Bytes wire = every_item_stream(records);
    const auto d = decode(wire);
    CHECK(d.records == records);
    REQUIRE(d.events.size() == 4);
    CHECK(d.events[0] == std::pair<std::size_t, StreamEvent>{0, sample_hello(3)});
    CHECK(d.events[1] == std::pair<std::size_t, StreamEvent>{0, ProfilingMarker{true}});
    CHECK(d.events[2] == std::pair<std::size_t, StreamEvent>{4, ProfilingMarker{false}});
    CHECK(d.events[3] == std::pair<std::size_t, StreamEvent>{4, sample_hello(4)});
    CHECK(d.stats.frames_lost == 0);
    CHECK(d.stats.frames_bad == 0);
    CHECK(d.stats.target_dropped == 7);  // 5 before the reset, 2 after
    CHECK(d.stats.bytes_discarded == 0);
}

TEST_CASE("a repeated HELLO (not a reset) hides no lost frame before it") {
    FramedEncoder encoder;
    encoder.hello(sample_hello());
    encoder.flush();
    const Bytes first = encoder.take_wire();
    encoder.record(Record::pc_sample(0x500));
    encoder.flush();
    encoder.take_wire();  // frame 1 is lost on the link
    encoder.hello(sample_hello());
    encoder.record(Record::pc_sample(0x502));
    encoder.flush();
    Bytes wire = first;
    wire.insert(wire.end(), encoder.wire().begin(), encoder.wire().end());
    const auto d = decode(wire);
    CHECK(d.records == std::vector<Record>{Record::pc_sample(0x502)});
    CHECK(d.events.size() == 2);
    CHECK(d.stats.frames_lost == 1);
}

TEST_CASE("every split point of a stream gives identical output") {
    std::vector<Record> records;
    const Bytes wire = every_item_stream(records);
    const auto whole = decode(wire);
    for (std::size_t a = 0; a <= wire.size(); ++a) {
        for (std::size_t b = a; b <= wire.size(); ++b) {
            const auto split = decode(wire, {a, b});
            REQUIRE(split.records == whole.records);
            REQUIRE(split.events == whole.events);
            REQUIRE(split.stats == whole.stats);
        }
    }
}

TEST_CASE("the width from the board's config holds until a HELLO") {
    FramedEncoder encoder(3);
    encoder.record(Record::arc(0x153D, 0x14E5));
    encoder.flush();
    const auto d = decode(encoder.wire(), {}, 3);
    CHECK(d.records == std::vector<Record>{Record::arc(0x153D, 0x14E5)});
    CHECK(decode(encoder.wire(), {}, 4).stats.frames_bad == 1);  // 3-byte items misparse
}

// Frames as the test built them, so it knows which records each one carries.
struct Frame {
    Bytes wire;
    std::vector<Record> records;
    std::uint32_t dropped_total = 0;  // the DROPPED item it carries (0: none)
};

TEST_CASE("property: dropped frames are counted exactly, damaged ones as bad, the rest intact") {
    std::mt19937 rng(2026);
    for (int round = 0; round < 300; ++round) {
        FramedEncoder encoder(4);
        std::vector<Frame> frames;
        std::uint32_t dropped_total = 0;
        const std::size_t frame_count = 3 + rng() % 120;
        for (std::size_t f = 0; f < frame_count; ++f) {
            Frame frame;
            for (std::size_t i = 0, n = 1 + rng() % 5; i < n; ++i) {
                const auto addr = [&] { return static_cast<std::uint32_t>(rng()); };
                const auto count = static_cast<std::uint32_t>(rng() % 4 ? 1 : 1 + rng());
                const Record r = rng() % 2 ? Record::arc(addr(), addr(), count)
                                           : Record::pc_sample(addr(), count);
                encoder.record(r);
                frame.records.push_back(r);
            }
            if (rng() % 8 == 0) {
                encoder.dropped(dropped_total += 1 + rng() % 100);
                frame.dropped_total = dropped_total;
            }
            encoder.flush();
            frame.wire = encoder.take_wire();
            frames.push_back(std::move(frame));
        }
        // No sequence number can reveal frames lost before the first or after the last one
        // received, so faults hit the frames in between.
        std::set<std::size_t> dropped, damaged;
        for (std::size_t i = 0, n = rng() % 6; i < n; ++i)
            dropped.insert(1 + rng() % (frame_count - 2));
        for (std::size_t i = 0, n = rng() % 6; i < n; ++i) {
            const std::size_t f = 1 + rng() % (frame_count - 2);
            if (dropped.count(f)) continue;
            damaged.insert(f);
            // Any byte but the delimiter, changed to another non-zero value.
            Bytes& w = frames[f].wire;
            auto& b = w[rng() % (w.size() - 1)];
            b = static_cast<std::uint8_t>(b == 0xFF ? 1 : b + 1);
        }
        Bytes wire;
        std::vector<Record> expected;
        std::uint32_t expected_dropped = 0;
        for (std::size_t f = 0; f < frames.size(); ++f) {
            if (dropped.count(f)) continue;
            wire.insert(wire.end(), frames[f].wire.begin(), frames[f].wire.end());
            if (damaged.count(f)) continue;
            expected.insert(expected.end(), frames[f].records.begin(), frames[f].records.end());
            // Totals are cumulative: the last one received says it all.
            expected_dropped = std::max(expected_dropped, frames[f].dropped_total);
        }
        std::vector<std::size_t> cuts;
        for (std::size_t i = rng() % 50; i < wire.size(); i += 1 + rng() % 300) cuts.push_back(i);
        const auto d = decode(wire, cuts);
        REQUIRE(d.records == expected);
        REQUIRE(d.stats.frames_lost == dropped.size() + damaged.size());
        REQUIRE(d.stats.frames_bad == damaged.size());
        REQUIRE(d.stats.frames == frame_count - dropped.size() - damaged.size());
        REQUIRE(d.stats.target_dropped == expected_dropped);
        std::uint64_t damaged_bytes = 0;
        for (std::size_t f : damaged) damaged_bytes += frames[f].wire.size();
        REQUIRE(d.stats.bytes_discarded == damaged_bytes);
        REQUIRE(d.stats.bytes_in == wire.size());
    }
}

TEST_CASE("a sampler's runs of PCs decode as any other items: whole, mixed, cut short") {
    // Frames nearly all PCs make the decoder check four items (and COBS codes) at once in the
    // next frame; frames of mixed calls and samples, and frames whose PC run is cut short or
    // broken by an unknown tag, must come out exactly as item by item.
    std::mt19937 rng(44);
    for (int round = 0; round < 200; ++round) {
        const int width = rng() % 2 ? 3 : 4;
        const std::uint32_t base = width == 3 ? 0x1000 : 0x08001000;
        FramedEncoder encoder(width);
        Bytes wire;
        std::vector<Record> expected;
        std::size_t bad = 0;
        for (std::size_t f = 0, frames = 2 + rng() % 30; f < frames; ++f) {
            const auto kind = rng() % 4;
            if (kind == 0) {  // a sampler's run, cut short or broken: a bad frame
                Bytes body = {0x00, 0x00};
                for (std::size_t i = 0, n = 4 + rng() % 50; i < n; ++i) {
                    body.push_back(static_cast<std::uint8_t>(FramedTag::kPc));
                    for (int b = 0; b < width; ++b)
                        body.push_back(static_cast<std::uint8_t>(1 + b));
                }
                if (rng() % 2) {
                    body.resize(body.size() - 1 - rng() % static_cast<std::uint32_t>(width));
                } else {
                    body.insert(body.end() - static_cast<std::ptrdiff_t>(rng() % 3) * (width + 1),
                                0x7F);  // an unknown tag
                }
                const auto crc = crc16_ccitt_false(body);
                body.push_back(static_cast<std::uint8_t>(crc));
                body.push_back(static_cast<std::uint8_t>(crc >> 8));
                cobs_encode(body, wire);
                wire.push_back(0);
                ++bad;
                continue;
            }
            const bool sampler = kind != 1;
            for (std::size_t i = 0, n = 1 + rng() % (sampler ? 60 : 30); i < n; ++i) {
                const std::uint32_t addr = base + 2 * (rng() % 0x400);
                const auto count = static_cast<std::uint32_t>(rng() % 30 ? 1 : 2 + rng() % 300);
                const bool arc = sampler ? rng() % 25 == 0 : rng() % 2 == 0;
                const Record r =
                    arc ? Record::arc(addr, base + 0x10, count) : Record::pc_sample(addr, count);
                encoder.record(r);
                expected.push_back(r);
            }
            encoder.flush();
            const Bytes frame = encoder.take_wire();
            wire.insert(wire.end(), frame.begin(), frame.end());
        }
        std::vector<std::size_t> cuts;
        for (std::size_t i = 1 + rng() % 600; i < wire.size(); i += 1 + rng() % 600)
            cuts.push_back(i);
        const auto d = decode(wire, cuts, width);
        REQUIRE(d.records == expected);
        REQUIRE(d.stats.frames_bad == bad);
        REQUIRE(d.stats.frames_lost == 0);
    }
}

TEST_CASE("a stream joined mid-frame: the fragment is one bad frame, then decoding goes on") {
    FramedEncoder encoder;
    for (std::uint32_t i = 0; i < 3; ++i) {
        encoder.record(Record::pc_sample(0x1000 + i));
        encoder.flush();
    }
    const Bytes wire = encoder.take_wire();
    const std::size_t frame_size = wire.size() / 3;
    const auto d = decode(std::span(wire).subspan(3));
    CHECK(d.records == std::vector<Record>{Record::pc_sample(0x1001), Record::pc_sample(0x1002)});
    CHECK(d.stats.frames_bad == 1);
    CHECK(d.stats.bytes_discarded == frame_size - 3);
    CHECK(d.stats.frames_lost == 0);
}

TEST_CASE("malformed frames are bad, cost only themselves, and are counted") {
    // Each body is framed correctly (COBS, CRC) but says something the protocol does not.
    const std::vector<Bytes> bad_bodies = {
        hex("00 00 20 "),                                         // unknown tag
        hex("00 00 09 11 04 00 00 01 05 00 00 10 "),              // ENTER cut short (its stamp)
        hex("00 00 0b 11 04 00 00 01 05 00 00 10 00 00 00 0f "),  // ENTER_IN_HANDLER, half IPSR
        hex("00 00 02 11 04 00 00 01 05 00 "),                    // ARC cut short
        hex("00 00 05 20 04 00 00 00 "),                          // PC_N with a count of 0
        hex("00 00 05 20 04 00 00 ff ff ff ff 7f "),              // a count over 2^32-1
        // HELLO version 4 (this length is exactly a HELLO's with no build-id)
        hex("00 00 01 04 04 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 "),
        hex("00 00 "),  // no item
    };
    for (const Bytes& body : bad_bodies) {
        Bytes framed = body;
        const auto crc = crc16_ccitt_false(framed);
        framed.push_back(static_cast<std::uint8_t>(crc));
        framed.push_back(static_cast<std::uint8_t>(crc >> 8));
        Bytes wire;
        cobs_encode(framed, wire);
        wire.push_back(0);
        const std::size_t bad_size = wire.size();
        FramedEncoder good;
        good.record(Record::pc_sample(0x1234));
        good.flush();
        wire.insert(wire.end(), good.wire().begin(), good.wire().end());
        const auto d = decode(wire);
        CHECK(d.records == std::vector<Record>{Record::pc_sample(0x1234)});
        CHECK(d.stats.frames_bad == 1);
        CHECK(d.stats.bytes_discarded == bad_size);
    }
}

// ---- version 2: enter/exit events ----------------------------------------------------------

TargetHello events_hello(std::uint8_t addr_bytes) {
    TargetHello h = sample_hello(addr_bytes);
    h.version = kFramedVersionEvents;
    h.flags = kHelloArcCache | kHelloEvents;
    return h;
}

FunctionEvent event(bool enter, std::uint32_t callee, std::uint32_t site, std::uint32_t stamp,
                    std::uint16_t exception = 0) {
    return {enter, site, callee, stamp, 32, exception};
}

// A run as the enter-exit firmware sends it: HELLO v2, START, thread-mode calls, a handler's
// call (exception 15, SysTick) inside one of them, an external interrupt's (IPSR 300), STOP.
std::vector<FunctionEvent> sample_events() {
    return {event(true, 0x1001, 0x2011, 0xFFFFFF00),     event(true, 0x1101, 0x1013, 0xFFFFFF40),
            event(true, 0x1201, 0x3001, 0xFFFFFFF0, 15), event(false, 0x1201, 0x3001, 0x10, 15),
            event(false, 0x1101, 0x1013, 0x400),         event(false, 0x1001, 0x2011, 0x480),
            event(true, 0x1301, 0x3101, 0x500, 300),     event(false, 0x1301, 0x3101, 0x5FF, 300)};
}

Bytes events_stream(std::uint8_t addr_bytes, const std::vector<FunctionEvent>& events,
                    std::size_t max_body = kMaxFrameBody) {
    FramedEncoder encoder(4, max_body);
    encoder.hello(events_hello(addr_bytes));
    encoder.marker({true});
    for (const FunctionEvent& e : events) encoder.function_event(e);
    encoder.marker({false});
    encoder.flush();
    return encoder.take_wire();
}

struct EventRun {
    std::vector<Record> records;
    std::vector<StreamEvent> events;
    DecoderStats stats;
    FramedEventStats event_stats;
};

EventRun decode_events(std::span<const std::uint8_t> wire, std::size_t cut = 0) {
    FramedDecoder decoder({4});
    Collector sink;
    decoder.feed(wire.first(cut), sink);
    decoder.feed(wire.subspan(cut), sink);
    decoder.finish(sink);
    EventRun run{sink.records, {}, decoder.stats(), decoder.event_stats()};
    for (const auto& e : sink.events) run.events.push_back(e.second);
    return run;
}

template <typename T>
std::vector<T> only(const std::vector<StreamEvent>& events) {
    std::vector<T> out;
    for (const StreamEvent& e : events) {
        if (const auto* t = std::get_if<T>(&e)) out.push_back(*t);
    }
    return out;
}

TEST_CASE("ENTER and EXIT round-trip: stamps, sites, exceptions, arcs, both widths") {
    for (const std::uint8_t width : {std::uint8_t{3}, std::uint8_t{4}}) {
        CAPTURE(width);
        std::vector<FunctionEvent> sent = sample_events();
        const Bytes wire = events_stream(width, sent);
        const EventRun run = decode_events(wire);
        CHECK(only<FunctionEvent>(run.events) == sent);
        REQUIRE(run.events.size() == sent.size() + 3);  // HELLO, START, the events, STOP
        CHECK(run.events.front() == StreamEvent{events_hello(width)});
        CHECK(run.events[1] == StreamEvent{ProfilingMarker{true}});
        CHECK(run.events.back() == StreamEvent{ProfilingMarker{false}});
        // Every entry is its call's arc too.
        std::vector<Record> arcs;
        for (const FunctionEvent& e : sent) {
            if (e.enter) arcs.push_back(Record::arc(e.call_site, e.callee));
        }
        CHECK(run.records == arcs);
        CHECK(run.stats.arcs == 4);
        CHECK(run.event_stats == FramedEventStats{4, 4, 0});
        CHECK(run.stats.frames_bad == 0);
        CHECK(run.stats.bytes_discarded == 0);
    }
    // The sizes the target runtime relies on: 1 + 2 addresses + 4, plus 2 in a handler.
    FramedEncoder encoder(3);
    encoder.function_event(event(true, 0x1001, 0x2011, 7));
    encoder.function_event(event(false, 0x1001, 0x2011, 9, 15));
    encoder.flush();
    Bytes body;
    REQUIRE(cobs_decode(std::span(encoder.wire()).first(encoder.wire().size() - 1), body));
    CHECK(body.size() == 2 + 11 + 13 + 2);
    CHECK(body[2] == 0x09);
    CHECK(body[13] == 0x0C);
}

TEST_CASE("an event stream split anywhere decodes the same") {
    const Bytes wire = events_stream(3, sample_events(), 40);  // several frames
    const EventRun whole = decode_events(wire);
    for (std::size_t cut = 0; cut <= wire.size(); ++cut) {
        const EventRun split = decode_events(wire, cut);
        REQUIRE(split.events == whole.events);
        REQUIRE(split.records == whole.records);
        REQUIRE(split.stats == whole.stats);
    }
}

TEST_CASE("events cut short or damaged cost their frame, never a wrong event") {
    const Bytes wire = events_stream(3, sample_events(), 40);
    const EventRun whole = decode_events(wire);
    // Truncated anywhere: the events decoded are a prefix of the whole run's, the cut frame
    // is one bad frame, every byte is accounted for.
    for (std::size_t end = 0; end < wire.size(); ++end) {
        const EventRun cut = decode_events(std::span(wire).first(end));
        const auto events = only<FunctionEvent>(cut.events);
        const auto all = only<FunctionEvent>(whole.events);
        REQUIRE(events.size() <= all.size());
        REQUIRE(std::equal(events.begin(), events.end(), all.begin()));
        const bool ends_on_frame = end == 0 || wire[end - 1] == 0;
        REQUIRE(cut.stats.frames_bad == (ends_on_frame ? 0u : 1u));
    }
    // Every single byte flipped: never an event that was not sent.
    const auto all = only<FunctionEvent>(whole.events);
    for (std::size_t at = 0; at < wire.size(); ++at) {
        Bytes damaged = wire;
        damaged[at] ^= 0x5A;
        const EventRun run = decode_events(damaged);
        for (const FunctionEvent& e : only<FunctionEvent>(run.events)) {
            REQUIRE(std::find(all.begin(), all.end(), e) != all.end());
        }
        REQUIRE(run.stats.bytes_in ==
                run.stats.bytes_discarded + (wire.size() - run.stats.bytes_discarded));
    }
}

TEST_CASE("lost frames and dropped items in an event stream are marked where they happened") {
    FramedEncoder encoder(4, 40);
    encoder.hello(events_hello(3));
    encoder.function_event(event(true, 0x1001, 0x2011, 100));
    encoder.flush();
    Bytes wire = encoder.take_wire();
    encoder.function_event(event(true, 0x1101, 0x1013, 200));
    encoder.flush();
    encoder.take_wire();  // lost on the link
    encoder.function_event(event(false, 0x1101, 0x1013, 300));
    encoder.dropped(3);  // the target's queue was full three times
    encoder.function_event(event(false, 0x1001, 0x2011, 400));
    encoder.flush();
    const Bytes rest = encoder.take_wire();
    wire.insert(wire.end(), rest.begin(), rest.end());
    const EventRun run = decode_events(wire);
    const std::vector<StreamEvent> expected = {events_hello(3), event(true, 0x1001, 0x2011, 100),
                                               EventsLost{1},   event(false, 0x1101, 0x1013, 300),
                                               EventsLost{3},   event(false, 0x1001, 0x2011, 400)};
    CHECK(run.events == expected);
    CHECK(run.stats.frames_lost == 1);
    CHECK(run.stats.target_dropped == 3);
    CHECK(run.event_stats == FramedEventStats{1, 2, 2});
}

TEST_CASE("a stream without events gets no EventsLost markers") {
    FramedEncoder encoder;
    encoder.hello(sample_hello());  // version 1, no events flag
    encoder.record(Record::pc_sample(0x500));
    encoder.flush();
    Bytes wire = encoder.take_wire();
    encoder.record(Record::pc_sample(0x501));
    encoder.flush();
    encoder.take_wire();  // lost
    encoder.dropped(2);
    encoder.flush();
    const Bytes rest = encoder.take_wire();
    wire.insert(wire.end(), rest.begin(), rest.end());
    const EventRun run = decode_events(wire);
    CHECK(run.events == std::vector<StreamEvent>{sample_hello()});
    CHECK(run.stats.frames_lost == 1);
    CHECK(run.stats.target_dropped == 2);
    CHECK(run.event_stats == FramedEventStats{});
}

TEST_CASE("versions: 1 to 5 are read, 6 is refused; a version-1 host refuses 2") {
    for (const std::uint8_t version : {kFramedVersion, kFramedVersionEvents, kFramedVersionCounters,
                                       kFramedVersionProbe, kFramedVersionTasks}) {
        TargetHello h = sample_hello();
        h.version = version;
        FramedEncoder encoder;
        encoder.hello(h);
        encoder.flush();
        const EventRun run = decode_events(encoder.wire());
        CHECK(run.events == std::vector<StreamEvent>{h});
    }
    // The version byte follows the HELLO tag: 2 for a target that sends events, where a
    // version-1 receiver (framed-protocol.md v1: "version u8 (=1)") stops.
    FramedEncoder encoder;
    encoder.hello(events_hello(4));
    encoder.flush();
    Bytes body;
    REQUIRE(cobs_decode(std::span(encoder.wire()).first(encoder.wire().size() - 1), body));
    CHECK(body[2] == static_cast<std::uint8_t>(FramedTag::kHello));
    CHECK(body[3] == 2);
    TargetHello v5 = sample_hello();
    v5.version = kFramedVersionTasks + 1;
    CHECK_THROWS_AS(FramedEncoder().hello(v5), std::invalid_argument);
}

TEST_CASE("an overlong frame, a lone delimiter and a truncated tail are counted") {
    Bytes wire(600, 0x55);
    wire.push_back(0);
    wire.push_back(0);  // a lone delimiter
    FramedEncoder encoder;
    encoder.record(Record::pc_sample(0x2000));
    encoder.flush();
    wire.insert(wire.end(), encoder.wire().begin(), encoder.wire().end());
    wire.insert(wire.end(), {0x03, 0x11, 0x22});  // the stream ends inside a frame
    const auto d = decode(wire);
    CHECK(d.records == std::vector<Record>{Record::pc_sample(0x2000)});
    CHECK(d.stats.frames_bad == 2);
    CHECK(d.stats.bytes_discarded == 601 + 1 + 3);
    CHECK(d.stats.bytes_in == wire.size());
}

TEST_CASE("random garbage never crashes, and every byte is accounted for") {
    std::mt19937 rng(42);
    for (int round = 0; round < 500; ++round) {
        Bytes wire(rng() % 2000);
        for (auto& b : wire) b = static_cast<std::uint8_t>(rng() % 16 == 0 ? 0 : rng());
        std::vector<std::size_t> cuts;
        for (std::size_t i = 1; i < wire.size(); i += 1 + rng() % 97) cuts.push_back(i);
        const auto whole = decode(wire);
        const auto split = decode(wire, cuts, 4);
        REQUIRE(split.records == whole.records);
        REQUIRE(split.stats == whole.stats);
        if (whole.stats.frames == 0) REQUIRE(whole.stats.bytes_discarded == wire.size());
    }
}

TEST_CASE("frames decoded where they lie equal frames held back across chunks") {
    // Whole frames in a chunk are decoded in place, frames cut by a chunk end are copied
    // first: damaged, overlong and truncated frames must come out the same both ways.
    std::mt19937 rng(77);
    for (int round = 0; round < 200; ++round) {
        FramedEncoder encoder(rng() % 2 ? 3 : 4);
        Bytes wire;
        for (std::size_t f = 0, frames = 1 + rng() % 40; f < frames; ++f) {
            if (rng() % 10 == 0) encoder.hello(sample_hello(rng() % 2 ? 3 : 4));
            for (std::size_t i = 0, n = 1 + rng() % 60; i < n; ++i) {
                const auto addr = static_cast<std::uint32_t>(rng() % 3 ? rng() % 0x10000 : rng());
                const auto count = static_cast<std::uint32_t>(rng() % 4 ? 1 : 1 + rng() % 1000);
                encoder.record(rng() % 2 ? Record::arc(addr, addr + 4, count)
                                         : Record::pc_sample(addr, count));
            }
            if (rng() % 8 == 0) encoder.marker(ProfilingMarker{rng() % 2 == 0});
            encoder.flush();
            Bytes frame = encoder.take_wire();
            const auto fault = rng() % 10;
            if (fault == 0) frame[rng() % (frame.size() - 1)] ^= 0x01;  // damaged (or a cut)
            if (fault == 1) frame.insert(frame.begin(), 300, 0x42);     // overlong
            if (fault == 2) frame.resize(rng() % frame.size());         // runs into the next
            wire.insert(wire.end(), frame.begin(), frame.end());
        }
        const auto whole = decode(wire, {}, 3);
        std::vector<std::size_t> bytes, chunks;
        for (std::size_t i = 1; i < wire.size(); ++i) bytes.push_back(i);
        for (std::size_t i = rng() % 40; i < wire.size(); i += 1 + rng() % 400) chunks.push_back(i);
        if (!chunks.empty() && chunks.front() == 0) chunks.erase(chunks.begin());
        for (const auto& cuts : {bytes, chunks}) {
            const auto split = decode(wire, cuts, 3);
            REQUIRE(split.records == whole.records);
            REQUIRE(split.events == whole.events);
            REQUIRE(split.stats == whole.stats);
        }
        REQUIRE(whole.stats.bytes_in == wire.size());
    }
}

TEST_CASE("invalid options and unencodable items are refused") {
    CHECK_THROWS_AS(FramedDecoder({2}), std::invalid_argument);
    CHECK_THROWS_AS(FramedEncoder(5), std::invalid_argument);
    FramedEncoder encoder;
    TargetHello hello = sample_hello();
    hello.build_id.assign(21, 1);
    CHECK_THROWS_AS(encoder.hello(hello), std::invalid_argument);
}

// ---- version 3: counter campaigns ---------------------------------------------------------

TEST_CASE("counter campaign items round-trip in any chunking, both widths") {
    for (const int width : {3, 4}) {
        TargetHello h = sample_hello(static_cast<std::uint8_t>(width));
        h.version = kFramedVersionCounters;
        h.flags = kHelloCounters;
        const CounterCapabilities caps{0x3F, 8};
        const CounterConfig config{7, 0x21, {0x1001, 0x2041, 0x30FF}};
        const FunctionCounts counts{
            7, 0x21, 0x2041, 3, {1ull << 40, 0, 0, 0, 0, 0xFFFFFFFFFFFFFFFFull}};
        const FunctionCounts none{7, 0x21, 0x30FF, 0, {0, 0, 0, 0, 0, 0}};
        const RunTotals totals{7, 0x21, 2, {123456789, 0, 0, 0, 0, 42}};
        FramedEncoder encoder(width, 40);  // small frames: items spread over several
        encoder.hello(h);
        encoder.counter_capabilities(caps);
        encoder.counter_config(config);
        encoder.function_counts(counts);
        encoder.function_counts(none);
        encoder.run_totals(totals);
        encoder.flush();
        const Bytes wire = encoder.take_wire();
        const std::vector<StreamEvent> expected{h, caps, config, counts, none, totals};
        for (std::size_t cut = 0; cut <= wire.size(); cut += 7) {
            const EventRun run = decode_events(wire, cut);
            CHECK(run.events == expected);
            CHECK(run.stats.frames_bad == 0);
            CHECK(run.records.empty());
        }
    }
}

TEST_CASE("the spec's version-3 example vectors, byte for byte, both ways") {
    FramedEncoder host(3);
    const CounterConfig config{1, 0x11, {0x1001, 0x2041}};
    host.counter_config(config);
    host.flush();
    const Bytes config_wire = hex("01 01 03 0e 01 05 11 02 01 10 03 41 20 03 36 63 00 ");
    CHECK(host.take_wire() == config_wire);
    const auto c = decode(config_wire, {}, 3);
    REQUIRE(c.events.size() == 1);
    CHECK(c.events[0].second == StreamEvent{config});

    FramedEncoder target(3);
    for (int i = 0; i < 5; ++i) {  // seq 0..4, not part of the example
        target.record(Record::pc_sample(0x400));
        target.flush();
    }
    target.take_wire();
    const FunctionCounts counts{1, 0x11, 0x2041, 3, {300, 0, 0, 0, 5, 0}};
    const RunTotals totals{1, 0x11, 2, {1000, 0, 0, 0, 20, 0}};
    target.function_counts(counts);
    target.run_totals(totals);
    target.flush();
    const Bytes answer =
        hex("02 05 03 0f 01 04 11 41 20 07 03 ac 02 05 10 01 08 11 02 e8 07 14 54 35 00 ");
    CHECK(target.take_wire() == answer);
    const auto a = decode(answer, {}, 3);
    REQUIRE(a.events.size() == 2);
    CHECK(a.events[0].second == StreamEvent{counts});
    CHECK(a.events[1].second == StreamEvent{totals});
}

TEST_CASE("counter campaign items the wire cannot carry are refused, malformed ones are bad") {
    FramedEncoder encoder;
    CHECK_THROWS_AS(encoder.counter_capabilities({0x40, 4}), std::invalid_argument);
    CHECK_THROWS_AS(encoder.counter_config({1, 0x01, std::vector<std::uint32_t>(61, 0x100)}),
                    std::invalid_argument);
    const std::vector<Bytes> bad_bodies = {
        hex("00 00 0d 40 04 "),                    // COUNTERS with bit 6
        hex("00 00 0e 01 00 01 02 00 10 00 00 "),  // CONFIG naming 2, holding 1
        hex("00 00 0f 01 00 01 00 10 00 00 "),     // FUNCTION_COUNTS without its counts
        hex("00 00 10 01 00 03 00 05 "),           // RUN_TOTALS with one of two counts
        hex("00 00 10 01 00 01 00 ff ff ff ff ff ff ff ff ff 7f "),  // a count over 2^64-1
    };
    for (const Bytes& body : bad_bodies) {
        Bytes framed = body;
        const auto crc = crc16_ccitt_false(framed);
        framed.push_back(static_cast<std::uint8_t>(crc));
        framed.push_back(static_cast<std::uint8_t>(crc >> 8));
        Bytes wire;
        cobs_encode(framed, wire);
        wire.push_back(0);
        const EventRun run = decode_events(wire);
        CHECK(run.events.empty());
        CHECK(run.stats.frames_bad == 1);
    }
}

}  // namespace
}  // namespace rackprof::protocol

namespace rackprof::protocol {
namespace {

TEST_CASE("probe items (v4): HALTED adds to the halted time, STACK is a sample and its stack") {
    TargetHello h = sample_hello(4);
    h.version = kFramedVersionProbe;
    const StackSample thread{0x1235, 0, false, {0x1234, 0x1100, 0x1000}};
    const StackSample handler{0x2001, 15, true, {0x2000}};
    StackSample deep{0x3001, 0, false, {}};
    for (std::uint32_t i = 0; i < kMaxStackFrames + 4; ++i) deep.functions.push_back(0x3000 + i);
    FramedEncoder encoder(4, 60);  // small frames: items spread over several
    encoder.hello(h);
    encoder.halted(1'500'000);
    encoder.stack(thread);
    encoder.stack(handler);
    encoder.halted(250);
    encoder.flush();
    FramedEncoder big(4);
    big.stack(deep);
    big.flush();
    Bytes wire = encoder.take_wire();
    const Bytes deep_wire = big.take_wire();
    for (std::size_t cut = 0; cut <= wire.size(); cut += 5) {
        const Decoded d = decode(wire, {cut});
        CHECK(d.stats.frames_bad == 0);
        CHECK(d.stats.samples_halted_ns == 1'500'250);
        CHECK(d.stats.stack_unwind_failures == 1);
        CHECK(d.stats.pc_samples == 2);
        CHECK(d.records ==
              std::vector<Record>{Record::pc_sample(0x1235), Record::pc_sample(0x2001)});
        REQUIRE(d.events.size() == 3);
        CHECK(d.events[1].second == StreamEvent{thread});
        CHECK(d.events[2].second == StreamEvent{handler});
    }
    // A stack deeper than an item carries is cut at kMaxStackFrames and marked truncated.
    const Decoded d = decode(deep_wire);
    REQUIRE(d.events.size() == 1);
    const auto& cut = std::get<StackSample>(d.events[0].second);
    CHECK(cut.functions.size() == kMaxStackFrames);
    CHECK(cut.truncated);
    CHECK(d.stats.stack_unwind_failures == 1);
}

TEST_CASE("the spec's version-4 example vector, byte for byte, both ways") {
    FramedEncoder link(4);
    link.halted(1'000'000);
    link.stack(StackSample{0x1235, 0, false, {0x1234, 0x1100}});
    link.flush();
    const Bytes wire =
        hex("01 01 06 11 c0 84 3d 12 01 01 03 35 12 01 04 02 34 12 01 01 02 11 01 03 84 bf 00 ");
    CHECK(link.take_wire() == wire);
    const Decoded d = decode(wire);
    CHECK(d.stats.samples_halted_ns == 1'000'000);
    CHECK(d.records == std::vector<Record>{Record::pc_sample(0x1235)});
    REQUIRE(d.events.size() == 1);
    CHECK(d.events[0].second == StreamEvent{StackSample{0x1235, 0, false, {0x1234, 0x1100}}});
}

TEST_CASE("a STACK item naming more frames than it may, or cut short, is a bad frame") {
    FramedEncoder encoder(4);
    encoder.stack(StackSample{0x1235, 0, false, {0x1234}});
    encoder.flush();
    Bytes body;
    const Bytes wire = encoder.take_wire();
    REQUIRE(cobs_decode(std::span(wire).first(wire.size() - 1), body));
    // seq(2) tag flags exception(2) pc(4) n: n is body[10].
    REQUIRE(body[2] == static_cast<std::uint8_t>(FramedTag::kStack));
    for (const std::uint8_t n : {std::uint8_t{kMaxStackFrames + 1}, std::uint8_t{2}}) {
        Bytes bad(body.begin(), body.end() - 2);
        bad[10] = n;
        const std::uint16_t crc = crc16_ccitt_false(bad);
        bad.push_back(static_cast<std::uint8_t>(crc & 0xFF));  // little-endian, as sent
        bad.push_back(static_cast<std::uint8_t>(crc >> 8));
        Bytes framed;
        cobs_encode(bad, framed);
        framed.push_back(0);
        const Decoded d = decode(framed);
        CHECK(d.stats.frames_bad == 1);
        CHECK(d.records.empty());
        CHECK(d.events.empty());
    }
}

}  // namespace
}  // namespace rackprof::protocol

namespace rackprof::protocol {
namespace {

TEST_CASE("the spec's version-5 example vector, byte for byte, both ways") {
    FramedEncoder target(4);
    for (int i = 0; i < 7; ++i) {  // seq 7: seven frames before it
        target.dropped(0);
        target.flush();
    }
    target.take_wire();
    target.task_switch(TaskSwitch{0x20000100, 0x1000, "idle"});
    target.task_deleted(TaskDeleted{0x20000100, 0x2000});
    target.flush();
    const Bytes wire = hex(
        "02 07 02 13 02 01 02 20 02 10 01 07 04 69 64 6c 65 14 02 01 02 20 02 20 01 03 d9 6d 00 ");
    CHECK(target.take_wire() == wire);
    const Decoded d = decode(wire);
    CHECK(d.stats.frames_bad == 0);
    REQUIRE(d.events.size() == 2);
    CHECK(d.events[0].second == StreamEvent{TaskSwitch{0x20000100, 0x1000, "idle"}});
    CHECK(d.events[1].second == StreamEvent{TaskDeleted{0x20000100, 0x2000}});
}

TEST_CASE("task switches (v5): records before a switch reach the sink before it, any chunking") {
    TargetHello h = sample_hello(3);
    h.version = kFramedVersionTasks;
    h.flags |= kHelloTasks;
    FramedEncoder encoder(3, 48);  // a 32-byte name fills most of a frame
    encoder.hello(h);
    encoder.record(Record::pc_sample(0x100));
    encoder.record(Record::arc(0x105, 0x200, 3));
    encoder.task_switch(TaskSwitch{0x2000, 10, "sensor"});
    encoder.record(Record::pc_sample(0x300));
    encoder.task_switch(TaskSwitch{0x2040, 20, std::string(kMaxTaskName, 'x')});
    encoder.record(Record::pc_sample(0x400));
    encoder.record(Record::pc_sample(0x404));
    encoder.task_deleted(TaskDeleted{0x2000, 30});
    encoder.task_switch(TaskSwitch{0x2000, 40, ""});
    encoder.flush();
    const Bytes wire = encoder.take_wire();
    for (std::size_t cut = 0; cut <= wire.size(); cut += 3) {
        const Decoded d = decode(wire, {cut}, 3);
        CHECK(d.stats.frames_bad == 0);
        REQUIRE(d.events.size() == 5);
        // (records before the event, event): the switch splits the records where it was sent.
        CHECK(d.events[1].first == 2);
        CHECK(d.events[1].second == StreamEvent{TaskSwitch{0x2000, 10, "sensor"}});
        CHECK(d.events[2].first == 3);
        CHECK(d.events[3].first == 5);
        CHECK(d.events[3].second == StreamEvent{TaskDeleted{0x2000, 30}});
        CHECK(d.events[4].second == StreamEvent{TaskSwitch{0x2000, 40, ""}});
    }
    CHECK_THROWS_AS(encoder.task_switch(TaskSwitch{1, 1, std::string(kMaxTaskName + 1, 'x')}),
                    std::invalid_argument);
}

TEST_CASE("a task name longer than 32 bytes, or cut short, makes its frame bad; loss is marked") {
    FramedEncoder encoder(4);
    encoder.task_switch(TaskSwitch{0x2000, 5, "ab"});
    encoder.flush();
    const Bytes good = encoder.take_wire();
    Bytes body;
    REQUIRE(cobs_decode(std::span(good).first(good.size() - 1), body));
    // seq(2) tag task(4) stamp(4) name_len: body[11].
    REQUIRE(body[2] == static_cast<std::uint8_t>(FramedTag::kTaskSwitch));
    for (const std::uint8_t n : {std::uint8_t{kMaxTaskName + 1}, std::uint8_t{3}}) {
        Bytes bad(body.begin(), body.end() - 2);
        bad[11] = n;
        const std::uint16_t crc = crc16_ccitt_false(bad);
        bad.push_back(static_cast<std::uint8_t>(crc & 0xFF));
        bad.push_back(static_cast<std::uint8_t>(crc >> 8));
        Bytes framed;
        cobs_encode(bad, framed);
        framed.push_back(0);
        const Decoded d = decode(framed);
        CHECK(d.stats.frames_bad == 1);
        CHECK(d.events.empty());
    }
    // A frame lost after a task switch: the decoder marks the loss where it was seen.
    FramedEncoder target(4);
    target.task_switch(TaskSwitch{0x2000, 5, "a"});
    target.flush();
    target.record(Record::pc_sample(0x10));
    target.flush();
    Bytes wire = target.take_wire();
    target.task_switch(TaskSwitch{0x3000, 9, "b"});
    target.flush();
    const Bytes third = target.take_wire();
    const auto second_start = static_cast<std::ptrdiff_t>(
        std::find(wire.begin(), wire.end(), std::uint8_t{0}) - wire.begin() + 1);
    wire.erase(wire.begin() + second_start, wire.end());  // frame 1 never arrives
    wire.insert(wire.end(), third.begin(), third.end());
    const Decoded d = decode(wire);
    REQUIRE(d.events.size() == 3);
    CHECK(d.events[1].second == StreamEvent{EventsLost{1}});
    CHECK(d.stats.frames_lost == 1);
}

}  // namespace
}  // namespace rackprof::protocol
