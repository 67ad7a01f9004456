#include "web/server/http_message.h"

#include <nlohmann/json.hpp>

namespace rackprof::web {

Response error_response(http::status status, const std::string& code, const std::string& message,
                        unsigned version, bool keep_alive) {
    Response r{status, version};
    r.set(http::field::content_type, "application/json");
    r.keep_alive(keep_alive);
    r.body() = nlohmann::json{{"error", {{"code", code}, {"message", message}}}}.dump() + "\n";
    return r;
}

}  // namespace rackprof::web
