// The API as data: method + path pattern -> handler, each route with its access level, so
// routing and the token rule are decided in one place (api.cc) and the handlers only call the
// rack service. Patterns are paths with {name} segments: /api/v1/sessions/{id}/profile.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "daemon/service/rack_service.h"
#include "web/server/http_message.h"
#include "web/server/token_rule.h"  // Access, TokenRule

namespace rackprof::web::api {

namespace http = boost::beast::http;

class MetricsText;

// What a handler is given: the request, the path's {name} values, the query, the rack, and for
// an upload route the file holding the body.
struct Call {
    const server::Request& request;
    const std::map<std::string, std::string>& path;
    const std::map<std::string, std::string>& query;
    daemon::service::RackService& rack;
    const std::filesystem::path& body_file;
    // What the server itself reports on /metrics (requests, feeds), beside the rack's.
    const std::function<void(MetricsText&)>* server_metrics = nullptr;
    // The upload's file; HttpError 400 when the request came without one.
    const std::filesystem::path& upload() const;
};
using Handler = std::function<server::Reply(const Call&)>;
// What most handlers compute: the JSON body of the reply.
using JsonView = std::function<nlohmann::json(const Call&)>;

struct Route {
    http::verb method;
    std::string pattern;
    server::Access access;
    Handler handler;
    std::string summary;  // one line, for the log and the reader of the table
    bool upload = false;  // the body may be as large as ServerLimits::upload_bytes
};

class RouteTable {
  public:
    void add(Route route);
    // The common route: `view`'s JSON, answered with `status`.
    void add_json(http::verb method, std::string pattern, server::Access access,
                  http::status status, JsonView view, std::string summary, bool upload = false);

    struct Match {
        const Route* route = nullptr;  // null: no route for this method (see path_known)
        bool path_known = false;       // some route has this path: 405 rather than 404
        server::Access path_access =
            server::Access::kWrite;  // kPublic when every route on the path is
        std::map<std::string, std::string> path;
    };
    // The most specific pattern for the path (literal segments win over {name}), then the
    // route for the method on it; HEAD is answered by GET's route.
    Match match(http::verb method, std::string_view path) const;

    const std::vector<Route>& routes() const { return routes_; }
    // Every (method, pattern), methods in lower case as OpenAPI spells them.
    std::set<std::pair<std::string, std::string>> endpoints() const;

  private:
    std::vector<Route> routes_;
};

// "/a//b/" -> {"a", "b"}; the query is not part of the path.
std::vector<std::string> split_path(std::string_view target);
// "?a=1&b&c=x%20y" -> {a: "1", b: "", c: "x y"}: names and values %-decoded, '+' a space.
// A bad escape is HttpError 400 "bad_query".
std::map<std::string, std::string> query_of(std::string_view target);

}  // namespace rackprof::web::api
