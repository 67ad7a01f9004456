#include "web/api/route_table.h"

#include <doctest/doctest.h>

#include "web/api/api.h"
#include "web/api/replies.h"

namespace rackprof::web::api {
namespace {

Handler answer(const char* what) {
    return [what](const Call& c) {
        server::Response r{http::status::ok, c.request.version()};
        r.body() = what;
        return server::Reply(std::move(r));
    };
}

RouteTable sample_table() {
    RouteTable t;
    t.add({http::verb::get, "/healthz", server::Access::kPublic, answer("health"), "h"});
    t.add(
        {http::verb::get, "/api/v1/sessions/{id}", server::Access::kRead, answer("session"), "s"});
    t.add({http::verb::delete_, "/api/v1/sessions/{id}", server::Access::kWrite, answer("delete"),
           "d"});
    t.add({http::verb::post, "/api/v1/sessions/import", server::Access::kWrite, answer("import"),
           "i", true});
    t.add({http::verb::get, "/api/v1/sessions/{id}/export/{format}", server::Access::kRead,
           answer("x"), "x"});
    return t;
}

TEST_CASE("routes match by pattern, with the path's values") {
    const auto t = sample_table();
    auto m = t.match(http::verb::get, "/api/v1/sessions/12/export/csv?from=1");
    REQUIRE(m.route);
    CHECK(m.route->pattern == "/api/v1/sessions/{id}/export/{format}");
    CHECK(m.path == std::map<std::string, std::string>{{"id", "12"}, {"format", "csv"}});
    m = t.match(http::verb::head, "/api/v1/sessions/12");  // HEAD is GET's
    REQUIRE(m.route);
    CHECK(m.route->method == http::verb::get);
    m = t.match(http::verb::delete_, "//api/v1/sessions/12/");  // empty segments are no segments
    REQUIRE(m.route);
    CHECK(m.route->method == http::verb::delete_);
}

TEST_CASE("a literal segment wins over a {name}; a known path without the method is 405") {
    const auto t = sample_table();
    auto m = t.match(http::verb::post, "/api/v1/sessions/import");
    REQUIRE(m.route);
    CHECK(m.route->upload);
    m = t.match(http::verb::get, "/api/v1/sessions/import");  // not the session "import"
    CHECK(m.path_known);
    CHECK(m.route == nullptr);
    m = t.match(http::verb::put, "/api/v1/sessions/3");
    CHECK(m.path_known);
    CHECK(m.route == nullptr);
    CHECK(m.path_access == server::Access::kWrite);
    m = t.match(http::verb::post, "/healthz");
    CHECK(m.path_known);
    CHECK(m.path_access == server::Access::kPublic);
    m = t.match(http::verb::get, "/api/v1/sessions/3/nothing");
    CHECK_FALSE(m.path_known);
    CHECK(m.route == nullptr);
}

// `target`'s query is refused with a 400 bad_query whose message says `why`.
void check_bad_query(const char* target, const char* why) {
    CAPTURE(target);
    try {
        query_of(target);
        FAIL("no error");
    } catch (const HttpError& e) {
        CHECK(e.status == http::status::bad_request);
        CHECK(e.code == "bad_query");
        CHECK(e.message.find(why) != std::string::npos);
    }
}

TEST_CASE("query names and values are percent-decoded, '+' is a space; bad escapes are a 400") {
    CHECK(query_of("/x?a=1&b&c=x%20y&d=a+b&e%3D=%2B%26%3d") ==
          std::map<std::string, std::string>{
              {"a", "1"}, {"b", ""}, {"c", "x y"}, {"d", "a b"}, {"e=", "+&="}});
    CHECK(query_of("/x").empty());
    CHECK(query_of("/x?board=caf%C3%A9")["board"] == "caf\xC3\xA9");
    for (const char* bad : {"/x?a=%zz", "/x?a=%4", "/x?a=%", "/x?%g1=1"})
        check_bad_query(bad, "%-escape");
    // A key given twice is refused, never one of its values picked silently.
    for (const char* twice : {"/x?session=1&session=2", "/x?a=1&b=2&a=1", "/x?a&a"})
        check_bad_query(twice, "given twice");
    CHECK(split_path("/a//b/?c=/d") == std::vector<std::string>{"a", "b"});
}

TEST_CASE("the token rule: writes need it when required, reads only with token_for_reads") {
    server::TokenRule loopback{"secret", false, false};
    CHECK(loopback.admits(server::Access::kWrite, ""));
    server::TokenRule open_reads{"secret", true, false};
    CHECK(open_reads.admits(server::Access::kRead, ""));
    CHECK_FALSE(open_reads.admits(server::Access::kWrite, ""));
    CHECK_FALSE(open_reads.admits(server::Access::kWrite, "Bearer wrong"));
    CHECK(open_reads.admits(server::Access::kWrite, "Bearer secret"));
    server::TokenRule closed{"secret", true, true};
    CHECK_FALSE(closed.admits(server::Access::kRead, ""));
    CHECK(closed.admits(server::Access::kRead, "Bearer secret"));
    CHECK(closed.admits(server::Access::kPublic, ""));
    for (const char* scheme : {"bearer ", "BEARER ", "bEaReR ", "Bearer   "}) {
        CAPTURE(scheme);
        CHECK(closed.admits(server::Access::kRead, std::string(scheme) + "secret"));
    }
    for (const char* wrong : {"Bearer secre", "Bearer secrets", "Bearer", "Bearersecret",
                              "Basic secret", "secret", "Bearer  secret x"}) {
        CAPTURE(wrong);
        CHECK_FALSE(closed.admits(server::Access::kRead, wrong));
    }
    server::TokenRule no_token{"", true,
                               false};  // required but none configured: writes are refused
    CHECK_FALSE(no_token.admits(server::Access::kWrite, "Bearer "));
}

TEST_CASE("every API route declares its access: probes public, GETs read, the rest write") {
    const auto routes = api_routes();
    for (const auto& r : routes.routes()) {
        CAPTURE(r.pattern);
        if (r.pattern == "/healthz" || r.pattern == "/readyz") {
            CHECK(r.access == server::Access::kPublic);
        } else if (r.method == http::verb::get) {
            CHECK(r.access == server::Access::kRead);
        } else {
            CHECK(r.access == server::Access::kWrite);
        }
        CHECK(r.upload == ((r.pattern == "/api/v1/firmware" && r.method == http::verb::put) ||
                           r.pattern == "/api/v1/sessions/import"));
    }
}

}  // namespace
}  // namespace rackprof::web::api
