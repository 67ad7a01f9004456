#include "daemon/board_simulator.h"

#include <doctest/doctest.h>

#include <map>

#include "protocol/legacy_decoder.h"

namespace rackprof::daemon {
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
    protocol::LegacyDecoder decoder({options.addr_bytes, options.encoding, c.truth.code_range});
    decoder.feed(c.bytes, sink);
    decoder.finish(sink);
    if (stats) *stats = decoder.stats();
    return aggregate;
}

TEST_CASE("every built-in model decodes back to its ground truth exactly") {
    for (const char* model : {"blinky", "conflation", "deterministic"}) {
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
}  // namespace rackprof::daemon
