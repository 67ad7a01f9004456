// How handlers answer: JSON and empty replies to a request, HTTP-level refusals, the one
// mapping from the rack service's failures to statuses, and the request's parameters read
// with the API's rules (a bad one is a 400).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "daemon/service/rack_service.h"
#include "web/server/http_message.h"

namespace rackprof::web::api {

namespace http = boost::beast::http;

// A refusal decided by the transport itself (method, token, media type, parameters).
struct HttpError {
    http::status status;
    std::string code;
    std::string message;
};

// A JSON body answering `request` (same HTTP version and keep-alive).
server::Response json_reply(const server::Request& request, http::status status,
                            const nlohmann::json& body);
server::Response empty_reply(const server::Request& request, http::status status);
server::Response text_reply(const server::Request& request, std::string text);
// JSON a view wrote as text itself (valid UTF-8 JSON, the view's promise).
server::Response json_text_reply(const server::Request& request, std::string json_text);

// 200 with `content_type`, its body the chunks `next` gives (chunked), as the client reads.
server::StreamedResponse streamed_reply(const server::Request& request,
                                        const std::string& content_type,
                                        std::function<std::optional<std::string>()> next);
// JSON pulled a piece at a time (the service's Export): sent whole with its length when the
// service says it is small, else chunked as the client reads; ends with a newline either way.
server::Reply json_pieces_reply(const server::Request& request, daemon::service::Export pieces);

// The status and error code for each of the service's failures: the only such table.
HttpError http_error_of(const daemon::service::ServiceError& error);

// The body as JSON; 415 unless sent as application/json, 400 unless it parses.
nlohmann::json json_body(const server::Request& request);

std::int64_t parse_id(const std::string& text, const char* what);
std::int64_t parse_time(const std::string& text, const char* what);
double parse_number(const std::string& text, const char* what);
// ?from=&to= (receive times, Unix ns).
daemon::service::TimeWindow window_of(const std::map<std::string, std::string>& query);
// ?top=&min_percent= of a profile view.
daemon::service::ProfileOptions profile_options_of(const std::map<std::string, std::string>& query);

}  // namespace rackprof::web::api
