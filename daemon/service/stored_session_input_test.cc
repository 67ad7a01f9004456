// A stored session as the export pipeline's input: the one the daemon's exports and `rackprof
// convert --session` both make (tests/integration/stored_session_export_test.cc compares them).
#include "daemon/service/stored_session_input.h"

#include <doctest/doctest.h>

#include "daemon/service/scratch_rack_test.h"
#include "gmon/synthetic_elf.h"

namespace rackprof::daemon::service {
namespace {

using protocol::Record;

TEST_CASE("stored session input: the summary names the session, its wire and its counts") {
    storage::SessionInfo info;
    info.id = 4;
    info.spec.board = "b1";
    info.spec.protocol = "itm";
    info.spec.addr_bytes = 4;
    info.state = "completed";
    info.counters.arcs = 12;
    info.counters.gaps = 1;
    info.target = {"00ff", 0x100, 0x200, ""};
    info.exceptions = {{15, 3, 90}};
    const nlohmann::json summary = stored_session_summary(info, nullptr);
    CHECK(
        summary["session"] ==
        nlohmann::json{
            {"id", 4}, {"board", "b1"}, {"state", "completed"}, {"gaps", 1}, {"records_lost", 0}});
    CHECK(summary["board"] == "b1");
    CHECK(summary["protocol"] == "itm");
    CHECK(summary["addr_bytes"] == 4);
    CHECK(summary["decoder"]["arcs"] == 12);
    CHECK(summary["target_build_id"] == "00ff");
    CHECK(summary["exceptions"] ==
          nlohmann::json::parse(R"([{"exception": 15, "entries": 3, "cycles": 90}])"));
    CHECK_FALSE(summary.contains("elf"));

    info.spec.protocol = "legacy";
    info.target = {};
    const nlohmann::json legacy = stored_session_summary(info, nullptr);
    CHECK_FALSE(legacy.contains("exceptions"));  // an SWO trace's only
    CHECK_FALSE(legacy.contains("target_build_id"));
}

TEST_CASE("stored session input: its source, its ELF named, and its records paged from storage") {
    ScratchRack rack;
    const auto elf_path = rack.dir.path / "fw.elf";
    gmon::write_synthetic_elf(elf_path, {{"main", 0x100, 0x20}}, 0x100, 0x200);
    const std::int64_t id = rack.store("b1", {Record::arc(0x105, 0x101, 2)}, elf_path.string());
    rack.capture.shutdown();
    auto store = std::make_shared<storage::SessionStore>(rack.config.storage_path,
                                                         storage::Database::Mode::kReadOnly);
    auto info = *store->session(id);
    info.spec.histograms = std::vector<gmon::HistogramSpec>{{0x100, 0x200, 4, 100, 0}};
    info.target = {"", 0x100, 0x180, ""};
    const auto elf = gmon::Symbolizer::load(elf_path);
    const auto input = stored_session_input(
        info, {std::make_shared<const gmon::Aggregate>(store->aggregate(id)), elf, nullptr},
        [store] { return store; });
    CHECK(input->source.aggregate->total_calls() == 2);
    CHECK(input->source.elf == elf);
    CHECK(input->source.histograms == info.spec.histograms);
    REQUIRE(input->source.announced_range);
    CHECK(input->source.announced_range->second == 0x180);
    CHECK(input->summary["elf"] == elf_path.string());
    CHECK(input->summary["session"]["id"] == id);
    CHECK_FALSE(input->calling_context);
    REQUIRE(input->records);
    const auto page = input->records();
    REQUIRE(page);
    REQUIRE(page->size() == 1);
    CHECK(page->front().records == std::vector<Record>{Record::arc(0x105, 0x101, 2)});
    CHECK_FALSE(input->records());

    // Nothing read: an empty aggregate, addresses only.
    const auto bare = stored_session_input(info, {});
    CHECK(bare->source.aggregate->total_calls() == 0);
    CHECK_FALSE(bare->source.elf);
    CHECK_FALSE(bare->raw);
}

}  // namespace
}  // namespace rackprof::daemon::service
