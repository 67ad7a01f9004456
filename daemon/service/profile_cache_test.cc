// Whole sessions' profiles, kept while their aggregate and ELF are the ones served.
#include "daemon/service/profile_cache.h"

#include <doctest/doctest.h>

#include "daemon/service/scratch_rack_test.h"
#include "gmon/synthetic_elf.h"

namespace rackprof::daemon::service {
namespace {

// A profile source over an ELF of two functions, main (0x100) and work (0x120).
gmon::ProfileSource main_and_work(const ScratchDir& dir) {
    const auto elf = dir.path / "fw.elf";
    gmon::write_synthetic_elf(elf, {{"main", 0x100, 0x20}, {"work", 0x120, 0x20}}, 0x100, 0x200);
    gmon::ProfileSource source;
    source.elf = gmon::Symbolizer::load(elf);
    return source;
}

TEST_CASE("the profile cache serves a profile while its aggregate and ELF are the ones served") {
    ScratchDir dir;
    gmon::ProfileSource source = main_and_work(dir);
    auto counts = std::make_shared<gmon::Aggregate>();
    counts->add_arc(0x105, 0x121, 7);
    counts->add_pc(0x124, 3);
    source.aggregate = counts;
    ProfileCache cache(2);
    const auto first = cache.get(1, source);
    CHECK(first->profile.nodes[1].ncalls == 7);
    CHECK(cache.get(1, source) == first);
    CHECK(cache.get(2, source) != first);  // another session's entry

    auto more = std::make_shared<gmon::Aggregate>(*counts);  // a commit: a new aggregate
    more->add_arc(0x105, 0x121, 1);
    source.aggregate = more;
    const auto after_commit = cache.get(1, source);
    CHECK(after_commit != first);
    CHECK(after_commit->profile.nodes[1].ncalls == 8);

    source.elf = gmon::Symbolizer::load(dir.path / "fw.elf");  // the firmware loaded again
    CHECK(cache.get(1, source) != after_commit);
    cache.get(3, source);
    cache.get(4, source);
    const auto evicted_for = cache.get(1, source);  // two newer sessions pushed it out
    CHECK(evicted_for->profile.nodes[1].ncalls == 8);
}

// GET .../profile reports "wrong_elf" from this: a capture of other firmware is served, with
// the evidence, never refused.
TEST_CASE("the profile cache keeps how the capture fits the ELF's code") {
    ScratchDir dir;
    gmon::ProfileSource source = main_and_work(dir);
    auto fits = std::make_shared<gmon::Aggregate>();
    fits->add_arc(0x105, 0x125, 7);  // work's entry + 4: after its prologue's BL
    source.aggregate = fits;
    ProfileCache cache(2);
    CHECK_FALSE(cache.get(1, source)->fit.suspicious());
    auto other = std::make_shared<gmon::Aggregate>();
    for (std::uint32_t at : {0x10D, 0x113, 0x12B, 0x131}) other->add_arc(0x105, at, 5);
    source.aggregate = other;
    const auto wrong = cache.get(1, source);
    CHECK(wrong->fit.targets_off_entry == 4);
    CHECK(wrong->fit.suspicious());
    CHECK(wrong->profile.arcs.size() == 2);  // profiled all the same
}

}  // namespace
}  // namespace rackprof::daemon::service
