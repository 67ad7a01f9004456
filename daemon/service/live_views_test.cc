#include "daemon/service/live_views.h"

#include <doctest/doctest.h>

#include "gmon/temp_elf_test.h"

namespace rackprof::daemon::service {
namespace {

capture::LiveSnapshot snapshot_of(std::shared_ptr<const gmon::Symbolizer> elf,
                                  std::uint64_t version, std::uint64_t work_samples) {
    auto aggregate = std::make_shared<gmon::Aggregate>();
    for (std::uint32_t i = 0; i < 7; ++i) aggregate->add_arc(0x104, 0x140 + 4 * i, 10 + i);
    aggregate->add_pc(0x150, work_samples);
    aggregate->add_pc(0x108, 10);
    capture::LiveSnapshot s;
    s.session = 1;
    s.state.board = "b";
    s.state.elf = std::move(elf);
    s.aggregate = aggregate;
    s.version = version;
    return s;
}

TEST_CASE("live views: top functions through the profile, the 5 busiest arcs, cached by version") {
    const gmon::TempElf file({{"main", 0x100, 0x40}, {"work", 0x140, 0x40}}, 0x100, 0x180);
    const auto elf = gmon::Symbolizer::load(file.path);
    LiveViews views;
    const auto view = views.view_of(1, snapshot_of(elf, 1, 30));
    REQUIRE(view);
    CHECK(view->state.board == "b");
    REQUIRE(view->top_functions.size() == 2);
    CHECK(view->top_functions[0].name == "work");
    CHECK(view->top_functions[0].self_percent == doctest::Approx(75.0));
    CHECK(view->top_functions[0].calls.has_value());
    CHECK(view->top_functions[1].name == "main");
    CHECK_FALSE(view->top_functions[1].calls.has_value());  // sampled, never called
    REQUIRE(view->busiest_arcs.size() == 5);
    CHECK(view->busiest_arcs[0].count == 16);
    CHECK(view->busiest_arcs[4].count == 12);

    // The same version is not computed again, even if the aggregate object differs.
    CHECK(views.view_of(1, snapshot_of(elf, 1, 90))->top_functions[0].self_percent ==
          doctest::Approx(75.0));
    // A new version is.
    CHECK(views.view_of(1, snapshot_of(elf, 2, 90))->top_functions[0].self_percent ==
          doctest::Approx(90.0));
    // Without an ELF there are no names; not capturing, no view.
    CHECK(views.view_of(1, snapshot_of(nullptr, 3, 90))->top_functions.empty());
    CHECK_FALSE(views.view_of(1, std::nullopt));
}

}  // namespace
}  // namespace rackprof::daemon::service
