#include "protocol/swo_decoder.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "protocol/legacy_decoder.h"
#include "protocol/swo_encoder.h"
#include "protocol/swo_test_support.h"

namespace rackprof::protocol {
namespace {

using Bytes = std::vector<std::uint8_t>;

struct Decoded {
    std::vector<Record> records;  // sorted: their order carries no meaning
    std::vector<StreamEvent> events;
    DecoderStats stats;
    SwoStats swo;
    std::map<std::uint16_t, ExceptionStats> exceptions;
};

std::unique_ptr<StreamDecoder> legacy_inner() {
    return std::make_unique<LegacyDecoder>(LegacyOptions{3, LegacyEncoding::kBinary, {}});
}

void sort_records(std::vector<Record>& records) {
    std::sort(records.begin(), records.end(), [](const Record& a, const Record& b) {
        return std::tie(a.kind, a.from_pc, a.self_pc, a.count) <
               std::tie(b.kind, b.from_pc, b.self_pc, b.count);
    });
}

Decoded decode_chunks(const std::vector<std::span<const std::uint8_t>>& chunks,
                      const SwoOptions& options, bool with_inner = false) {
    SwoDecoder decoder(options, with_inner ? legacy_inner() : nullptr);
    testing::RecordCollector sink;
    for (const auto& chunk : chunks) decoder.feed(chunk, sink);
    decoder.finish(sink);
    sort_records(sink.records);
    return {sink.records, sink.events, decoder.stats(), decoder.swo_stats(), decoder.exceptions()};
}

Decoded decode(const Bytes& wire, const SwoOptions& options, bool with_inner = false) {
    return decode_chunks({std::span<const std::uint8_t>(wire)}, options, with_inner);
}

// Hand-built ITM bytes (ARMv7-M ARM appendix D4) below, not ItmEncoder's.
TEST_CASE("PC samples become records; sleep samples and overflows are counted") {
    const auto d =
        decode({0x17, 0xB4, 0x14, 0x00, 0x00, 0x15, 0x00, 0x70, 0x17, 0x6E, 0x14, 0x00, 0x00}, {});
    CHECK(d.records == std::vector{Record::pc_sample(0x146E), Record::pc_sample(0x14B4)});
    CHECK(d.stats.pc_samples == 2);
    CHECK(d.stats.sleep_samples == 1);
    CHECK(d.stats.overflows == 1);
    CHECK(d.stats.bytes_in == 13);
    CHECK(d.stats.bytes_discarded == 0);
}

TEST_CASE("PC samples outside the code range are rejected and counted") {
    SwoOptions o;
    o.code_range = AddressRange{0x400, 0x2000};
    const auto d = decode({0x17, 0x00, 0x90, 0x00, 0x00, 0x17, 0x00, 0x14, 0x00, 0x00}, o);
    CHECK(d.records == std::vector{Record::pc_sample(0x1400)});
    CHECK(d.swo.out_of_range == 1);
}

TEST_CASE("console port bytes become text events, line by line, the rest at finish") {
    SwoOptions o;
    o.console_port = 0;
    const auto d = decode({0x03, 'h', 'i', '\n', 't', 0x02, 'h', 'e', 0x01, 'r', 0x01, 'e', 0x09,
                           'x'},  // port 1: not the console
                          o);
    CHECK(d.events == std::vector<StreamEvent>{ConsoleText{0, "hi\n"}, ConsoleText{0, "there"}});
    CHECK(d.swo.console_bytes == 8);
    CHECK(d.swo.software_ignored == 1);
}

TEST_CASE("orbstat words become arcs on entry and function events on entry and exit") {
    SwoOptions o;
    o.orbstat_port = 30;  // header 0xF3: port 30, 4 bytes
    const auto d = decode(
        {
            0xF3, 0x34, 0x12, 0x00, 0x40,  // enter, stamp 0x001234
            0xF3, 0x3D, 0x15, 0x00, 0x00,  // call site 0x153D
            0xF3, 0xE5, 0x14, 0x00, 0x00,  // callee 0x14E5
            0xF3, 0x00, 0x13, 0x00, 0x50,  // exit, stamp 0x001300
            0xF3, 0x3D, 0x15, 0x00, 0x00,  //
            0xF3, 0xE5, 0x14, 0x00, 0x00,  //
            0xF3, 0xAA, 0xAA, 0x00, 0x00,  // out of step: dropped
            0xF3, 0x01, 0x00, 0x00, 0x41,  // enter (0x41...: the top nibble counts)
            0xF3, 0x99, 0x15, 0x00, 0x00,  //
            0xF3, 0x01, 0x15, 0x00, 0x00,  //
        },
        o);
    CHECK(d.records == std::vector{Record::arc(0x153D, 0x14E5), Record::arc(0x1599, 0x1501)});
    CHECK(d.events == std::vector<StreamEvent>{FunctionEvent{true, 0x153D, 0x14E5, 0x001234},
                                               FunctionEvent{false, 0x153D, 0x14E5, 0x001300},
                                               FunctionEvent{true, 0x1599, 0x1501, 0x000001}});
    CHECK(d.swo.orbstat_words_dropped == 1);
    CHECK(d.stats.bytes_discarded == 5);
    CHECK(d.stats.arcs == 2);
}

TEST_CASE("an overflow drops a partly received orbstat event") {
    SwoOptions o;
    o.orbstat_port = 30;
    const auto d = decode({0xF3, 0x34, 0x12, 0x00, 0x40, 0x70, 0xF3, 0x3D, 0x15, 0x00, 0x00}, o);
    CHECK(d.records.empty());
    CHECK(d.swo.orbstat_words_dropped == 2);
    CHECK(d.stats.overflows == 1);
}

TEST_CASE("framed-port bytes go to the inner decoder; its records and counters fold in") {
    SwoOptions o;
    o.framed_port = 1;
    // Legacy "41 00153D 0014E5 50 0014B4" after one garbage byte, in packets of 1, 4, 2, 4, 1.
    const auto d = decode({0x09, 0xEE, 0x0B, 0x41, 0x00, 0x15, 0x3D, 0x0A, 0x00, 0x14, 0x0B,
                           0xE5, 0x50, 0x00, 0x14, 0x09, 0xB4, 0x17, 0x00, 0x14, 0x00, 0x00},
                          o, true);
    CHECK(d.records == std::vector{Record::arc(0x153D, 0x14E5), Record::pc_sample(0x1400),
                                   Record::pc_sample(0x14B4)});
    CHECK(d.stats.arcs == 1);
    CHECK(d.stats.pc_samples == 2);
    CHECK(d.stats.bytes_discarded == 1);  // the inner decoder's garbage byte
    CHECK(d.stats.resyncs == 1);
    CHECK(d.swo.framed_bytes == 12);
}

TEST_CASE("exception trace: entries, and time from local timestamps, nested") {
    const auto d = decode(
        {
            0x0E, 0x0F, 0x10,  // enter 15 at 0
            0xC0, 0x64,        // +100
            0x0E, 0x0F, 0x20,  // exit 15: 100 cycles
            0x0E, 0x0F, 0x10,  // enter 15 at 100
            0xC0, 0x32,        // +50
            0x0E, 0x10, 0x10,  // enter 16 (preempts 15): 15 had 50
            0xC0, 0x1E,        // +30
            0x0E, 0x10, 0x20,  // exit 16: 30 cycles
            0x70,              // +7 (short form)
            0x0E, 0x0F, 0x30,  // return to 15
            0xC0, 0x14,        // +20
            0x0E, 0x0F, 0x20,  // exit 15: 7 + 20 more
            0x0E, 0x00, 0x30,  // return to thread mode
        },
        {});
    // 0x70 is an overflow, not a timestamp: the 7 cycles are not seen.
    REQUIRE(d.exceptions.size() == 2);
    // 15: activations of 100 and 50 + 20 cycles; 16: one of 30.
    CHECK(d.exceptions.at(15) == ExceptionStats{2, 100 + 50 + 20, 2, 100, 100});
    CHECK(d.exceptions.at(16) == ExceptionStats{1, 30, 1, 30, 30});
    CHECK(d.swo.timestamp_cycles == 200);
    CHECK(d.stats.overflows == 1);
}

TEST_CASE("TPIU frames: the ITM stream is taken from its source ID") {
    Bytes itm = {0x17, 0xB4, 0x14, 0x00, 0x00, 0x15, 0x00};
    Bytes wire;
    TpiuFramer framer(wire);
    framer.full_sync();
    framer.write(2, Bytes{0x17, 0x99, 0x99, 0x00, 0x00});  // another source: not ours
    framer.write(1, itm);
    framer.full_sync();
    SwoOptions o;
    o.tpiu = true;
    const auto d = decode(wire, o);
    CHECK(d.records == std::vector{Record::pc_sample(0x14B4)});
    CHECK(d.stats.sleep_samples == 1);
    CHECK(d.stats.frames == 1);
    CHECK(d.stats.bytes_discarded == 0);
    o.tpiu_stream = 2;
    CHECK(decode(wire, o).records == std::vector{Record::pc_sample(0x9999)});
}

// What a logic analyzer records of SWO with the formatter on in a mode that sends no sync:
// frames from a frame boundary, ITM on stream 1 (PC samples and stimulus writes, with another
// source's bytes between them), never FF FF FF 7F.
struct SynclessCapture {
    Bytes itm;  // stream 1 alone, as the ITM wrote it
    Bytes wire;
};

SynclessCapture syncless_capture(std::size_t samples) {
    SynclessCapture c;
    ItmEncoder itm(c.itm);
    std::mt19937 rng(7);
    for (std::size_t i = 0; i < samples; ++i) {
        itm.pc_sample(0x1000 + 2 * (rng() % 0x800));
        if (i % 5 == 0) itm.software(1, static_cast<std::uint32_t>(rng()), 4);
    }
    TpiuFramer framer(c.wire);
    for (std::size_t at = 0; at < c.itm.size(); at += 37) {
        framer.write(1, std::span(c.itm).subspan(at, std::min<std::size_t>(37, c.itm.size() - at)));
        framer.write(2, Bytes{0x01, 0x02, 0x03});  // another source between
    }
    framer.flush();
    const Bytes sync = {0xFF, 0xFF, 0xFF, 0x7F};
    REQUIRE(std::search(c.wire.begin(), c.wire.end(), sync.begin(), sync.end()) == c.wire.end());
    return c;
}

TEST_CASE("TPIU without a sync: the 16 alignments tried, the one whose ITM decodes kept") {
    const SynclessCapture c = syncless_capture(3000);
    SwoOptions raw;
    const Decoded truth = decode(c.itm, raw);  // stream 1 deframed: what it must decode to
    REQUIRE(truth.records.size() == 3000);
    SwoOptions o;
    o.tpiu = true;
    SUBCASE("from a frame boundary: everything, however the bytes are chunked") {
        std::mt19937_64 chunking(11);
        using Chunks = std::vector<std::span<const std::uint8_t>>;
        for (const Chunks& chunks : {Chunks{std::span<const std::uint8_t>(c.wire)},
                                     testing::random_chunks(c.wire, chunking, 300)}) {
            SwoDecoder decoder(o);
            testing::RecordCollector sink;
            for (const auto& chunk : chunks) decoder.feed(chunk, sink);
            decoder.finish(sink);
            sort_records(sink.records);
            CHECK(sink.records == truth.records);
            CHECK(decoder.tpiu_stats().locks == 1);
            CHECK(decoder.tpiu_stats().bytes_discarded == 0);
            CHECK(decoder.itm_stats().bytes_discarded == 0);
        }
    }
    SUBCASE("a capture with its syncs removed (they stand between frames)") {
        Bytes wire;
        TpiuFramer framer(wire);
        for (std::size_t at = 0; at < c.itm.size(); at += 400) {
            framer.full_sync();
            framer.write(
                1, std::span(c.itm).subspan(at, std::min<std::size_t>(400, c.itm.size() - at)));
        }
        framer.flush();
        const Bytes sync = {0xFF, 0xFF, 0xFF, 0x7F};
        std::size_t removed = 0;
        for (auto it = std::search(wire.begin(), wire.end(), sync.begin(), sync.end());
             it != wire.end(); it = std::search(it, wire.end(), sync.begin(), sync.end())) {
            it = wire.erase(it, it + 4);
            ++removed;
        }
        REQUIRE(removed > 10);
        const Decoded d = decode(wire, o);
        CHECK(d.records == truth.records);
        CHECK(d.stats.bytes_discarded == 0);
    }
    SUBCASE("from mid-frame: the bytes before the lock discarded and counted, the rest decoded") {
        const Bytes cut(c.wire.begin() + 7, c.wire.end());
        const Decoded d = decode(cut, o);
        CHECK(d.stats.frames > 0);
        CHECK(d.stats.bytes_discarded >= 9);  // the cut frame's remaining 9 bytes at least
        CHECK(d.records.size() >= truth.records.size() - 8);  // what the first frames held
        CHECK(std::includes(truth.records.begin(), truth.records.end(), d.records.begin(),
                            d.records.end(), [](const Record& a, const Record& b) {
                                return std::tie(a.kind, a.from_pc, a.self_pc, a.count) <
                                       std::tie(b.kind, b.from_pc, b.self_pc, b.count);
                            }));
    }
    SUBCASE("a later full sync mid-frame realigns on it") {
        Bytes wire(c.wire.begin(), c.wire.begin() + 4000);
        const Bytes sync = {0xFF, 0xFF, 0xFF, 0x7F};
        wire.insert(wire.end(), sync.begin(), sync.end());
        Bytes after;
        TpiuFramer framer(after);
        // The ITM stream was cut mid-packet too: the first packet after may be swallowed.
        framer.write(1, Bytes{0x17, 0x00, 0x15, 0x00, 0x00, 0x17, 0x02, 0x15, 0x00, 0x00});
        framer.flush();
        wire.insert(wire.end(), after.begin(), after.end());
        const Decoded d = decode(wire, o);
        CHECK(std::find(d.records.begin(), d.records.end(), Record::pc_sample(0x1502)) !=
              d.records.end());
        CHECK(d.stats.resyncs >= 1);
    }
}

TEST_CASE("TPIU without a sync: garbage and padding never lock") {
    Bytes garbage(8192);
    std::mt19937 rng(3);
    for (auto& b : garbage) b = static_cast<std::uint8_t>(rng());
    SwoOptions o;
    o.tpiu = true;
    const Decoded noise = decode(garbage, o);
    CHECK(noise.records.size() < 8);                     // a lock on noise would decode it to many
    const Decoded zeros = decode(Bytes(8192, 0x00), o);  // every alignment alike: no lock
    CHECK(zeros.records.empty());
    CHECK(zeros.stats.bytes_discarded == 8192);
}

TEST_CASE("an ITM packet split by a switch to another TPIU stream continues after it") {
    // A PC sample (5 bytes) and a stimulus write (5 bytes), each cut by stream 2's bytes.
    const Bytes packets = {0x17, 0xB4, 0x14, 0x00, 0x00, 0x0B, 0x78, 0x56, 0x34, 0x12};
    Bytes wire;
    TpiuFramer framer(wire);
    framer.full_sync();
    framer.write(1, std::span(packets).first(2));
    framer.write(2, Bytes{0x17, 0x99, 0x99});  // stream 2 mid-packet
    framer.write(1, std::span(packets).subspan(2, 5));
    framer.write(2, Bytes{0x55});
    framer.write(1, std::span(packets).subspan(7));
    framer.flush();
    SwoOptions o;
    o.tpiu = true;
    const Decoded d = decode(wire, o);
    CHECK(d.records == std::vector{Record::pc_sample(0x14B4)});
    CHECK(d.swo.packets[static_cast<std::size_t>(ItmPacketKind::kSoftware)] == 1);
    CHECK(d.stats.bytes_discarded == 0);
}

TEST_CASE("after finish() (a link break) decoding goes on; TPIU needs a new full sync") {
    Bytes first;
    TpiuFramer framer(first);
    framer.full_sync();
    framer.write(1, Bytes{0x17, 0xB4, 0x14, 0x00, 0x00, 0x17});  // the last PC is cut off
    framer.flush();
    const Bytes second = {0x17, 0x6E, 0x14, 0x00, 0x00};  // mid-frame, before any sync: lost
    Bytes third;
    TpiuFramer again(third);
    again.full_sync();
    again.write(1, Bytes{0x17, 0x00, 0x15, 0x00, 0x00});
    again.flush();
    SwoOptions o;
    o.tpiu = true;
    SwoDecoder decoder(o);
    testing::RecordCollector sink;
    decoder.feed(first, sink);
    decoder.finish(sink);
    decoder.feed(second, sink);
    decoder.feed(third, sink);
    decoder.finish(sink);
    CHECK(sink.records == std::vector{Record::pc_sample(0x14B4), Record::pc_sample(0x1500)});
    CHECK(decoder.itm_stats().bytes_discarded == 1);   // the cut-off header
    CHECK(decoder.tpiu_stats().bytes_discarded == 5);  // unaligned after the break
    CHECK(decoder.stats().bytes_discarded == 6);
}

TEST_CASE("invalid options are refused") {
    SwoOptions o;
    o.console_port = 256;
    CHECK_THROWS_AS(SwoDecoder{o}, std::invalid_argument);
    o.console_port = 30;
    o.orbstat_port = 30;
    CHECK_THROWS_AS(SwoDecoder{o}, std::invalid_argument);
    o = {};
    o.framed_port = 1;
    CHECK_THROWS_AS(SwoDecoder{o}, std::invalid_argument);  // no decoder for it
    CHECK_THROWS_AS((SwoDecoder{SwoOptions{}, legacy_inner()}), std::invalid_argument);
    o = {};
    o.tpiu = true;
    o.tpiu_stream = 0;
    CHECK_THROWS_AS(SwoDecoder{o}, std::invalid_argument);
}

SwoOptions all_ports(bool tpiu) {
    SwoOptions o;
    o.tpiu = tpiu;
    o.console_port = 0;
    o.framed_port = 1;
    o.orbstat_port = 30;
    return o;
}

TEST_CASE("exception trace: the longest activation, and the p99 within an eighth of an octave") {
    Bytes itm;
    ItmEncoder enc(itm);
    enc.sync();
    std::mt19937_64 rng(7);
    std::vector<std::uint32_t> lengths;
    for (std::uint32_t i = 1; i <= 1000; ++i) lengths.push_back(i * 37);
    std::shuffle(lengths.begin(), lengths.end(), rng);
    for (const std::uint32_t cycles : lengths) {
        enc.exception(20, 1);  // enter IRQ4
        enc.local_timestamp(cycles);
        enc.exception(20, 2);  // exit
        enc.exception(0, 3);   // return to thread mode
        enc.local_timestamp(5);
    }
    const auto d = decode(itm, {});
    const ExceptionStats& irq = d.exceptions.at(20);
    CHECK(irq.entries == 1000);
    CHECK(irq.completed == 1000);
    CHECK(irq.max_cycles == 37000);
    CHECK(irq.cycles == 37 * 500500);
    // The exact p99 is the 990th: 36 630 cycles; the histogram's bound is at most 1/8 above.
    CHECK(irq.p99_cycles >= 36630);
    CHECK(irq.p99_cycles <= 36630 + 36630 / 8);
}

// A target's SWO output: PC samples, sleep, timestamps, exceptions, console text, orbstat
// events, legacy records on the framed port. Returns what the decoder must deliver.
struct Scenario {
    Bytes itm;
    std::vector<Record> records;
    std::vector<FunctionEvent> function_events;
    std::string console;
};

Scenario random_scenario(std::mt19937_64& rng, int n) {
    Scenario s;
    ItmEncoder enc(s.itm);
    enc.sync();
    const auto addr = [&] { return static_cast<std::uint32_t>(0x400 + 2 * (rng() % 0x800)); };
    for (int i = 0; i < n; ++i) {
        switch (rng() % 8) {
            case 0:
            case 1: {
                const auto pc = addr();
                enc.pc_sample(pc);
                s.records.push_back(Record::pc_sample(pc));
                break;
            }
            case 2:
                enc.pc_sleep();
                enc.local_timestamp(static_cast<std::uint32_t>(rng() % 5000),
                                    static_cast<std::uint8_t>(rng() % 4));
                break;
            case 3: {
                const bool enter = rng() % 2 != 0;
                const FunctionEvent fe{enter, addr() | 1, addr(),
                                       static_cast<std::uint32_t>(rng() & 0xFFFFFF)};
                enc.software(30, (enter ? 0x40000000U : 0x50000000U) | fe.timestamp, 4);
                enc.software(30, fe.call_site, 4);
                enc.software(30, fe.callee, 4);
                if (enter) s.records.push_back(Record::arc(fe.call_site, fe.callee));
                s.function_events.push_back(fe);
                break;
            }
            case 4: {
                const char c = "abc \n"[rng() % 5];
                enc.software(0, static_cast<std::uint8_t>(c), 1);
                s.console.push_back(c);
                break;
            }
            case 5: {
                // A legacy PC record, split over packets of random sizes.
                const auto pc = addr();
                const Bytes legacy = {0x50, 0x00, static_cast<std::uint8_t>(pc >> 8),
                                      static_cast<std::uint8_t>(pc)};
                if (rng() % 2) {
                    std::uint32_t word = 0;
                    for (int k = 3; k >= 0; --k) word = word << 8 | legacy[k];
                    enc.software(1, word, 4);
                } else {
                    for (auto b : legacy) enc.software(1, b, 1);
                }
                s.records.push_back(Record::pc_sample(pc));
                break;
            }
            case 6:
                enc.exception(static_cast<std::uint16_t>(rng() % 64),
                              static_cast<std::uint8_t>(1 + rng() % 3));
                break;
            default:
                enc.software(static_cast<std::uint16_t>(2 + rng() % 20),
                             static_cast<std::uint32_t>(rng()), 4);
                break;
        }
    }
    sort_records(s.records);
    return s;
}

Bytes frame(const Bytes& itm, std::mt19937_64& rng) {
    Bytes wire;
    TpiuFramer framer(wire);
    framer.full_sync();
    std::size_t pos = 0;
    while (pos < itm.size()) {
        const std::size_t n = std::min(itm.size() - pos, 1 + rng() % 30);
        framer.write(1, std::span<const std::uint8_t>(itm).subspan(pos, n));
        pos += n;
        if (rng() % 4 == 0) framer.write(3, Bytes(1 + rng() % 5, 0xA5));  // another source
        if (rng() % 10 == 0) framer.half_sync();
        if (rng() % 50 == 0) framer.full_sync();
    }
    framer.flush();
    return wire;
}

std::string console_text(const std::vector<StreamEvent>& events) {
    std::string text;
    for (const auto& e : events) {
        if (const auto* c = std::get_if<ConsoleText>(&e)) text += c->text;
    }
    return text;
}

std::vector<FunctionEvent> function_events(const std::vector<StreamEvent>& events) {
    std::vector<FunctionEvent> out;
    for (const auto& e : events) {
        if (const auto* f = std::get_if<FunctionEvent>(&e)) out.push_back(*f);
    }
    return out;
}

TEST_CASE(
    "property: random target output -> encoder (TPIU on and off) -> random chunks -> "
    "decoder -> the same records and events") {
    std::mt19937_64 rng(21);
    for (int round = 0; round < 200; ++round) {
        const bool tpiu = round % 2 == 1;
        const Scenario s = random_scenario(rng, 1 + static_cast<int>(rng() % 300));
        const Bytes wire = tpiu ? frame(s.itm, rng) : s.itm;
        const auto d = decode_chunks(testing::random_chunks(wire, rng, 1 + rng() % 100),
                                     all_ports(tpiu), true);
        REQUIRE(d.records == s.records);
        REQUIRE(function_events(d.events) == s.function_events);
        REQUIRE(console_text(d.events) == s.console);
        REQUIRE(d.stats.bytes_discarded == 0);
        REQUIRE(d.stats.resyncs == 0);
        REQUIRE(d.stats.records() == s.records.size());
    }
}

TEST_CASE("a stimulus port past 255 (a page from a long extension packet) has no use") {
    // Port uses are looked up in a 256-entry table; port 256 must not alias port 0.
    SwoOptions options;
    options.console_port = 0;
    const Bytes wire = {0x88, 0x01,   // long extension: page 0 | 1 << 3 = 8
                        0x01, 'x',    // port 8 * 32 + 0 = 256, one byte
                        0x08,         // page 0 again
                        0x01, '\n'};  // port 0: a console line
    const auto d = decode(wire, options);
    CHECK(d.swo.software_ignored == 1);
    CHECK(d.swo.console_bytes == 1);
    REQUIRE(d.events.size() == 1);
    CHECK(std::get<ConsoleText>(d.events[0]).text == "\n");
}

TEST_CASE("SWO's inlined packet handling sees the packets ItmDecoder reports to any sink") {
    // SwoDecoder runs ItmDecoder::feed_inline with its own handler, tests and other sinks the
    // virtual feed: on random bytes and on real streams both must see the same packets.
    std::mt19937_64 rng(33);
    for (int round = 0; round < 40; ++round) {
        Bytes wire;
        if (round % 2 == 0) {
            wire.resize(1 + rng() % 20000);
            for (auto& b : wire) b = static_cast<std::uint8_t>(rng() % 3 ? rng() : rng() % 8);
        } else {
            wire = random_scenario(rng, 1 + static_cast<int>(rng() % 300)).itm;
        }
        ItmDecoder itm;
        testing::PacketCollector packets;
        for (const auto chunk : testing::random_chunks(wire, rng, 1 + rng() % 64))
            itm.feed(chunk, packets);
        itm.finish();
        std::array<std::uint64_t, 13> per_kind{};
        for (const ItmPacket& p : packets.packets) ++per_kind[static_cast<std::size_t>(p.kind)];

        const auto swo = decode(wire, all_ports(false), true);
        CHECK(swo.swo.packets == per_kind);
        const auto bytes =
            decode_chunks(testing::random_chunks(wire, rng, 1), all_ports(false), true);
        CHECK(bytes.stats == swo.stats);
        CHECK(bytes.swo == swo.swo);
        CHECK(bytes.records == swo.records);
        CHECK(bytes.events == swo.events);
    }
}

TEST_CASE("every split point of a vector gives identical output") {
    std::mt19937_64 rng(4);
    const Scenario s = random_scenario(rng, 12);
    for (const bool tpiu : {false, true}) {
        const Bytes wire = tpiu ? frame(s.itm, rng) : s.itm;
        const auto whole = decode(wire, all_ports(tpiu), true);
        CHECK(whole.records == s.records);
        const std::span<const std::uint8_t> all(wire);
        for (std::size_t a = 0; a <= wire.size(); ++a) {
            for (std::size_t b = a; b <= wire.size(); b += 3) {
                const auto split = decode_chunks(
                    {all.first(a), all.subspan(a, b - a), all.subspan(b)}, all_ports(tpiu), true);
                REQUIRE(split.records == whole.records);
                REQUIRE(split.events == whole.events);
                REQUIRE(split.stats == whole.stats);
                REQUIRE(split.swo == whole.swo);
            }
        }
    }
}

TEST_CASE("millions of random bytes, TPIU on and off: never a crash, chunking invariant") {
    std::mt19937_64 rng(8);
    Bytes wire(2'000'000);
    for (auto& b : wire) b = static_cast<std::uint8_t>(rng() % 4 ? rng() : rng() % 2 ? 0 : 0xFF);
    for (const bool tpiu : {false, true}) {
        const auto whole = decode(wire, all_ports(tpiu), true);
        const auto split =
            decode_chunks(testing::random_chunks(wire, rng, 333), all_ports(tpiu), true);
        CHECK(split.stats == whole.stats);
        CHECK(split.swo == whole.swo);
        CHECK(split.records == whole.records);
        CHECK(split.events == whole.events);
        CHECK(whole.stats.bytes_in == wire.size());
        CHECK(whole.stats.bytes_discarded > 0);
    }
}

}  // namespace
}  // namespace rackprof::protocol
