#include "gmon/elf_fit.h"

#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>

#include "gmon/synthetic_elf.h"

namespace rackprof::gmon {
namespace {

// Two firmware images over the same code range, with different functions (as blinky.elf and
// shield.elf both start at 0x410): each function of the synthetic ELF starts with a BL.
struct Images {
    std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("rackprof-elf-fit-" + std::to_string(::getpid()));
    std::vector<SyntheticFunction> a, b;
    std::shared_ptr<const Symbolizer> elf_a, elf_b;
    Images() {
        std::filesystem::create_directories(dir);
        for (std::uint32_t i = 0; i < 20; ++i)
            a.push_back({"a" + std::to_string(i), 0x410 + 0x40 * i, 0x40});
        for (std::uint32_t i = 0; i < 13; ++i)
            b.push_back({"b" + std::to_string(i), 0x410 + 0x62 * i, 0x62});
        write_synthetic_elf(dir / "a.elf", a, 0x410, 0x410 + 0x40 * 20);
        write_synthetic_elf(dir / "b.elf", b, 0x410, 0x410 + 0x62 * 13);
        elf_a = Symbolizer::load(dir / "a.elf");
        elf_b = Symbolizer::load(dir / "b.elf");
    }
    ~Images() { std::filesystem::remove_all(dir); }
};

// What mcount reports for a's functions: callers' return addresses, the callees' entry + 4 (the
// return address of the prologue's BL).
Aggregate capture_of(const std::vector<SyntheticFunction>& fns) {
    Aggregate aggregate;
    for (std::size_t i = 0; i + 1 < fns.size(); ++i) {
        aggregate.add_arc((fns[i].addr + 0x10) | 1, (fns[i + 1].addr + 4) | 1, 3);
        aggregate.add_pc(fns[i].addr + 0x1A, 5);
    }
    return aggregate;
}

TEST_CASE("a capture fits its own ELF: call targets just after the prologue's call") {
    Images images;
    const ElfFit fit = check_elf_fit(capture_of(images.a), *images.elf_a);
    CHECK(fit.targets == 19);
    CHECK(fit.targets_off_entry == 0);
    CHECK(fit.pcs == 19);
    CHECK(fit.pcs_off_code == 0);
    CHECK_FALSE(fit.suspicious());
    // -finstrument-functions reports the function's own address: an entry too.
    Aggregate entries;
    for (const auto& f : images.a) entries.add_arc(0x412 | 1, f.addr | 1, 1);
    CHECK(check_elf_fit(entries, *images.elf_a).targets_off_entry == 0);
}

TEST_CASE("a capture of other firmware in the same code range does not fit, with evidence") {
    Images images;
    const ElfFit fit = check_elf_fit(capture_of(images.a), *images.elf_b);
    CHECK(fit.targets == 19);
    CHECK(fit.targets_off_entry >= 17);  // a's entries + 4 are mid-function in b
    CHECK(fit.suspicious());
    const std::string evidence = fit.evidence("b.elf");
    CHECK(evidence.find(std::to_string(fit.targets_off_entry) + " of 19 call targets (") == 0);
    CHECK(evidence.find("are on data in its code") != std::string::npos);
    // The other way round too.
    CHECK(check_elf_fit(capture_of(images.b), *images.elf_a).suspicious());
}

TEST_CASE("a target near an entry but not after a call is off entry; few odd arcs are no alarm") {
    Images images;
    Aggregate near;
    for (const auto& f : images.a) near.add_arc(0x412 | 1, (f.addr + 6) | 1, 1);  // after a NOP
    CHECK(check_elf_fit(near, *images.elf_a).targets_off_entry == images.a.size());
    CHECK(check_elf_fit(near, *images.elf_a).suspicious());
    Aggregate mostly_good = capture_of(images.a);
    mostly_good.add_arc(0x412 | 1, 0x420 | 1, 1);
    mostly_good.add_arc(0x412 | 1, 0x430 | 1, 1);
    const ElfFit fit = check_elf_fit(mostly_good, *images.elf_a);
    CHECK(fit.targets_off_entry == 2);
    CHECK_FALSE(fit.suspicious());
    // Damage (bit flips, look-alikes) makes many targets of one call each: counts decide.
    for (std::uint32_t i = 0; i < 30; ++i) mostly_good.add_arc(0x412 | 1, (0x421 + 2 * i) | 1, 1);
    mostly_good.add_pc(0x423, 1);  // odd
    const ElfFit damaged = check_elf_fit(mostly_good, *images.elf_a);
    CHECK(damaged.targets_off_entry > damaged.targets / 2);
    CHECK(damaged.calls_off_entry == 30);  // 2 of the 30 land on a1 (entry, entry + 4)
    CHECK(damaged.samples_off_code == 1);
    CHECK_FALSE(damaged.suspicious());
}

}  // namespace
}  // namespace rackprof::gmon
