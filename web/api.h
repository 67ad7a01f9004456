// The REST API as a plain function from request to response: routing, JSON views and errors,
// kept apart from sockets so it is easy to reason about (http_server.h does the I/O).
#pragma once

#include <boost/beast/http.hpp>

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include "daemon/capture_service.h"
#include "gmon/symbolizer.h"

namespace rackprof::web {

namespace http = boost::beast::http;
using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

// A response too large to hold: a header, then chunks (chunked encoding) pulled one at a
// time while the client keeps up; `next` returns nothing at the end.
struct StreamedResponse {
    http::response<http::empty_body> header;
    std::function<std::optional<std::string>()> next;
};
using Reply = std::variant<Response, StreamedResponse>;

struct ApiOptions {
    std::filesystem::path storage_path;
    std::string token;             // "" : no token configured
    bool require_token = false;    // mutating requests need "Authorization: Bearer <token>"
    bool token_for_reads = false;  // with require_token: every request needs it
    std::function<void(const std::string&)> log_error;  // unexpected failures, with details
    std::filesystem::path web_root;  // the built dashboard served outside /api ("": none)
};

// Firmware images by path, loaded once and shared.
std::shared_ptr<const gmon::Symbolizer> cached_symbolizer(const std::string& path);

class StaticSite;

class Api {
  public:
    Api(daemon::CaptureService& service, ApiOptions options);
    ~Api();
    Api(const Api&) = delete;
    Api& operator=(const Api&) = delete;
    Reply handle(const Request& request);
    // Requests whose bodies may be as large as ServerLimits::upload_bytes.
    static bool is_upload(const http::request_header<>& header);

    // A JSON error: {"error":{"code":"...","message":"..."}}.
    static Response error(http::status status, const std::string& code, const std::string& message,
                          unsigned version, bool keep_alive);

  private:
    Response change_board(const Request& request, const std::string& name);
    Response put_firmware(const Request& request);
    Response attach_firmware(const Request& request, std::int64_t id);
    Response import_session(const Request& request);
    Reply handle_session_export(const Request& request, std::int64_t id, const std::string& what);

    daemon::CaptureService& service_;
    ApiOptions options_;
    std::unique_ptr<StaticSite> site_;
};

}  // namespace rackprof::web
