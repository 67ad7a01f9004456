// Health, readiness, the version and the API's own description.
#include "web/api/handlers.h"
#include "web/api/metrics.h"
#include "web/api/openapi_document.h"
#include "web/api/replies.h"

namespace rackprof::web::api {

const std::string& openapi_document() {
    static const std::string document = [] {
        std::string whole;
        for (const std::string_view part : kOpenApiDocumentParts) whole += part;
        return whole;
    }();
    return document;
}

void add_status_routes(RouteTable& routes) {
    using http::status;
    using http::verb;
    using nlohmann::json;
    routes.add_json(
        verb::get, "/healthz", server::Access::kPublic, status::ok,
        [](const Call&) {
            return json{{"status", "ok"}};
        },
        "the process answers");
    routes.add_json(
        verb::get, "/readyz", server::Access::kPublic, status::ok,
        [](const Call& c) { return c.rack.readiness(); }, "storage is available");
    routes.add_json(
        verb::get, "/api/v1/version", server::Access::kRead, status::ok,
        [](const Call&) {
            return json{{"name", "rackprof"}, {"version", RACKPROF_VERSION}, {"api", "v1"}};
        },
        "the daemon's version");
    routes.add({verb::get, "/metrics", server::Access::kRead,
                [](const Call& c) {
                    MetricsText out;
                    write_rack_metrics(out, c.rack.metrics());
                    if (c.server_metrics) (*c.server_metrics)(out);
                    server::Response r{status::ok, c.request.version()};
                    r.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
                    r.keep_alive(c.request.keep_alive());
                    r.body() = out.text();
                    return r;
                },
                "the daemon in the Prometheus text format"});
    routes.add({verb::get, "/api/v1/openapi.json", server::Access::kRead,
                [](const Call& c) {
                    server::Response r = json_reply(c.request, status::ok, nullptr);
                    r.body() = openapi_document();
                    return r;
                },
                "this API as an OpenAPI 3 document"});
}

}  // namespace rackprof::web::api
