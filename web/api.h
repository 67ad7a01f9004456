// The REST API as a plain function from request to response: routing, JSON views and errors,
// kept apart from sockets so it is easy to reason about (http_server.h does the I/O).
#pragma once

#include <boost/beast/http.hpp>

#include <filesystem>
#include <memory>
#include <string>

#include "daemon/capture_service.h"

namespace rackprof::web {

namespace http = boost::beast::http;
using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

struct ApiOptions {
    std::filesystem::path storage_path;
    std::string token;           // "" : no token configured
    bool require_token = false;  // mutating requests need "Authorization: Bearer <token>"
};

class Api {
  public:
    Api(daemon::CaptureService& service, ApiOptions options);
    Response handle(const Request& request);

    // A JSON error: {"error":{"code":"...","message":"..."}}.
    static Response error(http::status status, const std::string& code, const std::string& message,
                          unsigned version, bool keep_alive);

  private:
    daemon::CaptureService& service_;
    ApiOptions options_;
};

}  // namespace rackprof::web
