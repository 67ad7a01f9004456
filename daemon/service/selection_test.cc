#include "daemon/service/selection.h"

#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <map>

#include "daemon/service/failure_of_test.h"
#include "daemon/service/rack_service.h"
#include "gmon/profile_pipeline.h"
#include "gmon/synthetic_elf.h"

namespace rackprof::daemon::service {
namespace {

storage::SessionInfo session(std::int64_t id, const std::string& board, const std::string& build,
                             std::int64_t started_ns) {
    storage::SessionInfo s;
    s.id = id;
    s.spec.board = board;
    s.spec.elf_build_id = build;
    s.spec.started_ns = started_ns;
    return s;
}

std::vector<std::int64_t> ids(const std::vector<storage::SessionInfo>& sessions) {
    std::vector<std::int64_t> out;
    for (const auto& s : sessions) out.push_back(s.id);
    return out;
}

TEST_CASE("selection: one syntax for the query string and the CLI") {
    const auto p = parse_query_string("board=a,b&tag=bench%2Da&build_id=3F2A&from=5&to=9");
    CHECK(p.at("tag") == "bench-a");
    const Selection s = parse_selection(p);
    CHECK(s.boards == std::vector<std::string>{"a", "b"});
    CHECK(s.tags == std::vector<std::string>{"bench-a"});
    CHECK(s.build_ids == std::vector<std::string>{"3f2a"});  // build-ids compare in lower case
    CHECK(s.from_ns == 5);
    CHECK(s.to_ns == 9);
    CHECK(parse_selection(parse_query_string("session=3,1")).sessions ==
          std::vector<std::int64_t>{3, 1});

    CHECK(failure_of([] { parse_selection({}); }) == Failure::kBadRequest);
    CHECK(failure_of([] { parse_selection({{"session", "1,,2"}}); }) == Failure::kBadRequest);
    CHECK(failure_of([] { parse_selection({{"session", "x"}}); }) == Failure::kBadRequest);
    CHECK(failure_of([] { parse_selection({{"build_id", "zz"}}); }) == Failure::kBadRequest);
    CHECK(failure_of([] { parse_query_string("board"); }) == Failure::kBadRequest);
    CHECK(failure_of([] { parse_query_string("board=a&board=b"); }) == Failure::kBadRequest);
    CHECK(failure_of([] { parse_query_string("board=%4"); }) == Failure::kBadRequest);
}

TEST_CASE("selection: keys combine with AND, a key's values with OR") {
    const std::vector<storage::SessionInfo> all = {
        session(1, "a", "aa", 10), session(2, "b", "aa", 20), session(3, "c", "bb", 30),
        session(4, "a", "bb", 40)};
    const std::map<std::string, std::vector<std::string>> tags = {{"left", {"a", "b"}},
                                                                  {"right", {"c"}}};
    const auto select = [&](const char* query) {
        return ids(select_sessions(parse_selection(parse_query_string(query)), all, tags));
    };
    CHECK(select("board=a") == std::vector<std::int64_t>{1, 4});
    CHECK(select("board=a&build_id=aa") == std::vector<std::int64_t>{1});
    CHECK(select("tag=left") == std::vector<std::int64_t>{1, 2, 4});
    CHECK(select("tag=left,right&build_id=bb") == std::vector<std::int64_t>{3, 4});
    CHECK(select("from=20&to=30") == std::vector<std::int64_t>{2, 3});
    CHECK(select("session=4,2") == std::vector<std::int64_t>{2, 4});
    CHECK(failure_of([&] { select("session=9"); }) == Failure::kNotFound);
    CHECK(failure_of([&] { select("board=z"); }) == Failure::kNotFound);
    CHECK(failure_of([&] { select("tag=nowhere"); }) == Failure::kNotFound);
}

TEST_CASE("selection: build_id is the ELF's build-id, else its SHA-256, else the target's") {
    storage::SessionInfo s;
    CHECK(build_id_of(s).empty());
    s.target.build_id = "cc";
    CHECK(build_id_of(s) == "cc");
    s.spec.elf_sha256 = "bb";
    CHECK(build_id_of(s) == "bb");
    s.spec.elf_build_id = "aa";
    CHECK(build_id_of(s) == "aa");
}

TEST_CASE("selection: sessions of different builds are never merged silently") {
    CHECK(common_build_id({session(1, "a", "aa", 0), session(2, "b", "aa", 0)}) == "aa");
    try {
        common_build_id(
            {session(1, "a", "aa", 0), session(2, "b", "bb", 0), session(3, "c", "", 0)});
        FAIL("merged");
    } catch (const ServiceError& e) {
        CHECK(e.failure() == Failure::kConflict);
        const std::string what = e.what();
        CHECK(what.find("3 different builds") != std::string::npos);
        CHECK(what.find("aa: session(s) 1") != std::string::npos);
        CHECK(what.find("no build-id: session(s) 3") != std::string::npos);
    }
}

TEST_CASE("selection: merge=by_name merges two builds with functions matched by name") {
    const auto dir = std::filesystem::temp_directory_path() /
                     ("rackprof-by-name-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    // Build aa: main, work. Build bb: main, pad, then a larger work at another address.
    gmon::write_synthetic_elf(dir / "aa.elf", {{"main", 0x100, 0x40}, {"work", 0x140, 0x40}}, 0x100,
                              0x180);
    gmon::write_synthetic_elf(dir / "bb.elf",
                              {{"main", 0x200, 0x40}, {"pad", 0x240, 0x40}, {"work", 0x280, 0x60}},
                              0x200, 0x2e0);
    auto a = session(1, "x", "aa", 0), b = session(2, "y", "bb", 0);
    a.spec.elf_path = (dir / "aa.elf").string();
    b.spec.elf_path = (dir / "bb.elf").string();
    std::map<std::int64_t, std::shared_ptr<gmon::Aggregate>> aggregates = {
        {1, std::make_shared<gmon::Aggregate>()}, {2, std::make_shared<gmon::Aggregate>()}};
    aggregates[1]->add_arc(0x105, 0x145, 7);
    aggregates[1]->add_pc(0x150, 30);
    aggregates[2]->add_arc(0x205, 0x285, 5);
    aggregates[2]->add_pc(0x2d0, 20);  // offset 0x50 in bb's work: past aa's size, kept
    aggregates[2]->add_pc(0x250, 3);   // pad
    aggregates[2]->add_pc(0x400, 2);   // in no function
    const auto aggregate_of = [&](std::int64_t id) {
        return std::shared_ptr<const gmon::Aggregate>(aggregates.at(id));
    };
    const auto elf_of = [](const std::string& path) { return gmon::Symbolizer::load(path); };
    CHECK(failure_of([&] { merged_input({a, b}, aggregate_of, elf_of); }) == Failure::kConflict);
    CHECK(parse_selection({{"board", "x"}, {"merge", "by_name"}}).by_name);
    CHECK(failure_of([] {
              parse_selection({{"board", "x"}, {"merge", "yes"}});
          }) == Failure::kBadRequest);

    const auto input = merged_input({a, b}, aggregate_of, elf_of, true, dir / "scratch");
    CHECK(input->summary["matched_by_name"] == true);
    CHECK(input->summary["builds"] == nlohmann::json({"aa", "bb"}));
    CHECK(input->summary["samples_outside_functions"] == 2);
    CHECK(input->summary["calls_outside_functions"] == 0);
    const gmon::Profile p = gmon::profile_of(input->source);
    std::map<std::string, std::pair<double, std::uint64_t>> by_name;  // samples, calls
    for (std::size_t i = 0; i < p.symbols.size(); ++i)
        by_name[p.symbols[i].name] = {p.nodes[i].self_time, p.nodes[i].ncalls};
    CHECK(by_name["work"].first == doctest::Approx(50));
    CHECK(by_name["work"].second == 12);
    CHECK(by_name["pad"].first == doctest::Approx(3));
    CHECK(by_name["main"].first == doctest::Approx(0));
    // One build alone is merged as before, with its own ELF.
    const auto one = merged_input({a}, aggregate_of, elf_of, true, dir / "scratch");
    CHECK(one->summary["build_id"] == "aa");
    CHECK(one->source.elf->path() == dir / "aa.elf");
    // A build without an ELF cannot be matched.
    b.spec.elf_path.clear();
    CHECK(failure_of([&] {
              merged_input({a, b}, aggregate_of, elf_of, true, dir / "s");
          }) == Failure::kNoElf);
    std::filesystem::remove_all(dir);
}

TEST_CASE("selection: more than the limit is refused, not served partly") {
    std::vector<storage::SessionInfo> all;
    for (std::int64_t i = 1; i <= static_cast<std::int64_t>(kMaxSelectedSessions) + 1; ++i)
        all.push_back(session(i, "a", "aa", i));
    CHECK(failure_of([&] {
              select_sessions(parse_selection({{"board", "a"}}), all, {});
          }) == Failure::kBadRequest);
}

TEST_CASE("selection: bench= names fleet benches; a bench's own sessions are not selected by it") {
    const Selection s = parse_selection(parse_query_string("bench=lab-a,lab-b&build_id=AB"));
    CHECK(s.benches == std::vector<std::string>{"lab-a", "lab-b"});
    CHECK(parse_selection({{"bench", "lab-a"}}).benches.size() == 1);  // alone, it names sessions
    CHECK(failure_of([] { parse_selection({{"bench", ""}}); }) == Failure::kBadRequest);
    CHECK(failure_of([&s] { select_sessions(s, {}, {}); }) == Failure::kBadRequest);
}

}  // namespace
}  // namespace rackprof::daemon::service
