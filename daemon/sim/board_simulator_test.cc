#include "daemon/sim/board_simulator.h"

#include <doctest/doctest.h>

#include <map>

#include "protocol/wire_format.h"

namespace rackprof::daemon::sim {
namespace {

struct Capture {
    std::vector<std::uint8_t> bytes;
    GroundTruth truth;
};

Capture run(SimulatorOptions options) {
    Capture c;
    c.truth = simulate_board(options, [&](const std::uint8_t* data, std::size_t size) {
        c.bytes.insert(c.bytes.end(), data, data + size);
    });
    return c;
}

gmon::Aggregate decode(const Capture& c, const SimulatorOptions& options,
                       protocol::DecoderStats* stats = nullptr) {
    gmon::Aggregate aggregate;
    gmon::AggregateSink sink(aggregate);
    const auto decoder =
        protocol::make_decoder({wire_format_name(options.protocol),
                                options.encoding == protocol::LegacyEncoding::kHex ? "hex" : "bin",
                                options.addr_bytes, c.truth.code_range});
    decoder->feed(c.bytes, sink);
    decoder->finish(sink);
    if (stats) *stats = decoder->stats();
    return aggregate;
}

TEST_CASE("every built-in model decodes back to its ground truth exactly") {
    for (const char* model : {"blinky", "conflation", "deterministic", "synced"}) {
        for (int width : {3, 4}) {
            for (auto encoding :
                 {protocol::LegacyEncoding::kBinary, protocol::LegacyEncoding::kHex}) {
                SimulatorOptions o;
                o.model = model;
                o.addr_bytes = width;
                o.encoding = encoding;
                o.max_iterations = 20;
                const Capture c = run(o);
                protocol::DecoderStats stats;
                CHECK(decode(c, o, &stats) == c.truth.aggregate);
                CHECK(stats.bytes_discarded == 0);
                CHECK(stats.arcs == c.truth.arcs_sent);
                CHECK(stats.pc_samples == c.truth.pc_samples_sent);
                CHECK(stats.bytes_in == c.truth.wire_bytes);
            }
        }
    }
}

TEST_CASE("the deterministic model has the documented call counts") {
    SimulatorOptions o;
    o.model = "deterministic";
    o.max_iterations = 10;
    const Capture c = run(o);
    std::map<std::pair<std::string, std::string>, std::uint64_t> by_name;
    auto name_of = [&](std::uint64_t addr) {
        for (const auto& f : c.truth.functions) {
            if (addr >= f.addr && addr < f.addr + f.size) return f.name;
        }
        return std::string("?");
    };
    for (const auto& a : c.truth.aggregate.arcs())
        by_name[{name_of(a.from_pc), name_of(a.self_pc)}] += a.count;
    CHECK(by_name[{"main", "alpha"}] == 30);
    CHECK(by_name[{"alpha", "beta"}] == 60);
    CHECK(by_name[{"beta", "gamma"}] == 300);
    CHECK(by_name[{"factorial", "factorial"}] == 40);
    CHECK(by_name[{"ping", "pong"}] == 20);
    CHECK(by_name[{"pong", "ping"}] == 20);
}

TEST_CASE("a slower build: the named function's samples scale, every call stays") {
    SimulatorOptions o;
    o.model = "deterministic";
    o.max_iterations = 10;
    SimulatorOptions slower = o;
    slower.work_factor = {{"gamma", 3}};
    const Capture base = run(o), changed = run(slower);
    auto samples_in = [](const Capture& c, const std::string& name) {
        std::uint64_t n = 0;
        for (const auto& f : c.truth.functions) {
            if (f.name != name) continue;
            for (const auto& p : c.truth.aggregate.pc_samples())
                if (p.pc >= f.addr && p.pc < f.addr + f.size) n += p.count;
        }
        return n;
    };
    CHECK(samples_in(changed, "gamma") == 3 * samples_in(base, "gamma"));
    CHECK(samples_in(changed, "beta") == samples_in(base, "beta"));
    CHECK(samples_in(base, "gamma") > 0);
    CHECK(changed.truth.aggregate.arcs() == base.truth.aggregate.arcs());
}

TEST_CASE("the same seed gives the same bytes; faults are counted and survivable") {
    SimulatorOptions o;
    o.max_iterations = 50;
    CHECK(run(o).bytes == run(o).bytes);
    o.faults = {0.001, 0.001, 0.001};
    o.seed = 9;
    const Capture c = run(o);
    CHECK(c.truth.faults.dropped + c.truth.faults.flipped + c.truth.faults.inserted > 0);
    protocol::DecoderStats stats;
    const gmon::Aggregate got = decode(c, o, &stats);
    CHECK(stats.bytes_discarded > 0);
    CHECK(stats.records() <= c.truth.arcs_sent + c.truth.pc_samples_sent);
    CHECK(got.total_calls() <= c.truth.aggregate.total_calls() + 1);
}

TEST_CASE("framed: every model decodes back exactly, with and without on-target caches") {
    for (const char* model : {"blinky", "conflation", "deterministic"}) {
        for (std::size_t cache : {0u, 1u, 8u}) {
            CAPTURE(model);
            CAPTURE(cache);
            SimulatorOptions o;
            o.model = model;
            o.protocol = WireProtocol::kFramed;
            o.addr_bytes = cache == 1 ? 3 : 4;
            o.arc_cache = cache;
            o.pc_cache = cache;
            o.arc_cache_flush = 3;
            o.max_iterations = 20;
            const Capture c = run(o);
            protocol::DecoderStats stats;
            CHECK(decode(c, o, &stats) == c.truth.aggregate);
            CHECK(stats.frames == c.truth.frames_sent);
            CHECK(stats.frames_lost + stats.frames_bad + stats.bytes_discarded == 0);
            CHECK(stats.arcs == c.truth.arcs_sent);
            CHECK(c.truth.aggregate.total_calls() == c.truth.calls);
            if (cache == 8) CHECK(c.truth.arcs_sent < c.truth.calls);
        }
    }
}

TEST_CASE("framed: whole frames dropped on the link are exactly the frames lost") {
    SimulatorOptions o;
    o.model = "deterministic";
    o.protocol = WireProtocol::kFramed;
    o.max_iterations = 200;
    o.faults.frame_drop = 0.1;
    o.seed = 3;
    const Capture c = run(o);
    CHECK(c.truth.faults.frames_dropped > 10);
    protocol::DecoderStats stats;
    const gmon::Aggregate got = decode(c, o, &stats);
    CHECK(stats.frames_lost == c.truth.faults.frames_dropped);
    CHECK(stats.frames == c.truth.frames_sent - c.truth.faults.frames_dropped);
    CHECK(stats.frames_bad == 0);
    CHECK(got.total_calls() < c.truth.aggregate.total_calls());
    o.encoding = protocol::LegacyEncoding::kHex;
    CHECK_THROWS_AS(run(o), std::invalid_argument);  // framed is binary only
}

TEST_CASE("synced: a fixed sampling period hits one PC every pass; dithered, the true shares") {
    SimulatorOptions o;
    o.model = "synced";
    o.max_iterations = 4000;
    const Capture fixed = run(o);
    // One sample a pass (the loop lasts one period), always a quarter period in: compute()
    // (0x2040..0x213f, cycles 100..700) at 150 of its 600 cycles, halfword 32 of 128.
    REQUIRE(fixed.truth.aggregate.pc_samples().size() == 1);
    CHECK(fixed.truth.aggregate.pc_samples()[0].pc == 0x2040 + 2 * 32);
    CHECK(fixed.truth.aggregate.pc_samples()[0].count == 4000);
    o.dither_cycles = 125;
    const Capture dithered = run(o);
    std::map<std::string, std::uint64_t> in;
    std::uint64_t total = 0;
    for (const auto& p : dithered.truth.aggregate.pc_samples()) {
        for (const auto& f : dithered.truth.functions)
            if (p.pc >= f.addr && p.pc < f.addr + f.size) in[f.name] += p.count;
        total += p.count;
    }
    // The mean period stays 1000 cycles: about one sample a pass.
    CHECK(total == doctest::Approx(4000).epsilon(0.01));
    CHECK(static_cast<double>(in["main"]) / total == doctest::Approx(0.10).epsilon(0.15));
    CHECK(static_cast<double>(in["compute"]) / total == doctest::Approx(0.60).epsilon(0.05));
    CHECK(static_cast<double>(in["idle_wait"]) / total == doctest::Approx(0.30).epsilon(0.08));
    CHECK(decode(dithered, o) == dithered.truth.aggregate);
    o.dither_cycles = 1000;
    CHECK_THROWS_AS(run(o), std::invalid_argument);
}

TEST_CASE("a byte budget stops the simulation") {
    SimulatorOptions o;
    o.max_iterations = 0;
    o.max_bytes = 100000;
    const Capture c = run(o);
    CHECK(c.bytes.size() >= 100000);
    CHECK(c.bytes.size() < 200000);
    o.model = "no-such-model";
    CHECK_THROWS_AS(run(o), std::invalid_argument);
}

}  // namespace
}  // namespace rackprof::daemon::sim
