// The bench's rack service on a real (empty) capture service and database, its ELF cache and
// the read-only connection pool under it.
#include "daemon/service/local_rack.h"

#include <doctest/doctest.h>
#include <spdlog/sinks/null_sink.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <iterator>
#include <thread>

#include "daemon/service/failure_of_test.h"
#include "gmon/synthetic_elf.h"

namespace rackprof::daemon::service {
namespace {

using namespace std::chrono_literals;

struct ScratchDir {
    std::filesystem::path path;
    ScratchDir() {
        std::string name = (std::filesystem::temp_directory_path() / "rack-XXXXXX").string();
        REQUIRE(mkdtemp(name.data()) != nullptr);
        path = name;
    }
    ~ScratchDir() {
        std::error_code ignored;
        std::filesystem::remove_all(path, ignored);
    }
};

TEST_CASE("the reader pool opens lazily, reuses, and waits when every connection is out") {
    ScratchDir dir;
    const auto db = dir.path / "rack.db";
    { storage::SessionStore create(db); }
    storage::ReaderPool pool(db, 2);
    storage::SessionStore* first = nullptr;
    {
        auto a = pool.lease();
        first = &*a;
        CHECK(a->sessions().empty());
    }
    {
        auto again = pool.lease();
        CHECK(&*again == first);  // the idle one, not a new connection
        auto b = pool.lease();
        CHECK(&*b != first);
        std::atomic<bool> leased{false};
        std::thread waiter([&] {
            auto c = pool.lease();
            leased = true;
        });
        std::this_thread::sleep_for(50ms);
        CHECK_FALSE(leased);  // both are out
        { auto released = std::move(b); }
        waiter.join();
        CHECK(leased);
    }
}

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

TEST_CASE("the profile cache serves a profile while its aggregate and ELF are the ones served") {
    ScratchDir dir;
    const auto elf = dir.path / "fw.elf";
    gmon::write_synthetic_elf(elf, {{"main", 0x100, 0x20}, {"work", 0x120, 0x20}}, 0x100, 0x200);
    gmon::ProfileSource source;
    source.elf = gmon::Symbolizer::load(elf);
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

    source.elf = gmon::Symbolizer::load(elf);  // the firmware loaded again
    CHECK(cache.get(1, source) != after_commit);
    cache.get(3, source);
    cache.get(4, source);
    const auto evicted_for = cache.get(1, source);  // two newer sessions pushed it out
    CHECK(evicted_for->profile.nodes[1].ncalls == 8);
}

// GET .../profile reports "wrong_elf" from this: a capture of other firmware is served, with
// the evidence, never refused (issue 16).
TEST_CASE("the profile cache keeps how the capture fits the ELF's code") {
    ScratchDir dir;
    const auto elf = dir.path / "fw.elf";
    gmon::write_synthetic_elf(elf, {{"main", 0x100, 0x20}, {"work", 0x120, 0x20}}, 0x100, 0x200);
    gmon::ProfileSource source;
    source.elf = gmon::Symbolizer::load(elf);
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

TEST_CASE("an empty rack: views, refusals as failures") {
    ScratchDir dir;
    config::DaemonConfig config;
    config.storage_path = dir.path / "rack.db";
    auto log =
        std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::null_sink_mt>());
    capture::CaptureService capture(config, log);
    LocalRack rack(capture, config.storage_path);
    CHECK(rack.readiness() == nlohmann::json{{"status", "ready"},
                                             {"boards", 0},
                                             {"storage_state", "ok"},
                                             {"storage_error", nullptr}});
    CHECK(rack.boards() == nlohmann::json::array());
    CHECK(rack.sessions({}) == nlohmann::json::array());
    CHECK(failure_of([&] { rack.board("nope"); }) == Failure::kNotFound);
    CHECK(failure_of([&] { rack.session(1); }) == Failure::kNotFound);
    CHECK(failure_of([&] { rack.open_export(1, "csv", {}); }) == Failure::kNotFound);
    CHECK(failure_of([&] {
              rack.add_board({{"name", "x"}, {"link", "usb://x"}});
          }) == Failure::kInvalid);
    std::ofstream(dir.path / "junk") << "junk";
    CHECK(failure_of([&] { rack.put_firmware(dir.path / "junk"); }) == Failure::kNotAnElf);
    CHECK(failure_of([&] {
              rack.import_session(dir.path / "junk", {{"format", "tar"}});
          }) == Failure::kBadRequest);
    CHECK(failure_of([&] {
              rack.import_session(dir.path / "junk", {{"format", "gmon"}});
          }) == Failure::kBadGmon);
    CHECK(failure_of([&] {
              rack.import_session(dir.path / "junk", {{"format", "bin"}});
          }) == Failure::kNoRecords);
    CHECK(rack.sessions({}) == nlohmann::json::array());  // a failed import leaves nothing
    CHECK(failure_of([&] {  // was a double-to-int cast out of range (tests/fuzz api, UBSan)
              rack.import_session(dir.path / "junk", {{"addr_bytes", "3.1e100"}});
          }) == Failure::kBadRequest);
    CHECK(failure_of([&] { rack.attach_firmware(1, "ab"); }) == Failure::kNotFound);
    CHECK_FALSE(rack.live(1));
    capture.shutdown();
}

// Found by tests/fuzz (api): an upload that loads as an ELF but gives gprof no symbol table
// (here: its code section is not named .text) got past the ELF check, and counting its
// functions for the reply threw: a 500 instead of 422 not_an_elf.
TEST_CASE("firmware that names no functions for gprof is refused as not a usable ELF") {
    ScratchDir dir;
    const auto elf_path = dir.path / "fw.elf";
    gmon::write_synthetic_elf(elf_path, {{"main", 0x100, 0x20}}, 0x100, 0x200);
    std::string elf;
    {
        std::ifstream f(elf_path, std::ios::binary);
        elf.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    }
    const auto text = elf.find(std::string(".text\0", 6));
    REQUIRE(text != std::string::npos);
    elf[text + 4] = 'x';  // ".texx": still executable code, no longer gprof's .text
    config::DaemonConfig config;
    config.storage_path = dir.path / "rack.db";
    auto log =
        std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::null_sink_mt>());
    capture::CaptureService capture(config, log);
    LocalRack rack(capture, config.storage_path);
    CHECK(failure_of([&] { rack.put_firmware(elf); }) == Failure::kNotAnElf);
    capture.shutdown();
}

}  // namespace
}  // namespace rackprof::daemon::service
