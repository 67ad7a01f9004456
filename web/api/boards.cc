// /api/v1/boards: the rack's boards, and the ones managed through the API.
#include "web/api/handlers.h"
#include "web/api/replies.h"

namespace rackprof::web {

void add_board_routes(RouteTable& routes) {
    routes.add(
        {http::verb::get, "/api/v1/boards", Access::kRead,
         [](const Call& c) { return json_reply(c.request, http::status::ok, c.rack.boards()); },
         "every board with its link state and session"});
    routes.add({http::verb::post, "/api/v1/boards", Access::kWrite,
                [](const Call& c) {
                    return json_reply(c.request, http::status::created,
                                      c.rack.add_board(json_body(c.request)));
                },
                "adds a board"});
    routes.add({http::verb::get, "/api/v1/boards/{name}", Access::kRead,
                [](const Call& c) {
                    return json_reply(c.request, http::status::ok, c.rack.board(c.path.at("name")));
                },
                "one board"});
    routes.add({http::verb::put, "/api/v1/boards/{name}", Access::kWrite,
                [](const Call& c) {
                    return json_reply(c.request, http::status::ok,
                                      c.rack.update_board(c.path.at("name"), json_body(c.request)));
                },
                "changes a board added through the API"});
    routes.add({http::verb::delete_, "/api/v1/boards/{name}", Access::kWrite,
                [](const Call& c) {
                    c.rack.remove_board(c.path.at("name"));
                    return empty_reply(c.request, http::status::no_content);
                },
                "removes a board added through the API"});
    routes.add({http::verb::post, "/api/v1/boards/{name}/sessions", Access::kWrite,
                [](const Call& c) {
                    return json_reply(c.request, http::status::created,
                                      c.rack.start_session(c.path.at("name")));
                },
                "starts a session on the board"});
}

}  // namespace rackprof::web
