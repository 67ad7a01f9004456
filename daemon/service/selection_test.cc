#include "daemon/service/selection.h"

#include <doctest/doctest.h>

#include "daemon/service/rack_service.h"

namespace rackprof::service {
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

Failure failure_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const ServiceError& e) {
        return e.failure();
    }
    FAIL("no ServiceError");
    return Failure::kInvalid;
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

TEST_CASE("selection: more than the limit is refused, not served partly") {
    std::vector<storage::SessionInfo> all;
    for (std::int64_t i = 1; i <= static_cast<std::int64_t>(kMaxSelectedSessions) + 1; ++i)
        all.push_back(session(i, "a", "aa", i));
    CHECK(failure_of([&] {
              select_sessions(parse_selection({{"board", "a"}}), all, {});
          }) == Failure::kBadRequest);
}

}  // namespace
}  // namespace rackprof::service
