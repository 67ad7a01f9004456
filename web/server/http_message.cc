#include "web/server/http_message.h"

#include <nlohmann/json.hpp>

namespace rackprof::web::server {

Response error_response(http::status status, const std::string& code, const std::string& message,
                        unsigned version, bool keep_alive) {
    Response r{status, version};
    r.set(http::field::content_type, "application/json");
    r.keep_alive(keep_alive);
    // Messages may quote the request (a path, a parameter) byte for byte: bytes that are not
    // UTF-8 become U+FFFD rather than an exception with no one left to catch it.
    const nlohmann::json body = {{"error", {{"code", code}, {"message", message}}}};
    r.body() = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    return r;
}

}  // namespace rackprof::web::server
