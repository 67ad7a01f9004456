// libFuzzer target: the HTTP API in process. The input is the bytes a client would send on
// one connection: requests, one after another, parsed with Beast's request_parser under the
// server's limits, each handed to Api::handle over a real LocalRack (an unstarted capture
// service and a fresh SQLite database in a temporary folder, per input), no socket. Every
// reply must serialize to HTTP that parses back, JSON bodies must parse, error bodies must
// have the API's shape, and nothing may be a 500 (an exception no handler expected).
#include <spdlog/sinks/null_sink.h>
#include <unistd.h>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http.hpp>

#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <sstream>

#include "daemon/capture/capture_service.h"
#include "daemon/service/local_rack.h"
#include "tests/fuzz/fuzz_input.h"
#include "web/api/api.h"

namespace rackprof::fuzz {
namespace {

namespace http = boost::beast::http;
using nlohmann::json;

constexpr int kMaxRequests = 8;
constexpr std::size_t kHeaderLimit = 8 * 1024;   // ServerLimits::header_bytes
constexpr std::size_t kBodyLimit = 1 << 20;      // ServerLimits::body_bytes
constexpr std::size_t kUploadLimit = 64u << 20;  // ServerLimits::upload_bytes
constexpr int kMaxChunks = 64;                   // of a streamed reply

// A folder of its own for each input, on tmpfs where there is one.
std::filesystem::path scratch_dir() {
    const std::filesystem::path base =
        std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
    return base / ("rackprof-api-fuzz-" + std::to_string(::getpid()));
}

// The next whole request in `in` (advanced past it), or nothing when the rest is not one.
std::optional<web::server::Request> next_request(Bytes& in, const web::api::Api& api) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(kHeaderLimit));
    parser.body_limit(kBodyLimit);
    bool limit_set = false;
    while (!parser.is_done()) {
        boost::system::error_code ec;
        const std::size_t used = parser.put(boost::asio::buffer(in.data(), in.size()), ec);
        in = in.subspan(used);
        if (ec) return std::nullopt;  // malformed or incomplete: the server answers 400 or waits
        if (parser.is_header_done() && !limit_set) {
            limit_set = true;
            if (api.is_upload(parser.get())) parser.body_limit(kUploadLimit);
        }
        if (used == 0 && !parser.is_done()) return std::nullopt;
    }
    return parser.release();
}

// The reply as the server would write it must parse back as HTTP. `head`: a reply to HEAD,
// or a streamed reply's header (its body is not here), so no body is read back.
template <class Message>
void check_parses_back(Message message, bool head) {
    std::ostringstream wire;
    wire << message;
    const std::string text = wire.str();
    http::response_parser<http::string_body> parser;
    parser.skip(head);
    parser.eager(true);
    boost::system::error_code ec;
    parser.put(boost::asio::buffer(text), ec);
    if (ec == http::error::need_more) parser.put_eof(ec);
    FUZZ_CHECK(!ec);
    FUZZ_CHECK(parser.is_header_done());
    // The same fields come back: none was split by a line break in a value (a file name
    // made from a board name, say).
    const auto& back = parser.get();
    FUZZ_CHECK(std::distance(back.begin(), back.end()) ==
               std::distance(message.begin(), message.end()));
    for (const auto& field : message) FUZZ_CHECK(back[field.name_string()] == field.value());
}

void check_response(const web::server::Response& r, bool head) {
    const auto status = r.result_int();
    FUZZ_CHECK(status >= 200 && status < 500);
    web::server::Response sent = r;
    sent.prepare_payload();  // as the server does
    check_parses_back(std::move(sent), head);
    const bool is_json = r[http::field::content_type].starts_with("application/json");
    if (is_json && !(head && r.body().empty())) {
        const json body = json::parse(r.body(), nullptr, false);
        FUZZ_CHECK(!body.is_discarded());
        if (status >= 400) {
            FUZZ_CHECK(body.contains("error") && body["error"].is_object());
            FUZZ_CHECK(body["error"].contains("code") && body["error"]["code"].is_string());
            FUZZ_CHECK(body["error"].contains("message") && body["error"]["message"].is_string());
        }
    }
    FUZZ_CHECK(status < 400 || is_json);
}

void check_streamed(web::server::StreamedResponse& r) {
    FUZZ_CHECK(r.header.result_int() == 200);
    r.header.chunked(true);
    check_parses_back(r.header, true);
    try {
        for (int i = 0; i < kMaxChunks && r.next(); ++i) {
        }
    } catch (const std::exception&) {
        // The server ends the reply; the client sees a cut-off chunked body.
    }
}

// RACKPROF_FUZZ_VERBOSE=1: each request and its status on stderr (to check seeds).
bool verbose() {
    static const bool on = std::getenv("RACKPROF_FUZZ_VERBOSE") != nullptr;
    return on;
}

void print_exchange(const web::server::Request& request, const web::server::Reply& reply) {
    const auto* whole = std::get_if<web::server::Response>(&reply);
    std::fprintf(stderr, "%s %s -> %u %s\n", std::string(request.method_string()).c_str(),
                 std::string(request.target()).c_str(),
                 whole ? whole->result_int()
                       : std::get<web::server::StreamedResponse>(reply).header.result_int(),
                 whole ? whole->body().substr(0, 160).c_str() : "(streamed)");
}

// One connection's requests against a fresh rack.
void serve(Bytes in) {
    const auto dir = scratch_dir();
    std::filesystem::remove_all(dir);
    daemon::config::DaemonConfig config;
    config.boards.clear();
    config.storage_path = dir / "rack.db";
    auto log =
        std::make_shared<spdlog::logger>("fuzz", std::make_shared<spdlog::sinks::null_sink_mt>());
    std::string internal_error;
    {
        daemon::capture::CaptureService capture(config, log);
        daemon::service::LocalRack rack(capture, config.storage_path, 1);
        web::api::ApiOptions options;
        options.log_error = [&](const std::string& what) { internal_error = what; };
        web::api::Api api(rack, options);
        for (int i = 0; i < kMaxRequests; ++i) {
            auto request = next_request(in, api);
            if (!request) break;
            const bool head = request->method() == http::verb::head;
            const bool keep_alive = request->keep_alive();
            web::server::Reply reply = api.handle(*request);
            if (verbose()) print_exchange(*request, reply);
            if (!internal_error.empty()) {
                std::fprintf(stderr, "500 from the API: %s\n", internal_error.c_str());
                FUZZ_CHECK(internal_error.empty());
            }
            if (auto* whole = std::get_if<web::server::Response>(&reply)) {
                check_response(*whole, head);
            } else {
                check_streamed(std::get<web::server::StreamedResponse>(reply));
            }
            if (!keep_alive) break;
        }
        capture.shutdown();
    }
    std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rackprof::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    rackprof::fuzz::serve({data, size});
    return 0;
}

// Each input opens and frees a database and threads; with ASan's default 256 MB quarantine
// nothing freed is reused and every input pays for fresh pages: a smaller one doubles exec/s.
extern "C" const char* __asan_default_options() {
    return "quarantine_size_mb=16";
}
