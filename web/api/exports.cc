// A session's data as a file: /api/v1/sessions/{id}/export/{format}, and the older paths
// (gmon.out, records.csv, records.ndjson, raw) as aliases of the same handler.
#include <algorithm>
#include <iterator>

#include "web/api/handlers.h"
#include "web/api/replies.h"

#include <cstdint>
#include <string>

namespace rackprof::web::api {

namespace {

// A byte a download's file name may carry as it is: a board name's characters
// (daemon::validate_board_name), which need no quoting in either form below.
bool plain_name_byte(unsigned char b) {
    return (b >= 'A' && b <= 'Z') || (b >= 'a' && b <= 'z') || (b >= '0' && b <= '9') || b == '.' ||
           b == '_' || b == ':' || b == '+' || b == '@' || b == '-';
}

// The length of the UTF-8 sequence at `s[i]`, or 0 when it is not one (overlong, surrogate,
// past U+10FFFF or cut short).
std::size_t utf8_sequence(const std::string& s, std::size_t i) {
    const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char lead = b(i);
    if (lead < 0xC2 || lead > 0xF4) return 0;  // ASCII, a continuation byte, C0/C1, F5..FF
    const std::size_t n = lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    std::uint32_t cp = lead & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07);
    if (i + n > s.size()) return 0;
    for (std::size_t k = 1; k < n; ++k) {
        if ((b(i + k) & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (b(i + k) & 0x3F);
    }
    const bool overlong = (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
    const bool surrogate = cp >= 0xD800 && cp <= 0xDFFF;
    return overlong || surrogate || cp > 0x10FFFF ? 0 : n;
}

}  // namespace

// Sessions stored before board names were validated may carry CR, LF, NUL, quotes or other
// bytes in their board, and Beast does not check field values: the name goes into the header
// only as safe characters. filename= keeps [A-Za-z0-9._:+@-] and writes '_' for anything else;
// a name with UTF-8 letters also gets filename*=UTF-8''... (RFC 6266, RFC 8187), with its
// control characters, invalid bytes and separators as '_' and the rest percent-encoded.
std::string content_disposition(const std::string& filename) {
    std::string ascii;
    std::string extended;
    bool has_utf8 = false;
    const auto percent = [&extended](unsigned char byte) {
        static constexpr char kHex[] = "0123456789ABCDEF";
        extended += '%';
        extended += kHex[byte >> 4];
        extended += kHex[byte & 0x0F];
    };
    for (std::size_t i = 0; i < filename.size();) {
        const auto b = static_cast<unsigned char>(filename[i]);
        if (plain_name_byte(b)) {
            ascii += static_cast<char>(b);
            if (b == ':' || b == '@')
                percent(b);  // not attr-chars in RFC 8187
            else
                extended += static_cast<char>(b);
            ++i;
            continue;
        }
        const std::size_t n = b >= 0x80 ? utf8_sequence(filename, i) : 0;
        ascii += '_';
        if (n == 0) {
            extended += '_';
            ++i;
            continue;
        }
        has_utf8 = true;
        for (std::size_t k = 0; k < n; ++k, ++i) percent(static_cast<unsigned char>(filename[i]));
    }
    std::string header = "attachment; filename=\"" + ascii + "\"";
    if (has_utf8) header += "; filename*=UTF-8''" + extended;
    return header;
}

namespace {

server::Reply download_reply(const Call& c, daemon::service::Export out) {
    const auto disposition = content_disposition(out.filename);
    if (out.whole) {
        server::Response r{http::status::ok, c.request.version()};
        r.set(http::field::content_type, out.content_type);
        r.set(http::field::content_disposition, disposition);
        r.keep_alive(c.request.keep_alive());
        while (auto chunk = out.next()) {
            if (r.body().empty())
                r.body() = std::move(*chunk);  // most are one chunk: megabytes not copied
            else
                r.body() += *chunk;
        }
        return r;
    }
    auto reply = streamed_reply(c.request, out.content_type, std::move(out.next));
    reply.header.set(http::field::content_disposition, disposition);
    return reply;
}

// export/text?intervals=1 is export/text-intervals: gprof's text with the sampling error.
std::string with_intervals(const Call& c, const std::string& format) {
    const auto it = c.query.find("intervals");
    const bool wanted = it != c.query.end() && (it->second == "1" || it->second == "true");
    return wanted && format == "text" ? "text-intervals" : format;
}

server::Reply export_reply(const Call& c, const std::string& format) {
    const auto id = parse_id(c.path.at("id"), "the session id");
    return download_reply(c, c.rack.open_export(id, with_intervals(c, format), window_of(c.query)));
}

// The parameters a selection's views take besides the selection's own keys.
daemon::service::Selection selection_of(const Call& c, std::initializer_list<const char*> also) {
    for (const auto& parameter : c.query) {
        const std::string& key = parameter.first;  // a name lambdas may capture (clang 14)
        const auto is = [&key](const char* k) { return key == k; };
        if (std::none_of(std::begin(daemon::service::kSelectionKeys),
                         std::end(daemon::service::kSelectionKeys), is) &&
            std::none_of(also.begin(), also.end(), is)) {
            throw daemon::service::ServiceError(daemon::service::Failure::kBadRequest,
                                                "unknown parameter '" + key +
                                                    "' (a selection takes session, board, tag, "
                                                    "build_id, bench, from and to)");
        }
    }
    return daemon::service::parse_selection(c.query);
}

// One side of a diff: ?a=<selection> with the selection's own query string as the value
// ("build_id=3f2a&board=b1", %-encoded once more inside the URL).
daemon::service::Selection diff_side(const Call& c, const char* side) {
    const auto it = c.query.find(side);
    if (it == c.query.end() || it->second.empty()) {
        throw daemon::service::ServiceError(
            daemon::service::Failure::kBadRequest,
            std::string("missing ?") + side + "=<selection> (e.g. a=build_id%3D3f2a%26board%3Db1)");
    }
    try {
        return daemon::service::parse_selection(daemon::service::parse_query_string(it->second));
    } catch (const daemon::service::ServiceError& e) {
        throw daemon::service::ServiceError(e.failure(), std::string(side) + ": " + e.what());
    }
}

// GET /diff: the two sides, ?alpha=, ?fail_on=RULE,RULE, ?format=json|text. A tripped gate is
// a 422 with the whole diff in the body, so `curl --fail` fails a CI job on it.
server::Reply diff_reply(const Call& c) {
    for (const auto& parameter : c.query) {
        const std::string& key = parameter.first;
        if (key != "a" && key != "b" && key != "alpha" && key != "fail_on" && key != "format" &&
            key != "merge" && key != "lines") {
            throw daemon::service::ServiceError(
                daemon::service::Failure::kBadRequest,
                "unknown parameter '" + key +
                    "' (a diff takes a, b, alpha, fail_on, merge, lines and format)");
        }
    }
    const std::string format = c.query.count("format") ? c.query.at("format") : "json";
    if (format != "json" && format != "text")
        throw daemon::service::ServiceError(daemon::service::Failure::kBadRequest,
                                            "format is json or text");
    daemon::service::DiffRequest request;
    if (c.query.count("merge")) {
        if (c.query.at("merge") != "by_name")
            throw daemon::service::ServiceError(daemon::service::Failure::kBadRequest,
                                                "merge: the only way is by_name");
        request.by_name = true;
    }
    if (c.query.count("alpha")) request.alpha = parse_number(c.query.at("alpha"), "alpha");
    if (c.query.count("lines")) {
        const std::string& v = c.query.at("lines");
        if (v != "0" && v != "1")
            throw daemon::service::ServiceError(daemon::service::Failure::kBadRequest,
                                                "lines is 0 or 1");
        request.lines = v == "1";
    }
    if (c.query.count("fail_on")) {
        const std::string& rules = c.query.at("fail_on");
        for (std::size_t start = 0; start <= rules.size();) {
            const auto comma = std::min(rules.find(',', start), rules.size());
            if (comma > start) request.fail_on.push_back(rules.substr(start, comma - start));
            start = comma + 1;
        }
    }
    auto result = c.rack.diff(diff_side(c, "a"), diff_side(c, "b"), request);
    const auto status = result.failed ? http::status::unprocessable_entity : http::status::ok;
    if (format == "text") {
        server::Response reply = text_reply(c.request, std::move(result.text));
        reply.result(status);
        return reply;
    }
    if (result.failed) {
        std::string tripped;
        for (const auto& gate : result.view.value("gates", nlohmann::json::array())) {
            if (!gate.value("tripped", false)) continue;
            tripped += (tripped.empty() ? "" : "; ") + gate.value("rule", std::string()) + ":";
            for (const auto& name : gate["functions"]) tripped += " " + name.get<std::string>();
        }
        result.view["error"] = {{"code", "regression"}, {"message", "gate tripped: " + tripped}};
    }
    return json_reply(c.request, status, result.view);
}

// ?function=NAME of /lines and /disasm (empty: the busiest functions).
daemon::service::AnnotateRequest annotate_request(const Call& c, bool instructions) {
    const auto it = c.query.find("function");
    return {it == c.query.end() ? std::string() : it->second, instructions};
}

}  // namespace

void add_annotate_routes(RouteTable& routes) {
    for (const bool instructions : {false, true}) {
        const std::string view = instructions ? "disasm" : "lines";
        routes.add_json(
            http::verb::get, "/api/v1/sessions/{id}/" + view, server::Access::kRead,
            http::status::ok,
            [instructions](const Call& c) {
                const auto id = parse_id(c.path.at("id"), "the session id");
                return c.rack.annotate(id, annotate_request(c, instructions), window_of(c.query));
            },
            instructions ? "samples and calls per instruction of a function, under its lines"
                         : "samples and calls per source line of a function");
        routes.add_json(
            http::verb::get, "/api/v1/profile/" + view, server::Access::kRead, http::status::ok,
            [instructions](const Call& c) {
                return c.rack.selection_annotate(selection_of(c, {"function"}),
                                                 annotate_request(c, instructions));
            },
            "the same for a selection's sessions merged");
    }
}

void add_time_routes(RouteTable& routes) {
    const std::pair<const char*, const char*> views[] = {
        {"tasks",
         "an RTOS's tasks: each one's share of the samples with its interval, cycles, calls"},
        {"interrupts", "per exception: invocations, total, mean, max and p99 cycles, share"},
        {"timeline",
         "the Trace Event document of the events in [from, to) ns of target time from the first "
         "stamp: a track per task, one for interrupts, one for the running task"}};
    for (const auto& [view, description] : views) {
        const std::string name = view;
        routes.add_json(
            http::verb::get, "/api/v1/sessions/{id}/" + name, server::Access::kRead,
            http::status::ok,
            [name](const Call& c) {
                const auto id = parse_id(c.path.at("id"), "the session id");
                return c.rack.time_view(id, name, window_of(c.query));
            },
            description);
    }
}

void add_selection_routes(RouteTable& routes) {
    routes.add({http::verb::get, "/api/v1/profile", server::Access::kRead,
                [](const Call& c) {
                    return json_pieces_reply(
                        c.request, c.rack.selection_profile(
                                       selection_of(c, {"top", "min_percent", "spread_top",
                                                        "graph_top", "graph_function"}),
                                       profile_options_of(c.query)));
                },
                "the merged profile of a selection of sessions (one build) as JSON"});
    routes.add({http::verb::get, "/api/v1/profile/export/{format}", server::Access::kRead,
                [](const Call& c) {
                    return download_reply(
                        c, c.rack.open_selection_export(selection_of(c, {"intervals"}),
                                                        with_intervals(c, c.path.at("format"))));
                },
                "the merged profile of a selection as a file, in any export format made whole"});
    routes.add({http::verb::get, "/api/v1/diff", server::Access::kRead, diff_reply,
                "two selections compared function by function; 422 when a fail_on gate trips"});
}

void add_export_routes(RouteTable& routes) {
    routes.add({http::verb::get, "/api/v1/sessions/{id}/export/{format}", server::Access::kRead,
                [](const Call& c) { return export_reply(c, c.path.at("format")); },
                "the session as a file, in any export format"});
    for (const auto& [alias, format] :
         {std::pair{"gmon.out", "gmon"}, std::pair{"records.csv", "csv"},
          std::pair{"records.ndjson", "ndjson"}, std::pair{"raw", "raw"}}) {
        routes.add(
            {http::verb::get, std::string("/api/v1/sessions/{id}/") + alias, server::Access::kRead,
             [format = std::string(format)](const Call& c) { return export_reply(c, format); },
             std::string("export/") + format + ", by its older path"});
    }
}

}  // namespace rackprof::web::api
