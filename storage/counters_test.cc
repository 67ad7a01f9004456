#include "storage/counters.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "storage/counters_json.h"

namespace rackprof::storage {
namespace {

using nlohmann::json;

std::vector<std::string_view> session_counter_names() {
    std::vector<std::string_view> names;
    for (const auto& counter : kSessionCounters) names.push_back(counter.name);
    return names;
}

// Every counter a different value, written through the table: 1, 2, 3, ...
SessionCounters numbered_counters() {
    SessionCounters counters;
    std::uint64_t n = 0;
    for (const auto& counter : kSessionCounters) counters.*counter.member = ++n;
    return counters;
}

TEST_CASE("the counters' table covers every SessionCounters field once, in declaration order") {
    CHECK(sizeof(SessionCounters) == kSessionCounters.size() * sizeof(std::uint64_t));
    // The JSON views' keys, and the API and dashboard with them, follow this order.
    CHECK(session_counter_names() ==
          std::vector<std::string_view>{
              "bytes_in", "bytes_discarded", "resyncs", "arcs", "pc_samples", "gaps",
              "records_lost", "bytes_lost", "frames", "frames_bad", "frames_lost", "target_dropped",
              "overflows", "sleep_samples", "records_lost_storage", "bytes_lost_storage",
              "samples_halted_ns", "stack_unwind_failures"});
    // Two rows naming one field would leave another unwritten and overwrite the first value.
    const SessionCounters counters = numbered_counters();
    std::vector<std::uint64_t> seen;
    for_each_counter(counters, [&](const SessionCounter&, std::uint64_t v) { seen.push_back(v); });
    CHECK(seen == std::vector<std::uint64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                             17, 18});
    CHECK(counters.bytes_in == 1);
    CHECK(counters.sleep_samples == 14);
}

TEST_CASE("the decoder's table covers every DecoderStats field once, with unique names") {
    CHECK(sizeof(protocol::DecoderStats) ==
          protocol::kDecoderCounters.size() * sizeof(std::uint64_t));
    protocol::DecoderStats stats;
    std::uint64_t n = 0;
    for (const auto& counter : protocol::kDecoderCounters) stats.*counter.member = ++n;
    std::set<std::uint64_t> values;
    std::set<std::string_view> names;
    protocol::for_each_counter(stats,
                               [&](const protocol::DecoderCounter& counter, std::uint64_t v) {
                                   values.insert(v);
                                   names.insert(counter.name);
                               });
    CHECK(values.size() == protocol::kDecoderCounters.size());
    CHECK(names.size() == protocol::kDecoderCounters.size());
    CHECK(stats.bytes_in == 1);
    CHECK(stats.stack_unwind_failures == n);
}

TEST_CASE("decoder counters go into the session counters of the same name, and back") {
    protocol::DecoderStats stats;
    std::uint64_t n = 100;
    for (const auto& counter : protocol::kDecoderCounters) stats.*counter.member = ++n;
    SessionCounters counters;
    counters.gaps = 1;
    counters.records_lost = 2;
    counters.bytes_lost = 3;
    set_decoder_counters(counters, stats);
    CHECK(counters.bytes_in == stats.bytes_in);
    CHECK(counters.pc_samples == stats.pc_samples);
    CHECK(counters.frames == stats.frames);
    CHECK(counters.target_dropped == stats.target_dropped);
    CHECK(counters.sleep_samples == stats.sleep_samples);
    // The session's own counters are no decoder's.
    CHECK(counters.gaps == 1);
    CHECK(counters.records_lost == 2);
    CHECK(counters.bytes_lost == 3);
    CHECK(decoder_counters(counters) == stats);
    for (const auto& pair : kDecoderToSession) CHECK(counters.*pair.session == stats.*pair.decoder);
}

TEST_CASE("the API's counters: every counter by name") {
    const SessionCounters c = numbered_counters();
    const json expected = {{"bytes_in", 1},
                           {"bytes_discarded", 2},
                           {"resyncs", 3},
                           {"arcs", 4},
                           {"pc_samples", 5},
                           {"gaps", 6},
                           {"records_lost", 7},
                           {"bytes_lost", 8},
                           {"frames", 9},
                           {"frames_bad", 10},
                           {"frames_lost", 11},
                           {"target_dropped", 12},
                           {"overflows", 13},
                           {"sleep_samples", 14},
                           {"records_lost_storage", 15},
                           {"bytes_lost_storage", 16},
                           {"samples_halted_ns", 17},
                           {"stack_unwind_failures", 18}};
    CHECK(counters_json(c) == expected);
    CHECK(counters_json(c).dump() == expected.dump());
    CHECK(counters_json(SessionCounters{}).size() == kSessionCounters.size());
}

TEST_CASE("the live feed's totals and losses") {
    const SessionCounters c = numbered_counters();
    const json totals = {
        {"bytes_in", 1}, {"arcs", 4}, {"pc_samples", 5}, {"samples_halted_ns", 17}};
    const json losses = {{"bytes_discarded", 2},
                         {"resyncs", 3},
                         {"gaps", 6},
                         {"records_lost", 7},
                         {"frames_bad", 10},
                         {"frames_lost", 11},
                         {"target_dropped", 12},
                         {"overflows", 13},
                         {"sleep_samples", 14},
                         {"records_lost_storage", 15},
                         {"stack_unwind_failures", 18}};
    CHECK(live_totals_json(c) == totals);
    CHECK(live_losses_json(c) == losses);
    CHECK(live_totals_json(SessionCounters{}).is_object());
}

TEST_CASE("convert's decoder stats: every decoder counter by name") {
    protocol::DecoderStats s;
    std::uint64_t n = 0;
    for (const auto& counter : protocol::kDecoderCounters) s.*counter.member = ++n;
    const json expected = {{"bytes_in", 1},
                           {"bytes_discarded", 2},
                           {"resyncs", 3},
                           {"arcs", 4},
                           {"pc_samples", 5},
                           {"frames", 6},
                           {"frames_bad", 7},
                           {"frames_lost", 8},
                           {"target_dropped", 9},
                           {"overflows", 10},
                           {"sleep_samples", 11},
                           {"samples_halted_ns", 12},
                           {"stack_unwind_failures", 13}};
    CHECK(decoder_stats_json(s) == expected);
}

TEST_CASE("the losses are the counters of data that never became a record") {
    std::set<std::string_view> losses;
    for (const auto& counter : kSessionCounters) {
        if (counter.is_loss) losses.insert(counter.name);
    }
    CHECK(losses == std::set<std::string_view>{"bytes_discarded", "resyncs", "gaps", "records_lost",
                                               "bytes_lost", "frames_bad", "frames_lost",
                                               "target_dropped", "overflows",
                                               "records_lost_storage", "bytes_lost_storage"});
}

}  // namespace
}  // namespace rackprof::storage
