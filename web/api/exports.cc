// A session's data as a file: /api/v1/sessions/{id}/export/{format}, and the older paths
// (gmon.out, records.csv, records.ndjson, raw) as aliases of the same handler.
#include <algorithm>
#include <iterator>

#include "web/api/handlers.h"
#include "web/api/replies.h"

namespace rackprof::web {

namespace {

Reply download_reply(const Call& c, service::Export out) {
    const auto disposition = "attachment; filename=\"" + out.filename + "\"";
    if (out.whole) {
        Response r{http::status::ok, c.request.version()};
        r.set(http::field::content_type, out.content_type);
        r.set(http::field::content_disposition, disposition);
        r.keep_alive(c.request.keep_alive());
        while (auto chunk = out.next()) r.body() += *chunk;
        return r;
    }
    StreamedResponse reply;
    reply.header.version(c.request.version());
    reply.header.result(http::status::ok);
    reply.header.keep_alive(c.request.keep_alive());
    reply.header.set(http::field::content_type, out.content_type);
    reply.header.set(http::field::content_disposition, disposition);
    reply.next = std::move(out.next);
    return reply;
}

Reply export_reply(const Call& c, const std::string& format) {
    const auto id = parse_id(c.path.at("id"), "the session id");
    return download_reply(c, c.rack.open_export(id, format, window_of(c.query)));
}

// The parameters a selection's views take besides the selection's own keys.
service::Selection selection_of(const Call& c, std::initializer_list<const char*> also) {
    for (const auto& [key, value] : c.query) {
        const auto is = [&key](const char* k) { return key == k; };
        if (std::none_of(std::begin(service::kSelectionKeys), std::end(service::kSelectionKeys),
                         is) &&
            std::none_of(also.begin(), also.end(), is)) {
            throw service::ServiceError(service::Failure::kBadRequest,
                                        "unknown parameter '" + key +
                                            "' (a selection takes session, board, tag, "
                                            "build_id, from and to)");
        }
    }
    return service::parse_selection(c.query);
}

}  // namespace

void add_selection_routes(RouteTable& routes) {
    routes.add({http::verb::get, "/api/v1/profile", Access::kRead,
                [](const Call& c) {
                    service::ProfileOptions options;
                    if (c.query.count("top"))
                        options.top = service::parse_count<std::size_t>(c.query.at("top"), "top");
                    if (c.query.count("min_percent"))
                        options.min_percent =
                            parse_number(c.query.at("min_percent"), "min_percent");
                    return json_text_reply(
                        c.request,
                        c.rack.selection_profile(selection_of(c, {"top", "min_percent"}), options));
                },
                "the merged profile of a selection of sessions (one build) as JSON"});
    routes.add({http::verb::get, "/api/v1/profile/export/{format}", Access::kRead,
                [](const Call& c) {
                    return download_reply(
                        c, c.rack.open_selection_export(selection_of(c, {}), c.path.at("format")));
                },
                "the merged profile of a selection as gmon, text, json or csv"});
}

void add_export_routes(RouteTable& routes) {
    routes.add({http::verb::get, "/api/v1/sessions/{id}/export/{format}", Access::kRead,
                [](const Call& c) { return export_reply(c, c.path.at("format")); },
                "the session as gmon, text, json, csv, ndjson or raw"});
    for (const auto& [alias, format] :
         {std::pair{"gmon.out", "gmon"}, std::pair{"records.csv", "csv"},
          std::pair{"records.ndjson", "ndjson"}, std::pair{"raw", "raw"}}) {
        routes.add(
            {http::verb::get, std::string("/api/v1/sessions/{id}/") + alias, Access::kRead,
             [format = std::string(format)](const Call& c) { return export_reply(c, format); },
             std::string("export/") + format + ", by its older path"});
    }
}

}  // namespace rackprof::web
