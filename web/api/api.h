// The REST API as a function from request to reply: match the route, check the token, call
// the handler, turn refusals into JSON errors. Paths outside /api are the dashboard's files.
// Sockets are the server's (web/server); data is the rack service's.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "daemon/service/rack_service.h"
#include "web/api/metrics.h"
#include "web/api/route_table.h"
#include "web/server/http_message.h"

namespace rackprof::web::server {
class StaticSite;
}  // namespace rackprof::web::server

namespace rackprof::web::api {

struct ApiOptions {
    std::string token;             // "" : no token configured
    bool require_token = false;    // write routes need "Authorization: Bearer <token>"
    bool token_for_reads = false;  // with require_token: read routes need it too
    std::function<void(const std::string&)> log_error;  // unexpected failures, with details
    std::filesystem::path web_root;  // the built dashboard served outside /api ("": none)
    std::vector<MetricsSource> metrics_sources;  // more families for /metrics (the live feeds)
};

// Every route of the API, as served (the OpenAPI document lists exactly these).
RouteTable api_routes();

class Api : public server::RequestHandler {
  public:
    Api(daemon::service::RackService& rack, ApiOptions options);
    ~Api() override;
    Api(const Api&) = delete;
    Api& operator=(const Api&) = delete;

    server::Reply handle(const server::Request& request,
                         const std::filesystem::path& body_file) override;
    // A request without an upload.
    server::Reply handle(const server::Request& request) { return handle(request, {}); }
    bool is_upload(const http::request_header<>& header) const override;
    const RouteTable& routes() const { return routes_; }

  private:
    server::Reply answer(const server::Request& request, const std::filesystem::path& body_file,
                         std::string& route);
    server::Reply dispatch(const server::Request& request, const std::filesystem::path& body_file,
                           std::string& route);

    daemon::service::RackService& rack_;
    ApiOptions options_;
    server::TokenRule token_rule_;
    RouteTable routes_;
    std::unique_ptr<server::StaticSite> site_;
    HttpMetrics http_metrics_;
    std::function<void(MetricsText&)> server_metrics_;
};

}  // namespace rackprof::web::api
