// Selections of stored sessions merged board by board: the fleet's profile, each board's
// share, and finished merges kept.
#include "daemon/service/selection_merges.h"

#include <doctest/doctest.h>

#include "daemon/service/failure_of_test.h"
#include "daemon/service/scratch_rack_test.h"
#include "gmon/synthetic_elf.h"

namespace rackprof::daemon::service {
namespace {

using protocol::Record;

Selection boards(const std::string& names) {
    return parse_selection(parse_query_string("board=" + names));
}

// A rack's selection merges over their own readers, aggregates and ELF cache.
struct MergesOf {
    explicit MergesOf(ScratchRack& rack)
        : readers(rack.config.storage_path, 2),
          aggregates(rack.capture.aggregates(), readers),
          merges(rack.capture, readers, aggregates, elves, rack.dir.path / "by-name") {}
    storage::ReaderPool readers;
    StoredAggregates aggregates;
    SymbolizerCache elves;
    SelectionMerges merges;
};

TEST_CASE("selection merges: the boards' sums are the spread's, the fleet's their sum") {
    ScratchRack rack;
    const auto elf = rack.dir.path / "fw.elf";
    gmon::write_synthetic_elf(elf, {{"main", 0x100, 0x20}, {"work", 0x120, 0x20}}, 0x100, 0x200);
    rack.store("b1", {Record::arc(0x105, 0x121, 2), Record::pc_sample(0x124, 3)}, elf.string());
    rack.store("b1", {Record::arc(0x105, 0x121, 1), Record::pc_sample(0x104, 1)}, elf.string());
    rack.store("b2", {Record::arc(0x105, 0x121, 4), Record::pc_sample(0x124, 5)}, elf.string());
    MergesOf of(rack);
    SelectionMerges& merges = of.merges;

    const auto merged = merges.merged(boards("b1,b2"));
    CHECK(merged->input->source.aggregate->total_calls() == 7);
    CHECK(merged->input->source.aggregate->total_samples() == 9);
    CHECK(merged->input->summary["sessions"].size() == 3);
    REQUIRE(merged->boards.size() == 2);
    CHECK(merged->boards[0].board == "b1");
    CHECK(merged->boards[0].sessions.size() == 2);
    CHECK(merged->boards[0].calls == 3);
    CHECK(merged->boards[0].function.at("work") == 3);
    CHECK(merged->boards[0].function.at("main") == 1);
    CHECK(merged->boards[1].samples == 5);
    CHECK(merges.spread_boards(*merged, {"work"}).size() == 2);
    const gmon::Profile& profile = SelectionMerges::profile_of(*merged);
    std::uint64_t work_calls = 0;
    for (std::size_t i = 0; i < profile.symbols.size(); ++i) {
        if (profile.symbols[i].name == "work") work_calls = profile.nodes[i].ncalls;
    }
    CHECK(work_calls == 7);
    // Finished sessions cannot change: their merge is kept.
    CHECK(merges.merged(boards("b1,b2")) == merged);
    CHECK(merges.merged(boards("b2")) != merged);
}

TEST_CASE("selection merges: without an ELF there is no profile to name functions") {
    ScratchRack rack;
    rack.store("b1", {Record::arc(0x105, 0x121, 2)});
    MergesOf of(rack);
    SelectionMerges& merges = of.merges;
    const auto merged = merges.merged(boards("b1"));
    CHECK(merged->input->source.aggregate->total_calls() == 2);
    CHECK(failure_of([&] { SelectionMerges::profile_of(*merged); }) == Failure::kNoElf);
}

}  // namespace
}  // namespace rackprof::daemon::service
