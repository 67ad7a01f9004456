// The server's vocabulary: requests, whole and streamed replies, the JSON error shape, and the
// two things a request can be handed to (an HTTP handler, a WebSocket upgrade). The server room
// knows only these; the API and the feeds implement them.
#pragma once

#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>

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

// Takes over WebSocket upgrades (the live feeds).
class UpgradeHandler {
  public:
    virtual ~UpgradeHandler() = default;
    // Takes over an upgrade request (nothing returned: the stream is its own now, and it keeps
    // `slot`, the connection's place under the server's limits, while the connection lives),
    // or answers why not: 404 when it is not one of its paths, 401 without the token it needs.
    virtual std::optional<Response> accept(boost::beast::tcp_stream& stream, const Request& request,
                                           std::shared_ptr<const void> slot) = 0;
};

}  // namespace rackprof::web
