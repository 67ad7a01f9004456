#include "web/api/replies.h"

#include <array>
#include <charconv>

namespace rackprof::web::api {

using daemon::service::Failure;
using nlohmann::json;

server::Response json_reply(const server::Request& request, http::status status, const json& body) {
    server::Response r{status, request.version()};
    r.set(http::field::content_type, "application/json");
    r.keep_alive(request.keep_alive());
    // Views may hold bytes that are not UTF-8 (a board name from an import's query): replaced
    // by U+FFFD, so a view never fails to serialize.
    r.body() = body.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
    return r;
}

server::Response empty_reply(const server::Request& request, http::status status) {
    server::Response r{status, request.version()};
    r.keep_alive(request.keep_alive());
    return r;
}

server::Response text_reply(const server::Request& request, std::string text) {
    server::Response r{http::status::ok, request.version()};
    r.set(http::field::content_type, "text/plain; charset=utf-8");
    r.keep_alive(request.keep_alive());
    r.body() = std::move(text);
    return r;
}

server::Response json_text_reply(const server::Request& request, std::string json_text) {
    server::Response r{http::status::ok, request.version()};
    r.set(http::field::content_type, "application/json");
    r.keep_alive(request.keep_alive());
    r.body() = std::move(json_text);
    r.body() += '\n';
    return r;
}

server::Reply json_pieces_reply(const server::Request& request, daemon::service::Export pieces) {
    if (pieces.whole) {
        std::string text;
        while (auto piece = pieces.next()) text += *piece;
        return json_text_reply(request, std::move(text));
    }
    return streamed_reply(
        request, pieces.content_type,
        [next = std::move(pieces.next), ended = false]() mutable -> std::optional<std::string> {
            if (ended) return std::nullopt;
            if (auto piece = next()) return piece;
            ended = true;
            return std::string("\n");
        });
}

server::StreamedResponse streamed_reply(const server::Request& request,
                                        const std::string& content_type,
                                        std::function<std::optional<std::string>()> next) {
    server::StreamedResponse reply;
    reply.header.version(request.version());
    reply.header.result(http::status::ok);
    reply.header.keep_alive(request.keep_alive());
    reply.header.set(http::field::content_type, content_type);
    reply.next = std::move(next);
    return reply;
}

namespace {

struct FailureReply {
    Failure failure;
    http::status status;
    const char* code;
};

constexpr std::array kFailureReplies = {
    FailureReply{Failure::kBadRequest, http::status::bad_request, "bad_request"},
    FailureReply{Failure::kInvalid, http::status::unprocessable_entity, "invalid"},
    FailureReply{Failure::kForbidden, http::status::forbidden, "forbidden"},
    FailureReply{Failure::kNotFound, http::status::not_found, "not_found"},
    FailureReply{Failure::kConflict, http::status::conflict, "conflict"},
    FailureReply{Failure::kNoElf, http::status::unprocessable_entity, "no_elf"},
    FailureReply{Failure::kNotAnElf, http::status::unprocessable_entity, "not_an_elf"},
    FailureReply{Failure::kBadFirmwareId, http::status::unprocessable_entity, "bad_firmware_id"},
    FailureReply{Failure::kBadGmon, http::status::unprocessable_entity, "bad_gmon"},
    FailureReply{Failure::kNoRecords, http::status::unprocessable_entity, "no_records"},
    FailureReply{Failure::kNotReady, http::status::service_unavailable, "not_ready"},
    FailureReply{Failure::kUnknownFormat, http::status::not_found, "unknown_format"},
    FailureReply{Failure::kGone, http::status::gone, "gone"},
    FailureReply{Failure::kBadUpstream, http::status::bad_gateway, "bad_upstream"},
};

// What a switch's -Wswitch gave: every failure has its row. Rows follow the enum's order
// through kBadUpstream, its last value (a failure added after it moves that check).
constexpr bool covers_every_failure() {
    for (std::size_t i = 0; i < kFailureReplies.size(); ++i) {
        if (kFailureReplies[i].failure != static_cast<Failure>(i)) return false;
    }
    return kFailureReplies.back().failure == Failure::kBadUpstream;
}
static_assert(covers_every_failure(),
              "kFailureReplies: one row per daemon::service::Failure, in order");

}  // namespace

HttpError http_error_of(const daemon::service::ServiceError& error) {
    for (const auto& row : kFailureReplies) {
        if (row.failure == error.failure()) return {row.status, row.code, error.what()};
    }
    return {http::status::internal_server_error, "internal", error.what()};
}

json json_body(const server::Request& request) {
    if (request[http::field::content_type].find("application/json") == std::string_view::npos) {
        throw HttpError{http::status::unsupported_media_type, "unsupported_media_type",
                        "send application/json"};
    }
    try {
        return json::parse(request.body());
    } catch (const json::exception&) {
        throw HttpError{http::status::bad_request, "bad_request", "the body is not JSON"};
    }
}

std::int64_t parse_id(const std::string& text, const char* what) {
    std::int64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || value <= 0) {
        throw HttpError{http::status::bad_request, "bad_request",
                        std::string(what) + " must be a positive integer"};
    }
    return value;
}

std::int64_t parse_time(const std::string& text, const char* what) {
    std::int64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || value < 0) {
        throw HttpError{http::status::bad_request, "bad_request",
                        std::string(what) + " must be a time in Unix nanoseconds"};
    }
    return value;
}

double parse_number(const std::string& text, const char* what) {
    return daemon::service::parse_non_negative(text, what);
}

daemon::service::TimeWindow window_of(const std::map<std::string, std::string>& query) {
    daemon::service::TimeWindow window;
    if (query.count("from")) window.from_ns = parse_time(query.at("from"), "from");
    if (query.count("to")) window.to_ns = parse_time(query.at("to"), "to");
    return window;
}

daemon::service::ProfileOptions profile_options_of(
    const std::map<std::string, std::string>& query) {
    daemon::service::ProfileOptions options;
    if (query.count("top"))
        options.top = daemon::service::parse_count<std::size_t>(query.at("top"), "top");
    if (query.count("min_percent"))
        options.min_percent = parse_number(query.at("min_percent"), "min_percent");
    if (query.count("spread_top"))
        options.spread_top =
            daemon::service::parse_count<std::size_t>(query.at("spread_top"), "spread_top");
    if (query.count("graph_top"))
        options.graph_top =
            daemon::service::parse_count<std::size_t>(query.at("graph_top"), "graph_top");
    if (query.count("graph_function")) {
        options.graph_function = query.at("graph_function");
        if (options.graph_function.empty())
            throw HttpError{http::status::bad_request, "bad_request",
                            "graph_function must name a function"};
    }
    if (query.count("sync_reference"))
        options.sync_reference = parse_id(query.at("sync_reference"), "sync_reference");
    return options;
}

}  // namespace rackprof::web::api
