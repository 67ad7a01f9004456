// The API's JSON views of boards and stored sessions.
#include "daemon/service/session_views.h"

#include <doctest/doctest.h>

namespace rackprof::daemon::service {
namespace {

TEST_CASE("session views: a board, with its session and storage state") {
    BoardStatus idle;
    idle.name = "b1";
    idle.link = "serial:///dev/ttyACM0";
    const nlohmann::json view = board_json(idle);
    CHECK(view["name"] == "b1");
    CHECK(view["state"] == "connecting");
    CHECK(view["session"].is_null());
    CHECK(view["counters"].is_null());  // no session: nothing counted
    CHECK(view["storage_state"] == "ok");
    CHECK(view["storage_error"].is_null());

    BoardStatus capturing = idle;
    capturing.session = 7;
    capturing.storage_error = "disk full";
    const nlohmann::json busy = board_json(capturing);
    CHECK(busy["session"] == 7);
    CHECK(busy["counters"].is_object());
    CHECK(busy["storage_state"] == "storage_error");
    CHECK(busy["storage_error"] == "disk full");
}

TEST_CASE("session views: a stored session; storage's error only while it captures") {
    storage::SessionInfo s;
    s.id = 3;
    s.spec.board = "b1";
    s.spec.link = "import";
    s.state = "completed";
    s.spec.started_ns = 10;
    s.ended_ns = 20;
    const nlohmann::json done = session_json(s, "disk full");
    CHECK(done["id"] == 3);
    CHECK(done["board"] == "b1");
    CHECK(done["protocol"] == "legacy");
    CHECK(done["ended_ns"] == 20);
    CHECK(done["target"].is_null());
    CHECK(done["build_id"].is_null());
    CHECK(done["raw_pruned"].is_null());
    CHECK(done["storage_state"] == "ok");
    CHECK_FALSE(done.contains("swo"));
    CHECK_FALSE(done.contains("calling_context_nodes"));

    s.state = "capturing";
    s.ended_ns = 0;
    s.calling_context_nodes = 5;
    const nlohmann::json live = session_json(s, "disk full");
    CHECK(live["ended_ns"].is_null());
    CHECK(live["storage_error"] == "disk full");
    CHECK(live["calling_context_nodes"] == 5);
}

TEST_CASE("session views: gaps say what they lost, or null where that is unknown") {
    const std::vector<storage::Gap> gaps = {{1, 2, "link lost", std::nullopt, std::nullopt},
                                            {3, 4, "commit failed", 10, 160}};
    const nlohmann::json view = gaps_json(gaps);
    REQUIRE(view.size() == 2);
    CHECK(view[0]["reason"] == "link lost");
    CHECK(view[0]["records_lost"].is_null());
    CHECK(view[1]["records_lost"] == 10);
    CHECK(view[1]["bytes_lost"] == 160);
    CHECK(gaps_json({}) == nlohmann::json::array());
}

}  // namespace
}  // namespace rackprof::daemon::service
