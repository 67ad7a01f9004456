// Health, readiness, the version and the API's own description.
#include "web/api/handlers.h"
#include "web/api/openapi_document.h"
#include "web/api/replies.h"

namespace rackprof::web {

const std::string& openapi_document() {
    static const std::string document(kOpenApiDocument);
    return document;
}

void add_status_routes(RouteTable& routes) {
    using nlohmann::json;
    routes.add({http::verb::get, "/healthz", Access::kPublic,
                [](const Call& c) {
                    return json_reply(c.request, http::status::ok, {{"status", "ok"}});
                },
                "the process answers"});
    routes.add(
        {http::verb::get, "/readyz", Access::kPublic,
         [](const Call& c) { return json_reply(c.request, http::status::ok, c.rack.readiness()); },
         "storage is available"});
    routes.add({http::verb::get, "/api/v1/version", Access::kRead,
                [](const Call& c) {
                    return json_reply(
                        c.request, http::status::ok,
                        {{"name", "rackprof"}, {"version", RACKPROF_VERSION}, {"api", "v1"}});
                },
                "the daemon's version"});
    routes.add({http::verb::get, "/api/v1/openapi.json", Access::kRead,
                [](const Call& c) {
                    Response r = json_reply(c.request, http::status::ok, nullptr);
                    r.body() = openapi_document();
                    return r;
                },
                "this API as an OpenAPI 3 document"});
}

}  // namespace rackprof::web
