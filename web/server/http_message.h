// The server's vocabulary: requests, whole and streamed replies, the JSON error shape, and the
// handler a request is given to. The API implements it; it needs Beast's message types only,
// not its sockets or parsers (web/server/upgrade_handler.h has the WebSocket side).
#pragma once

#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <variant>

namespace rackprof::web::server {

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

// A JSON error: {"error":{"code":"...","message":"..."}}.
Response error_response(http::status status, const std::string& code, const std::string& message,
                        unsigned version, bool keep_alive);

// Answers HTTP requests (the API, with the dashboard's files behind it).
class RequestHandler {
  public:
    virtual ~RequestHandler() = default;
    // `body_file`: for an upload (is_upload), the file the server wrote the body to (the
    // request's own body is empty; the file is removed after the reply, unless the handler
    // moved it); "" for every other request.
    virtual Reply handle(const Request& request, const std::filesystem::path& body_file) = 0;
    // Requests whose bodies may be as large as ServerLimits::upload_bytes, received into a
    // file rather than memory.
    virtual bool is_upload(const http::request_header<>& header) const = 0;
};

}  // namespace rackprof::web::server
