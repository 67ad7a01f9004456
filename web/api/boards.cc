// /api/v1/boards: the rack's boards, and the ones managed through the API.
#include "web/api/handlers.h"
#include "web/api/replies.h"

namespace rackprof::web::api {

void add_board_routes(RouteTable& routes) {
    using http::status;
    using http::verb;
    routes.add_json(
        verb::get, "/api/v1/boards", server::Access::kRead, status::ok,
        [](const Call& c) { return c.rack.boards(); },
        "every board with its link state and session");
    routes.add_json(
        verb::post, "/api/v1/boards", server::Access::kWrite, status::created,
        [](const Call& c) { return c.rack.add_board(json_body(c.request)); }, "adds a board");
    routes.add_json(
        verb::get, "/api/v1/boards/{name}", server::Access::kRead, status::ok,
        [](const Call& c) { return c.rack.board(c.path.at("name")); }, "one board");
    routes.add_json(
        verb::put, "/api/v1/boards/{name}", server::Access::kWrite, status::ok,
        [](const Call& c) { return c.rack.update_board(c.path.at("name"), json_body(c.request)); },
        "changes a board added through the API");
    routes.add({verb::delete_, "/api/v1/boards/{name}", server::Access::kWrite,
                [](const Call& c) {
                    c.rack.remove_board(c.path.at("name"));
                    return empty_reply(c.request, status::no_content);
                },
                "removes a board added through the API"});
    routes.add_json(
        verb::post, "/api/v1/boards/{name}/sessions", server::Access::kWrite, status::created,
        [](const Call& c) { return c.rack.start_session(c.path.at("name")); },
        "starts a session on the board");
}

}  // namespace rackprof::web::api
