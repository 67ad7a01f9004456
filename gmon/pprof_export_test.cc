#include "gmon/pprof_export.h"

#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <vector>

#include "gmon/synthetic_elf.h"
#include "gmon/temp_elf_test.h"
#include "pprof/profile.pb.h"

namespace rackprof::gmon {
namespace {

namespace pb = perftools::profiles;

// The program of this file's tests.
struct ProgramElf : TempElf {
    ProgramElf() : TempElf({{"main", 0x100, 0x40}, {"work", 0x140, 0x40}}, 0x100, 0x180) {}
};

std::shared_ptr<ExportInput> input_with(std::shared_ptr<const Symbolizer> elf) {
    auto a = std::make_shared<Aggregate>();
    a->add_arc(0x104, 0x140, 7);
    a->add_arc(0x144, 0x140, 2);  // work calls itself
    a->add_pc(0x150, 30);
    a->add_pc(0x110, 10);
    a->add_pc(0x400, 1);  // outside every function
    auto input = std::make_shared<ExportInput>();
    input->source.aggregate = a;
    input->source.elf = std::move(elf);
    input->source.prof_rate = 500;
    return input;
}

pb::Profile decoded(const std::string& file) {
    pb::Profile p;
    REQUIRE(p.ParseFromString(gunzip(file)));
    return p;
}

// A sample as pprof's -raw shows it: its addresses, leaf first, and its values.
struct RawSample {
    std::vector<std::uint64_t> addresses;
    std::vector<std::int64_t> values;
    std::map<std::string, std::string> labels;
    friend bool operator<(const RawSample& a, const RawSample& b) {
        return a.addresses < b.addresses;
    }
    friend bool operator==(const RawSample&, const RawSample&) = default;
};

std::vector<RawSample> samples_of(const pb::Profile& p) {
    std::map<std::uint64_t, std::uint64_t> address_of;
    for (const auto& l : p.location()) address_of[l.id()] = l.address();
    std::vector<RawSample> out;
    for (const auto& s : p.sample()) {
        RawSample r;
        for (const auto id : s.location_id()) r.addresses.push_back(address_of.at(id));
        r.values.assign(s.value().begin(), s.value().end());
        for (const auto& l : s.label()) r.labels[p.string_table(l.key())] = p.string_table(l.str());
        out.push_back(r);
    }
    std::sort(out.begin(), out.end());
    return out;
}

// The function names a location's line gives, by address.
std::map<std::uint64_t, std::string> functions_at(const pb::Profile& p) {
    std::map<std::uint64_t, std::string> names;
    for (const auto& f : p.function()) {
        for (const auto& l : p.location()) {
            for (const auto& line : l.line()) {
                if (line.function_id() == f.id()) names[l.address()] = p.string_table(f.name());
            }
        }
    }
    return names;
}

TEST_CASE("pprof: PC samples on gprof's stacks and every arc, named by the ELF's functions") {
    ProgramElf elf;
    auto input = input_with(Symbolizer::load(elf.path));
    input->summary = {{"session", 3}, {"board", "bench-1"}};
    const pb::Profile p = decoded(pprof_profile(*input));
    const auto str = [&](std::int64_t i) { return p.string_table(static_cast<int>(i)); };

    REQUIRE(p.sample_type_size() == 2);
    CHECK(str(p.sample_type(0).type()) == "samples");
    CHECK(str(p.sample_type(0).unit()) == "count");
    CHECK(str(p.sample_type(1).type()) == "calls");
    CHECK(str(p.default_sample_type()) == "samples");
    CHECK(str(p.period_type().type()) == "cpu");
    CHECK(str(p.period_type().unit()) == "nanoseconds");
    CHECK(p.period() == 2'000'000);  // 500 Hz
    CHECK(p.duration_nanos() == 41 * 2'000'000);

    const std::map<std::string, std::string> labels = {{"board", "bench-1"}, {"session", "3"}};
    // Leaf first: work's samples under main's call site; arcs: callee, then the call site.
    // clang-format off
    const std::vector<RawSample> expected = {
        {{0x110}, {10, 0}, labels},
        {{0x140, 0x104}, {0, 7}, labels},
        {{0x140, 0x144}, {0, 2}, labels},
        {{0x150, 0x104}, {30, 0}, labels},
        {{0x400}, {1, 0}, labels},
    };
    // clang-format on
    CHECK(samples_of(p) == expected);
    const std::map<std::uint64_t, std::string> names = {
        {0x104, "main"}, {0x110, "main"}, {0x140, "work"}, {0x144, "work"}, {0x150, "work"}};
    CHECK(functions_at(p) == names);  // 0x400: an address only

    REQUIRE(p.mapping_size() == 1);
    CHECK(p.mapping(0).memory_start() == 0x100);
    CHECK(p.mapping(0).memory_limit() == 0x180);
    CHECK(str(p.mapping(0).filename()) == elf.path.string());
    CHECK(p.mapping(0).has_functions());
    for (const auto& l : p.location()) CHECK(l.mapping_id() == 1);
    std::vector<std::string> comments;
    for (const auto c : p.comment()) comments.push_back(str(c));
    CHECK(std::find(comments.begin(), comments.end(), "board: bench-1") != comments.end());
}

// work is called 6 times from main and 2 from other (which main calls): gprof charges work's
// 32 samples 24 / 8 to the two paths, and each path's share spreads over work's PCs 3 : 1.
TEST_CASE("pprof: a callee's samples split among its callers' stacks as gprof charges them") {
    TempElf elf({{"main", 0x100, 0x40}, {"work", 0x140, 0x40}, {"other", 0x180, 0x40}}, 0x100,
                0x1c0);
    auto a = std::make_shared<Aggregate>();
    a->add_arc(0x104, 0x140, 6);
    a->add_arc(0x184, 0x140, 2);
    a->add_arc(0x108, 0x180, 1);
    a->add_pc(0x110, 10);
    a->add_pc(0x150, 24);
    a->add_pc(0x160, 8);
    auto input = std::make_shared<ExportInput>();
    input->source.aggregate = a;
    input->source.elf = Symbolizer::load(elf.path);
    input->source.prof_rate = 1000;
    std::vector<RawSample> samples;
    for (const auto& s : samples_of(decoded(pprof_profile(*input))))
        if (s.values[0] > 0) samples.push_back(s);
    // clang-format off
    const std::vector<RawSample> expected = {
        {{0x110}, {10, 0}, {}},
        {{0x150, 0x104}, {18, 0}, {}},
        {{0x150, 0x184, 0x108}, {6, 0}, {}},
        {{0x160, 0x104}, {6, 0}, {}},
        {{0x160, 0x184, 0x108}, {2, 0}, {}},
    };
    // clang-format on
    CHECK(samples == expected);
}

TEST_CASE("pprof: a merged selection names its sessions and boards in comments, not labels") {
    ProgramElf elf;
    auto input = input_with(Symbolizer::load(elf.path));
    input->summary = {{"sessions", {1, 2}}, {"boards", {"a", "b"}}, {"build_id", "00ff"}};
    const pb::Profile p = decoded(pprof_profile(*input));
    std::vector<std::string> comments;
    for (const auto c : p.comment()) comments.push_back(p.string_table(static_cast<int>(c)));
    CHECK(std::find(comments.begin(), comments.end(), "sessions: 1, 2") != comments.end());
    CHECK(std::find(comments.begin(), comments.end(), "boards: a, b") != comments.end());
    CHECK(std::find(comments.begin(), comments.end(), "build_id: 00ff") != comments.end());
    for (const auto& s : p.sample()) CHECK(s.label_size() == 0);
}

TEST_CASE("pprof: a stored session's summary object is labelled by its id") {
    ProgramElf elf;
    auto input = input_with(Symbolizer::load(elf.path));
    input->summary = {{"session", {{"id", 9}, {"state", "completed"}}}, {"board", "bench-2"}};
    const pb::Profile p = decoded(pprof_profile(*input));
    const std::map<std::string, std::string> labels = {{"board", "bench-2"}, {"session", "9"}};
    REQUIRE(p.sample_size() > 0);
    for (const auto& s : samples_of(p)) CHECK(s.labels == labels);
}

TEST_CASE("pprof: without an ELF, addresses only over the range they span") {
    auto input = input_with(nullptr);
    const pb::Profile p = decoded(pprof_profile(*input));
    CHECK(p.function_size() == 0);
    for (const auto& l : p.location()) CHECK(l.line_size() == 0);
    CHECK(samples_of(p).size() == 5);
    REQUIRE(p.mapping_size() == 1);
    CHECK(p.mapping(0).memory_start() == 0x104);
    CHECK(p.mapping(0).memory_limit() == 0x401);
    CHECK_FALSE(p.mapping(0).has_functions());
}

TEST_CASE("gzip round trip; a cut or foreign stream is refused") {
    const std::string text(100000, 'x');
    const std::string packed = gzip(text);
    CHECK(packed.size() < 1000);
    CHECK(static_cast<unsigned char>(packed[0]) == 0x1f);  // gzip's magic
    CHECK(static_cast<unsigned char>(packed[1]) == 0x8b);
    CHECK(gunzip(packed) == text);
    CHECK(gunzip(gzip("")).empty());
    CHECK_THROWS_AS(gunzip(packed.substr(0, packed.size() / 2)), std::runtime_error);
    CHECK_THROWS_AS(gunzip("not gzip"), std::runtime_error);
}

}  // namespace
}  // namespace rackprof::gmon
