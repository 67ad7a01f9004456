// The API against a fake rack: status codes, bodies and the calls made, with no socket and
// no daemon.
#include <doctest/doctest.h>

#include <unistd.h>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/write.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "web/api/api.h"
#include "web/api/fake_rack.h"
#include "web/api/handlers.h"

namespace rackprof::web::api {
namespace {

using nlohmann::json;
using testing::FakeRack;

server::Request request(http::verb method, const std::string& target, const std::string& body = "",
                        const std::string& content_type = "application/json") {
    server::Request r{method, target, 11};
    if (!body.empty()) {
        r.set(http::field::content_type, content_type);
        r.body() = body;
        r.prepare_payload();
    }
    return r;
}

server::Response whole(server::Reply reply) {
    REQUIRE(std::holds_alternative<server::Response>(reply));
    return std::get<server::Response>(std::move(reply));
}

std::string error_code(const server::Response& r) {
    return json::parse(r.body())["error"]["code"].get<std::string>();
}

std::string error_message(const server::Response& r) {
    return json::parse(r.body())["error"]["message"].get<std::string>();
}

struct Fixture {
    FakeRack rack;
    Api api{rack, ApiOptions{}};
    server::Response call(http::verb method, const std::string& target,
                          const std::string& body = "",
                          const std::string& content_type = "application/json") {
        return whole(api.handle(request(method, target, body, content_type)));
    }
    // An upload: the server hands the body over as a file.
    server::Response upload(http::verb method, const std::string& target, const std::string& body) {
        const auto file = std::filesystem::temp_directory_path() /
                          ("rackprof-upload-test-" + std::to_string(::getpid()));
        std::ofstream(file, std::ios::binary) << body;
        server::Response r = whole(api.handle(request(method, target), file));
        std::filesystem::remove(file);
        return r;
    }
};

TEST_CASE_FIXTURE(Fixture, "health, readiness, version and the API document") {
    CHECK(call(http::verb::get, "/healthz").body() == "{\"status\":\"ok\"}\n");
    CHECK(json::parse(call(http::verb::get, "/readyz").body())["status"] == "ready");
    rack.ready = false;
    const auto unready = call(http::verb::get, "/readyz");
    CHECK(unready.result() == http::status::service_unavailable);
    CHECK(error_code(unready) == "not_ready");
    const auto version = json::parse(call(http::verb::get, "/api/v1/version").body());
    CHECK(version["api"] == "v1");
    const auto doc = call(http::verb::get, "/api/v1/openapi.json");
    CHECK(doc.result() == http::status::ok);
    CHECK(doc[http::field::content_type] == "application/json");
    CHECK(json::parse(doc.body())["openapi"].get<std::string>().rfind("3.", 0) == 0);
}

TEST_CASE_FIXTURE(Fixture, "404 for unknown paths, 405 for unknown methods on known ones") {
    CHECK(call(http::verb::get, "/api/v1/nothing/here").result() == http::status::not_found);
    CHECK(call(http::verb::get, "/api").result() == http::status::not_found);
    const auto wrong = call(http::verb::delete_, "/api/v1/version");
    CHECK(wrong.result() == http::status::method_not_allowed);
    CHECK(error_code(wrong) == "method_not_allowed");
    CHECK(call(http::verb::get, "/api/v1/sessions/import").result() ==
          http::status::method_not_allowed);
    CHECK(call(http::verb::post, "/healthz").result() == http::status::method_not_allowed);
    CHECK(call(http::verb::post, "/index.html").result() == http::status::method_not_allowed);
    CHECK(rack.calls.empty());
}

TEST_CASE_FIXTURE(Fixture, "boards") {
    CHECK(json::parse(call(http::verb::get, "/api/v1/boards").body()).size() == 1);
    CHECK(call(http::verb::get, "/api/v1/boards/det").result() == http::status::ok);
    const auto missing = call(http::verb::get, "/api/v1/boards/nope");
    CHECK(missing.result() == http::status::not_found);
    CHECK(json::parse(missing.body())["error"]["message"] == "no board named 'nope'");
    const auto added =
        call(http::verb::post, "/api/v1/boards", R"({"name":"extra","link":"sim://blinky"})");
    CHECK(added.result() == http::status::created);
    CHECK(json::parse(added.body())["name"] == "extra");
    CHECK(call(http::verb::post, "/api/v1/boards", R"({"name":"det"})").result() ==
          http::status::conflict);
    CHECK(call(http::verb::post, "/api/v1/boards", "name=x", "application/x-www-form-urlencoded")
              .result() == http::status::unsupported_media_type);
    const auto not_json = call(http::verb::post, "/api/v1/boards", "{");
    CHECK(not_json.result() == http::status::bad_request);
    CHECK(error_code(not_json) == "bad_request");
    CHECK(call(http::verb::put, "/api/v1/boards/det", R"({"link":"sim://blinky"})").result() ==
          http::status::ok);
    CHECK(call(http::verb::delete_, "/api/v1/boards/extra").result() == http::status::no_content);
    CHECK(call(http::verb::post, "/api/v1/boards/det/sessions").result() == http::status::created);
    CHECK(rack.calls ==
          std::vector<std::string>{"boards", "board det", "board nope",
                                   R"(add_board {"link":"sim://blinky","name":"extra"})",
                                   R"(add_board {"name":"det"})",
                                   R"(update_board det {"link":"sim://blinky"})",
                                   "remove_board extra", "start_session det"});
}

TEST_CASE_FIXTURE(Fixture, "sessions") {
    CHECK(call(http::verb::get, "/api/v1/sessions?board=det&state=completed&from=5").result() ==
          http::status::ok);
    CHECK(rack.calls.back() == "sessions det * completed 5 0");
    CHECK(json::parse(call(http::verb::get, "/api/v1/sessions/7").body())["id"] == 7);
    const auto bad_id = call(http::verb::get, "/api/v1/sessions/abc");
    CHECK(bad_id.result() == http::status::bad_request);
    CHECK(json::parse(bad_id.body())["error"]["message"] ==
          "the session id must be a positive integer");
    CHECK(call(http::verb::get, "/api/v1/sessions/9").result() == http::status::not_found);
    CHECK(call(http::verb::post, "/api/v1/sessions/7/stop").result() == http::status::ok);
    CHECK(call(http::verb::post, "/api/v1/sessions/9/stop").result() == http::status::conflict);
    CHECK(call(http::verb::delete_, "/api/v1/sessions/7").result() == http::status::no_content);
    const auto console = call(http::verb::get, "/api/v1/sessions/7/console?tail=3");
    CHECK(console.body() == "hello\n");
    CHECK(console[http::field::content_type] == "text/plain; charset=utf-8");
    CHECK(rack.calls.back() == "console 7 3");
}

TEST_CASE_FIXTURE(Fixture, "profiles: window and options read here, refusals mapped") {
    CHECK(call(http::verb::get, "/api/v1/sessions/7/profile?from=10&to=20&top=3").result() ==
          http::status::ok);
    CHECK(rack.calls.back() == "profile 7 10 20 3");
    CHECK(call(http::verb::get, "/api/v1/sessions/7/profile?from=yesterday").result() ==
          http::status::bad_request);
    CHECK(call(http::verb::get, "/api/v1/sessions/7/profile?top=-1").result() ==
          http::status::bad_request);
    // The call graph's own trims: graph_top (0: no entries) and one function's entries.
    CHECK(call(http::verb::get, "/api/v1/sessions/7/profile?graph_top=0").result() ==
          http::status::ok);
    CHECK(rack.calls.back() == "profile 7 -1 -1 0 graph_top=0");
    CHECK(call(http::verb::get, "/api/v1/sessions/7/profile?top=1&graph_function=a%20b%3A%3Ac")
              .result() == http::status::ok);
    CHECK(rack.calls.back() == "profile 7 -1 -1 1 graph_function=a b::c");
    CHECK(call(http::verb::get, "/api/v1/sessions/7/profile?graph_top=x").result() ==
          http::status::bad_request);
    const auto unnamed = call(http::verb::get, "/api/v1/sessions/7/profile?graph_function=");
    CHECK(unnamed.result() == http::status::bad_request);
    CHECK(error_message(unnamed) == "graph_function must name a function");
    CHECK(call(http::verb::get, "/api/v1/profile?session=7&graph_top=50").result() ==
          http::status::ok);
    CHECK(rack.calls.back() ==
          "selection_profile sessions=7 boards= tags= build_ids= from=0 to=0 0 graph_top=50");
    const auto no_elf = call(http::verb::get, "/api/v1/sessions/8/profile");
    CHECK(no_elf.result() == http::status::unprocessable_entity);
    CHECK(error_code(no_elf) == "no_elf");
}

TEST_CASE_FIXTURE(Fixture, "a whole call graph is streamed as it is written, a cut one sent whole") {
    auto reply = api.handle(request(http::verb::get, "/api/v1/sessions/7/profile"));
    REQUIRE(std::holds_alternative<server::StreamedResponse>(reply));
    auto& streamed = std::get<server::StreamedResponse>(reply);
    CHECK(streamed.header[http::field::content_type] == "application/json");
    std::vector<std::string> chunks;
    while (auto chunk = streamed.next()) chunks.push_back(*chunk);
    CHECK_FALSE(streamed.next());
    // The service's pieces as they came, then the newline every JSON reply ends with.
    CHECK(chunks == std::vector<std::string>{R"({"flat":)", "[]}", "\n"});
    const auto cut = call(http::verb::get, "/api/v1/sessions/7/profile?top=5");
    CHECK(cut.body() == "{\"flat\":[]}\n");  // a Response: sent with its length
}

TEST_CASE_FIXTURE(Fixture, "diff: two selections as values, gates, 422 when one trips") {
    CHECK(call(http::verb::get,
               "/api/v1/diff?a=build_id%3Dab%26board%3Dx&b=session%3D7&fail_on=calls%3E%2B0%25")
              .result() == http::status::ok);
    CHECK(rack.calls.back() ==
          "diff sessions= boards=x tags= build_ids=ab from=0 to=0 | sessions=7 boards= tags= "
          "build_ids= from=0 to=0 alpha=0.01 calls>+0%");
    const auto tripped = call(http::verb::get,
                              "/api/v1/diff?a=session%3D1&b=session%3D2&fail_on=self%3E%2B5%25,"
                              "calls%3E%2B0%25&alpha=0.05");
    CHECK(tripped.result() == http::status::unprocessable_entity);
    CHECK(error_code(tripped) == "regression");
    CHECK(rack.calls.back().find("alpha=0.05 self>+5% calls>+0%") != std::string::npos);
    const auto text = call(http::verb::get, "/api/v1/diff?a=session%3D1&b=session%3D2&format=text");
    CHECK(text.result() == http::status::ok);
    CHECK(text.body() == "diff text\n");
    for (const char* bad : {"/api/v1/diff?a=session%3D1", "/api/v1/diff?a=session%3D1&b=",
                            "/api/v1/diff?a=session%3D1&b=nonsense%3D2",
                            "/api/v1/diff?a=session%3D1&b=session%3D2&format=xml",
                            "/api/v1/diff?a=session%3D1&b=session%3D2&top=3",
                            "/api/v1/diff?a=session%3D1&b=session%3D2&alpha=x"}) {
        CAPTURE(bad);
        CHECK(call(http::verb::get, bad).result() == http::status::bad_request);
    }
}

// A fuzz input (api, UBSan): ?tail=1e300 cast from double to int is undefined behaviour (on
// x86 a negative tail); the same for ?top= and the import's numeric settings.
TEST_CASE_FIXTURE(Fixture, "numbers past the range of their type are clamped, not cast") {
    const std::string huge(400, '9');
    REQUIRE(call(http::verb::get, "/api/v1/sessions/7/console?tail=" + huge).result() ==
            http::status::ok);
    CHECK(rack.calls.back() == "console 7 2147483647");
    CHECK(call(http::verb::get, "/api/v1/sessions/7/profile?top=" + huge).result() ==
          http::status::ok);
    CHECK(rack.calls.back() == "profile 7 -1 -1 18446744073709551615");
    CHECK(call(http::verb::get, "/api/v1/sessions/7/console?tail=2.9").result() ==
          http::status::ok);
    CHECK(rack.calls.back() == "console 7 2");
    const std::string tiny = "0." + std::string(400, '0') + "1";
    CHECK(call(http::verb::get, "/api/v1/sessions/7/console?tail=" + tiny).result() ==
          http::status::ok);
    CHECK(rack.calls.back() == "console 7 0");
}

TEST_CASE_FIXTURE(Fixture, "numbers are decimal: hex, exponents, inf, signs and spaces refused") {
    for (const char* bad : {"0x10", "inf", "nan", "1e3", "-1", "+1", "%201", "1.2.3", ".", ""}) {
        const std::string target = std::string("/api/v1/sessions/7/console?tail=") + bad;
        CAPTURE(target);
        const auto reply = call(http::verb::get, target);
        CHECK(reply.result() == http::status::bad_request);
        CHECK(json::parse(reply.body())["error"]["message"] ==
              "tail must be a non-negative number");
    }
    const auto selection = call(http::verb::get, "/api/v1/profile?session=0x10");
    CHECK(selection.result() == http::status::bad_request);
}

TEST_CASE_FIXTURE(Fixture, "a session filter's state is one a session can be in") {
    const auto bogus = call(http::verb::get, "/api/v1/sessions?state=bogus");
    CHECK(bogus.result() == http::status::bad_request);
    CHECK(json::parse(bogus.body())["error"]["message"] ==
          "state must be capturing, completed or interrupted");
    for (const char* state : {"capturing", "completed", "interrupted"}) {
        CHECK(call(http::verb::get, std::string("/api/v1/sessions?state=") + state).result() ==
              http::status::ok);
    }
}

TEST_CASE_FIXTURE(Fixture, "exports: the format route and its aliases, whole or streamed") {
    const auto gmon = call(http::verb::get, "/api/v1/sessions/7/export/gmon");
    CHECK(gmon.body() == "gmon");
    CHECK(gmon[http::field::content_disposition] == "attachment; filename=\"det-7.gmon.out\"");
    CHECK(call(http::verb::get, "/api/v1/sessions/7/gmon.out").body() == "gmon");
    auto reply = api.handle(request(http::verb::get, "/api/v1/sessions/7/records.csv"));
    REQUIRE(std::holds_alternative<server::StreamedResponse>(reply));
    auto& streamed = std::get<server::StreamedResponse>(reply);
    CHECK(streamed.header[http::field::content_type] == "text/csv");
    std::string body;
    while (auto chunk = streamed.next()) body += *chunk;
    CHECK(body == "a,b\n1,2\n");
    CHECK(rack.calls.back() == "open_export 7 csv");
    api.handle(request(http::verb::get, "/api/v1/sessions/7/records.ndjson"));
    CHECK(rack.calls.back() == "open_export 7 ndjson");
    api.handle(request(http::verb::get, "/api/v1/sessions/7/raw"));
    CHECK(rack.calls.back() == "open_export 7 raw");
    const auto unknown = call(http::verb::get, "/api/v1/sessions/7/export/pprof");
    CHECK(unknown.result() == http::status::not_found);
    CHECK(error_code(unknown) == "unknown_format");
}

// A session stored before board names were validated may hold any bytes in its board, and
// Beast writes field values as they are: the download's name must not inject a header.
TEST_CASE_FIXTURE(Fixture,
                  "exports: a stored board name with CR, LF, NUL or quotes stays in "
                  "its Content-Disposition") {
    rack.session_view["board"] = "x\r\nSet-Cookie: a=b";
    const auto gmon = call(http::verb::get, "/api/v1/sessions/7/export/gmon");
    CHECK(gmon[http::field::content_disposition] ==
          "attachment; filename=\"x__Set-Cookie:_a_b-7.gmon.out\"");
    // What goes on the wire parses back to the same fields, one for one.
    std::ostringstream wire;
    wire << gmon;
    http::response_parser<http::string_body> parser;
    parser.eager(true);
    boost::beast::error_code ec;
    const std::string text = wire.str();
    parser.put(boost::asio::buffer(text), ec);
    REQUIRE_FALSE(ec);
    REQUIRE(parser.is_header_done());
    const auto& parsed = parser.get();
    CHECK(parsed.count(http::field::set_cookie) == 0);
    CHECK(parsed.count(http::field::content_disposition) == 1);
    CHECK(std::distance(parsed.begin(), parsed.end()) == std::distance(gmon.begin(), gmon.end()));

    auto reply = api.handle(request(http::verb::get, "/api/v1/sessions/7/records.csv"));
    REQUIRE(std::holds_alternative<server::StreamedResponse>(reply));
    CHECK(std::get<server::StreamedResponse>(reply).header[http::field::content_disposition] ==
          "attachment; filename=\"x__Set-Cookie:_a_b-7.csv\"");
}

TEST_CASE("content_disposition: only safe bytes in filename=, UTF-8 letters in filename*") {
    CHECK(content_disposition("det-7.gmon.out") == "attachment; filename=\"det-7.gmon.out\"");
    CHECK(content_disposition(std::string("a\"b\0c\\d;e f", 11) + ".raw") ==
          "attachment; filename=\"a_b_c_d_e_f.raw\"");
    CHECK(content_disposition("\x7f\t%/..") == "attachment; filename=\"____..\"");
    CHECK(content_disposition("h\xc3\xa9llo@1:2.csv") ==
          "attachment; filename=\"h_llo@1:2.csv\"; filename*=UTF-8''h%C3%A9llo%401%3A2.csv");
    // Bytes that are not UTF-8 (a lone continuation, an overlong '/', a cut-short sequence,
    // a surrogate) are '_' in both forms.
    CHECK(content_disposition("\xe2\x82\xac\x80\xc0\xaf\xed\xa0\x80\xe2\x82") ==
          "attachment; filename=\"_________\"; filename*=UTF-8''%E2%82%AC________");
}

TEST_CASE_FIXTURE(Fixture, "firmware and imports") {
    CHECK(upload(http::verb::put, "/api/v1/firmware", "new").result() == http::status::created);
    CHECK(upload(http::verb::put, "/api/v1/firmware", "old").result() == http::status::ok);
    const auto junk = upload(http::verb::put, "/api/v1/firmware", "junk");
    CHECK(junk.result() == http::status::unprocessable_entity);
    CHECK(error_code(junk) == "not_an_elf");
    CHECK(call(http::verb::put, "/api/v1/sessions/7/firmware", R"({"id":"ab"})").result() ==
          http::status::ok);
    CHECK(rack.calls.back() == "attach_firmware 7 ab");
    CHECK(error_code(call(http::verb::put, "/api/v1/sessions/7/firmware", R"({"id":1})")) ==
          "bad_firmware_id");
    CHECK(call(http::verb::put, "/api/v1/sessions/7/firmware", "x", "text/plain").result() ==
          http::status::unsupported_media_type);
    CHECK(upload(http::verb::post, "/api/v1/sessions/import?format=gmon", "bytes").result() ==
          http::status::created);
    CHECK(rack.calls.back() == "import_session 5 gmon");
    const auto no_file = call(http::verb::post, "/api/v1/sessions/import", "bytes");
    CHECK(no_file.result() == http::status::bad_request);  // not received as an upload
    CHECK(api.is_upload(request(http::verb::put, "/api/v1/firmware")));
    CHECK(api.is_upload(request(http::verb::post, "/api/v1/sessions/import?format=bin")));
    CHECK_FALSE(api.is_upload(request(http::verb::post, "/api/v1/boards")));
}

// A fuzz input (api): an error quoting a path that is not UTF-8 must not throw from the JSON
// dump inside Api::handle's own catch, out of the server's thread (the daemon would end).
TEST_CASE_FIXTURE(Fixture, "bytes that are not UTF-8 in a path or a view still give JSON") {
    const auto missing = call(http::verb::get, "/api/v1/boards/b\xB5");
    CHECK(missing.result() == http::status::not_found);
    CHECK(json::parse(missing.body())["error"]["message"] == "no board named 'b\xEF\xBF\xBD'");
    rack.board_view["name"] = "d\xFF";
    const auto board = call(http::verb::get, "/api/v1/boards/det");
    CHECK(board.result() == http::status::ok);
    CHECK(json::parse(board.body())["name"] == "d\xEF\xBF\xBD");
}

TEST_CASE("the token: writes off loopback, reads with token_for_reads, probes never") {
    FakeRack rack;
    ApiOptions options;
    options.token = "secret";
    options.require_token = true;
    Api api(rack, options);
    auto status = [&](http::verb method, const std::string& target, const std::string& auth = "") {
        server::Request r = request(method, target);
        if (!auth.empty()) r.set(http::field::authorization, auth);
        return whole(api.handle(r)).result();
    };
    CHECK(status(http::verb::get, "/api/v1/boards") == http::status::ok);
    CHECK(status(http::verb::post, "/api/v1/sessions/7/stop") == http::status::unauthorized);
    CHECK(status(http::verb::post, "/api/v1/sessions/7/stop", "Bearer wrong") ==
          http::status::unauthorized);
    CHECK(status(http::verb::post, "/api/v1/sessions/7/stop", "Bearer secret") == http::status::ok);
    // The token is checked before the method and the path: nothing is learnt without it.
    CHECK(status(http::verb::delete_, "/api/v1/version") == http::status::unauthorized);
    CHECK(status(http::verb::post, "/api/v1/nothing") == http::status::unauthorized);

    options.token_for_reads = true;
    Api closed(rack, options);
    auto read = [&](const std::string& target, const std::string& auth = "") {
        server::Request r = request(http::verb::get, target);
        if (!auth.empty()) r.set(http::field::authorization, auth);
        return whole(closed.handle(r)).result();
    };
    CHECK(read("/api/v1/boards") == http::status::unauthorized);
    CHECK(read("/api/v1/openapi.json") == http::status::unauthorized);
    CHECK(read("/api/v1/boards", "Bearer secret") == http::status::ok);
    CHECK(read("/healthz") == http::status::ok);
    CHECK(read("/readyz") == http::status::ok);
    CHECK(read("/api/v1/nothing") == http::status::unauthorized);
}

TEST_CASE("unexpected failures are 500s with the details in the log only") {
    struct Broken : FakeRack {
        nlohmann::json boards() override { throw std::runtime_error("disk on fire at /var/x"); }
    } rack;
    std::string logged;
    ApiOptions options;
    options.log_error = [&](const std::string& what) { logged = what; };
    Api api(rack, options);
    const auto r = whole(api.handle(request(http::verb::get, "/api/v1/boards")));
    CHECK(r.result() == http::status::internal_server_error);
    CHECK(r.body().find("/var/x") == std::string::npos);
    CHECK(logged == "/api/v1/boards: disk on fire at /var/x");
}

}  // namespace
}  // namespace rackprof::web::api
