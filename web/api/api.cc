#include "web/api/api.h"

#include <chrono>
#include <type_traits>
#include <variant>

#include "web/api/handlers.h"
#include "web/api/replies.h"
#include "web/server/static_site.h"

namespace rackprof::web::api {

RouteTable api_routes() {
    RouteTable routes;
    add_status_routes(routes);
    add_board_routes(routes);
    add_session_routes(routes);
    add_firmware_routes(routes);
    add_export_routes(routes);
    add_selection_routes(routes);
    add_annotate_routes(routes);
    add_time_routes(routes);
    return routes;
}

Api::Api(daemon::service::RackService& rack, ApiOptions options)
    : rack_(rack),
      options_(std::move(options)),
      token_rule_{options_.token, options_.require_token, options_.token_for_reads},
      routes_(api_routes()),
      site_(std::make_unique<server::StaticSite>(options_.web_root)),
      server_metrics_([this](MetricsText& out) {
          http_metrics_.write(out);
          for (const auto& source : options_.metrics_sources) source(out);
      }) {}

Api::~Api() = default;

bool Api::is_upload(const http::request_header<>& header) const {
    const auto match = routes_.match(header.method(), header.target());
    return match.route && match.route->upload;
}

// Every answer is counted by route pattern (the dashboard's files as one route), with its time.
server::Reply Api::handle(const server::Request& request, const std::filesystem::path& body_file) {
    const auto started = std::chrono::steady_clock::now();
    std::string route = "(none)";
    server::Reply reply = answer(request, body_file, route);
    const unsigned status = std::visit(
        [](const auto& r) {
            if constexpr (std::is_same_v<std::decay_t<decltype(r)>, server::Response>)
                return r.result_int();
            else
                return r.header.result_int();
        },
        reply);
    http_metrics_.record(route, std::string_view(http::to_string(request.method())), status,
                         std::chrono::steady_clock::now() - started);
    return reply;
}

server::Reply Api::answer(const server::Request& request, const std::filesystem::path& body_file,
                          std::string& route) {
    try {
        return dispatch(request, body_file, route);
    } catch (const HttpError& e) {
        return server::error_response(e.status, e.code, e.message, request.version(),
                                      request.keep_alive());
    } catch (const daemon::service::ServiceError& e) {
        const HttpError http_error = http_error_of(e);
        return server::error_response(http_error.status, http_error.code, http_error.message,
                                      request.version(), request.keep_alive());
    } catch (const std::exception& e) {
        // The details (paths, SQL) go to the log, not to the client; the query stays out of it,
        // as it may hold a token.
        const std::string_view target = request.target();
        if (options_.log_error)
            options_.log_error(std::string(target.substr(0, target.find('?'))) + ": " + e.what());
        return server::error_response(http::status::internal_server_error, "internal",
                                      "internal error; the daemon's log has the details",
                                      request.version(), request.keep_alive());
    }
}

server::Reply Api::dispatch(const server::Request& request, const std::filesystem::path& body_file,
                            std::string& route) {
    const auto method = request.method();
    const bool read = method == http::verb::get || method == http::verb::head;
    const auto match = routes_.match(method, request.target());
    const auto parts = split_path(request.target());
    // The dashboard's files hold no data, so they need no token (the page asks for one).
    if (!match.path_known && (parts.empty() || parts[0] != "api")) {
        route = "(dashboard)";
        if (!read)
            throw HttpError{http::status::method_not_allowed, "method_not_allowed",
                            "method not allowed here"};
        return site_->serve(request);
    }
    // Without a route, a request is judged by its method: what could write needs the token.
    const server::Access access = match.route ? match.route->access
                                  : match.path_access == server::Access::kPublic
                                      ? server::Access::kPublic
                                  : read ? server::Access::kRead
                                         : server::Access::kWrite;
    if (!token_rule_.admits(access, request[http::field::authorization])) {
        throw HttpError{http::status::unauthorized, "unauthorized",
                        "this request needs Authorization: Bearer <token>"};
    }
    if (!match.path_known)
        throw HttpError{http::status::not_found, "not_found", "no such resource"};
    if (!match.route)
        throw HttpError{http::status::method_not_allowed, "method_not_allowed",
                        "method not allowed here"};
    route = match.route->pattern;
    const auto query = query_of(request.target());
    return match.route->handler(
        Call{request, match.path, query, rack_, body_file, &server_metrics_});
}

}  // namespace rackprof::web::api
