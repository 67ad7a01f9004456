// The bench's rack service on a real (empty) capture service and database, and the read-only
// connection pool under it.
#include "daemon/service/local_rack.h"

#include <doctest/doctest.h>
#include <spdlog/sinks/null_sink.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

#include "daemon/service/failure_of_test.h"
#include "daemon/service/scratch_rack_test.h"

namespace rackprof::daemon::service {
namespace {

using namespace std::chrono_literals;

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

}  // namespace
}  // namespace rackprof::daemon::service
