// A session's data as a file: /api/v1/sessions/{id}/export/{format}, and the older paths
// (gmon.out, records.csv, records.ndjson, raw) as aliases of the same handler.
#include "web/api/handlers.h"
#include "web/api/replies.h"

namespace rackprof::web {

namespace {

Reply export_reply(const Call& c, const std::string& format) {
    const auto id = parse_id(c.path.at("id"), "the session id");
    auto out = c.rack.open_export(id, format, window_of(c.query));
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

}  // namespace

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
