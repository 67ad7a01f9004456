#include "gmon/calling_context_export.h"
#include "gmon/pprof_export.h"

#include <doctest/doctest.h>

#include <map>
#include <nlohmann/json.hpp>

using namespace rackprof::gmon;
using rackprof::protocol::FunctionEvent;

namespace {

// main -> f (100 cycles, a SysTick of 30 in the middle), main open at the end.
CallingContextTree sample_tree() {
    CallingContextBuilder b;
    const auto ev = [&](bool enter, std::uint32_t f, std::uint32_t t, std::uint16_t x = 0) {
        b.on_event(FunctionEvent{enter, 0, f, t, 32, x});
    };
    ev(true, 0x100, 0);
    ev(true, 0x200, 10);
    ev(true, 0x300, 50, 15);
    ev(false, 0x300, 80, 15);
    ev(false, 0x200, 140);
    ev(true, 0x200, 150);
    ev(false, 0x200, 160);
    return b.snapshot();
}

}  // namespace

TEST_CASE("cct exports: folded paths in cycles, handlers under their exception's frame") {
    const ContextFrameNames names(nullptr);
    CHECK(cct_folded(sample_tree(), names) ==
          "0x100 [incomplete] 20\n"
          "0x100 [incomplete];0x200 110\n"
          "[SysTick];0x300 30\n");
}

TEST_CASE("cct exports: speedscope events nest and last each path's inclusive cycles") {
    const auto doc =
        nlohmann::json::parse(cct_speedscope(sample_tree(), ContextFrameNames(nullptr), "t"));
    REQUIRE(doc["profiles"].size() == 2);  // thread mode, then SysTick
    const auto& thread = doc["profiles"][0];
    CHECK(thread["type"] == "evented");
    CHECK(thread["endValue"] == 130);
    std::vector<std::pair<std::size_t, std::uint64_t>> open;
    std::map<std::string, std::uint64_t> inclusive;
    for (const auto& e : thread["events"]) {
        const auto frame = e["frame"].get<std::size_t>();
        if (e["type"] == "O") {
            open.emplace_back(frame, e["at"].get<std::uint64_t>());
            continue;
        }
        REQUIRE(open.back().first == frame);
        inclusive[doc["shared"]["frames"][frame]["name"]] +=
            e["at"].get<std::uint64_t>() - open.back().second;
        open.pop_back();
    }
    CHECK(open.empty());
    CHECK(inclusive["0x100 [incomplete]"] == 130);
    CHECK(inclusive["0x200"] == 110);
    CHECK(doc["profiles"][1]["endValue"] == 30);
}

TEST_CASE("cct exports: the JSON document's nodes and arcs") {
    const auto doc = nlohmann::json::parse(cct_json(sample_tree(), ContextFrameNames(nullptr)));
    CHECK(doc["schema"] == "rackprof.cct/1");
    CHECK(doc["calling_context"]["incomplete_nodes"] == 1);
    CHECK(doc["calling_context"]["total_cycles"] == 160);
    REQUIRE(doc["calling_context"]["arcs"].size() == 1);
    const auto& arc = doc["calling_context"]["arcs"][0];
    CHECK(arc["caller"] == "0x100");
    CHECK(arc["callee"] == "0x200");
    CHECK(arc["calls"] == 2);
    CHECK(arc["measured_cycles"] == 110);
    CHECK(arc["estimated_cycles"] == 110.0);
    CHECK(doc["nodes"][0]["parent"].is_null());
    CHECK(doc["nodes"][0]["name"] == "[Thread]");
}

TEST_CASE("cct exports: without a tree they refuse rather than estimate") {
    auto input = std::make_shared<ExportInput>();
    for (const char* f : {"cct-folded", "cct-speedscope", "cct-pprof", "cct-json"}) {
        CAPTURE(f);
        CHECK_THROWS_AS(open_export(f, input), ExportNeedsCallingContext);
    }
    input->calling_context = std::make_shared<const CallingContextTree>(sample_tree());
    std::string folded;
    export_to("cct-folded", input, [&](std::string_view c) { folded += c; });
    CHECK(folded == cct_folded(sample_tree(), ContextFrameNames(nullptr)));
    std::string pprof;
    export_to("cct-pprof", input, [&](std::string_view c) { pprof += c; });
    CHECK(gunzip(pprof).size() > 0);
}
