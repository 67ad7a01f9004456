// /metrics against a fake rack: the exposition format, the rack's families, requests counted
// by route pattern, label escaping, and the read rule.
#include <doctest/doctest.h>

#include "web/api/api.h"
#include "web/api/fake_rack.h"
#include "web/api/metrics.h"

namespace rackprof::web::api {
namespace {

server::Response get(Api& api, const std::string& target, const std::string& authorization = "") {
    server::Request r{http::verb::get, target, 11};
    if (!authorization.empty()) r.set(http::field::authorization, authorization);
    auto reply = api.handle(r);
    REQUIRE(std::holds_alternative<server::Response>(reply));
    return std::get<server::Response>(std::move(reply));
}

bool has_line(const std::string& text, const std::string& line) {
    return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

TEST_CASE("/metrics: the rack's boards, counters and writer in the Prometheus text format") {
    testing::FakeRack rack;
    ApiOptions options;
    options.metrics_sources.push_back([](MetricsText& out) {
        out.family("rackprof_feed_clients", "gauge", "Connected WebSocket clients.");
        out.sample("rackprof_feed_clients", {{"feed", "live"}}, 4);
    });
    Api api(rack, options);
    get(api, "/api/v1/sessions/7");
    get(api, "/api/v1/sessions/7?x=1");
    get(api, "/api/v1/nothing");
    const server::Response r = get(api, "/metrics");
    CHECK(r.result() == http::status::ok);
    CHECK(r[http::field::content_type] == "text/plain; version=0.0.4; charset=utf-8");
    const std::string& text = r.body();
    CHECK(has_line(text, "# TYPE rackprof_boards gauge"));
    CHECK(has_line(text, "rackprof_boards{state=\"connected\"} 1"));
    CHECK(has_line(text, "rackprof_boards{state=\"disconnected\"} 0"));
    CHECK(has_line(text, "rackprof_session_bytes_in_total{board=\"det\"} 1234"));
    CHECK(has_line(text, "rackprof_session_records_lost_total{board=\"det\"} 5"));
    CHECK(has_line(text, "rackprof_storage_queue_operations 3"));
    CHECK(has_line(text, "rackprof_storage_errors_total 0"));
    CHECK(has_line(text, "rackprof_feed_clients{feed=\"live\"} 4"));
    // Requests by pattern, never by the raw target.
    CHECK(has_line(text,
                   "rackprof_http_requests_total{route=\"/api/v1/sessions/{id}\",method=\"GET\","
                   "status=\"200\"} 2"));
    CHECK(has_line(
        text, "rackprof_http_requests_total{route=\"(none)\",method=\"GET\",status=\"404\"} 1"));
    CHECK(has_line(
        text, "rackprof_http_request_duration_seconds_count{route=\"/api/v1/sessions/{id}\"} 2"));
    CHECK(has_line(text,
                   "rackprof_http_request_duration_seconds_bucket{route=\"/api/v1/sessions/"
                   "{id}\",le=\"+Inf\"} 2"));
}

TEST_CASE("/metrics follows the read rule") {
    testing::FakeRack rack;
    ApiOptions options;
    options.token = "s3cret";
    options.require_token = true;
    options.token_for_reads = true;
    Api api(rack, options);
    CHECK(get(api, "/metrics").result() == http::status::unauthorized);
    CHECK(get(api, "/metrics", "Bearer s3cret").result() == http::status::ok);
}

TEST_CASE("metric label values are escaped as the format requires") {
    MetricsText out;
    out.sample("m", {{"board", "a\"b\\c\nd"}}, 1.5);
    CHECK(out.text() == "m{board=\"a\\\"b\\\\c\\nd\"} 1.5\n");
}

}  // namespace
}  // namespace rackprof::web::api
