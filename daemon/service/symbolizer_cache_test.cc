// ELF images by path: kept until their file changes, only the most recently used.
#include "daemon/service/symbolizer_cache.h"

#include <doctest/doctest.h>

#include <chrono>

#include "daemon/service/scratch_rack_test.h"
#include "gmon/synthetic_elf.h"

namespace rackprof::daemon::service {
namespace {

using namespace std::chrono_literals;

TEST_CASE("the symbolizer cache keeps images until their file changes, and only the newest") {
    ScratchDir dir;
    const auto elf = dir.path / "fw.elf";
    gmon::write_synthetic_elf(elf, {{"main", 0x100, 0x20}}, 0x100, 0x200);
    SymbolizerCache cache(2);
    const auto first = cache.get(elf.string());
    CHECK(cache.get(elf.string()) == first);
    gmon::write_synthetic_elf(elf, {{"main", 0x100, 0x40}}, 0x100, 0x200);
    std::filesystem::last_write_time(elf, std::filesystem::last_write_time(elf) + 2s);
    CHECK(cache.get(elf.string()) != first);  // rewritten: loaded again
    const auto kept = cache.get(elf.string());
    for (const char* other : {"a.elf", "b.elf"}) {
        gmon::write_synthetic_elf(dir.path / other, {{"f", 0x100, 0x20}}, 0x100, 0x200);
        cache.get((dir.path / other).string());
    }
    CHECK(cache.get(elf.string()) != kept);  // evicted by the two newer ones
    CHECK_THROWS(cache.get((dir.path / "missing.elf").string()));
}

}  // namespace
}  // namespace rackprof::daemon::service
