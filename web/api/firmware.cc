// Firmware images: uploaded once, attached to sessions to name their functions.
#include "web/api/handlers.h"
#include "web/api/replies.h"

namespace rackprof::web::api {

void add_firmware_routes(RouteTable& routes) {
    routes.add_json(
        http::verb::get, "/api/v1/firmware", server::Access::kRead, http::status::ok,
        [](const Call& c) { return c.rack.firmware(); }, "the uploaded ELF images, newest first");
    routes.add({http::verb::put, "/api/v1/firmware", server::Access::kWrite,
                [](const Call& c) {
                    const auto stored = c.rack.put_firmware(c.upload());
                    return json_reply(c.request,
                                      stored.created ? http::status::created : http::status::ok,
                                      stored.view);
                },
                "stores an ELF image under its build-id", true});
    routes.add_json(
        http::verb::put, "/api/v1/sessions/{id}/firmware", server::Access::kWrite, http::status::ok,
        [](const Call& c) {
            const auto session = parse_id(c.path.at("id"), "the session id");
            const auto body = json_body(c.request);
            const auto id = body.is_object() && body.contains("id") && body["id"].is_string()
                                ? body["id"].get<std::string>()
                                : std::string();
            return c.rack.attach_firmware(session, id);
        },
        "names a session's functions with an uploaded image");
}

}  // namespace rackprof::web::api
