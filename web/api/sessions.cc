// /api/v1/sessions: stored sessions, their profiles and console text.
#include "web/api/handlers.h"
#include "web/api/replies.h"

namespace rackprof::web::api {

namespace {

std::int64_t session_id(const Call& c) {
    return parse_id(c.path.at("id"), "the session id");
}

daemon::service::SessionFilter filter_of(const std::map<std::string, std::string>& query) {
    daemon::service::SessionFilter filter;
    if (query.count("board")) filter.board = query.at("board");
    if (query.count("tag")) filter.tag = query.at("tag");
    if (query.count("state")) {
        filter.state = query.at("state");
        if (*filter.state != "capturing" && *filter.state != "completed" &&
            *filter.state != "interrupted") {
            throw HttpError{http::status::bad_request, "bad_request",
                            "state must be capturing, completed or interrupted"};
        }
    }
    if (query.count("from")) filter.started_from_ns = parse_time(query.at("from"), "from");
    if (query.count("to")) filter.started_to_ns = parse_time(query.at("to"), "to");
    if (query.count("before"))
        filter.before_id = daemon::service::parse_count<std::int64_t>(query.at("before"), "before");
    if (query.count("limit")) {
        filter.limit = daemon::service::parse_count<std::size_t>(query.at("limit"), "limit");
        if (filter.limit == 0 || filter.limit > filter.kMaxSessionPage) {
            throw HttpError{http::status::bad_request, "bad_request",
                            "limit must be 1.." + std::to_string(filter.kMaxSessionPage)};
        }
    }
    return filter;
}

}  // namespace

void add_session_routes(RouteTable& routes) {
    using http::status;
    using http::verb;
    routes.add_json(
        verb::get, "/api/v1/sessions", server::Access::kRead, status::ok,
        [](const Call& c) { return c.rack.sessions(filter_of(c.query)); },
        "stored sessions, filtered by board, tag, state and start time: the newest `limit` "
        "(default 1000) in id order; `before=ID` pages back");
    routes.add_json(
        verb::post, "/api/v1/sessions/import", server::Access::kWrite, status::created,
        [](const Call& c) { return c.rack.import_session(c.upload(), c.query); },
        "stores a capture or gmon.out made elsewhere", true);
    routes.add_json(
        verb::get, "/api/v1/sessions/{id}", server::Access::kRead, status::ok,
        [](const Call& c) { return c.rack.session(session_id(c)); }, "one session");
    routes.add({verb::delete_, "/api/v1/sessions/{id}", server::Access::kWrite,
                [](const Call& c) {
                    c.rack.delete_session(session_id(c));
                    return empty_reply(c.request, status::no_content);
                },
                "deletes a stored session"});
    routes.add_json(
        verb::post, "/api/v1/sessions/{id}/stop", server::Access::kWrite, status::ok,
        [](const Call& c) { return c.rack.stop_session(session_id(c)); },
        "stops a capturing session");
    routes.add({verb::get, "/api/v1/sessions/{id}/console", server::Access::kRead,
                [](const Call& c) {
                    const int tail = c.query.count("tail") ? daemon::service::parse_count<int>(
                                                                 c.query.at("tail"), "tail")
                                                           : 0;
                    return text_reply(c.request, c.rack.console(session_id(c), tail));
                },
                "the console text the target printed"});
    routes.add({verb::get, "/api/v1/sessions/{id}/profile", server::Access::kRead,
                [](const Call& c) {
                    const auto id = session_id(c);  // a bad id is the error named first
                    const auto window = window_of(c.query);
                    return json_pieces_reply(
                        c.request, c.rack.profile(id, window, profile_options_of(c.query)));
                },
                "the gprof profile as JSON"});
}

}  // namespace rackprof::web::api
