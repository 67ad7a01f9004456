#include "web/feeds/live_feeds.h"

#include <boost/asio/post.hpp>
#include <boost/beast/websocket.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <deque>

#include "gmon/profile_pipeline.h"
#include "gmon/report.h"
#include "storage/counters_json.h"
#include "web/server/request_target.h"

namespace rackprof::web::feeds {

namespace http = boost::beast::http;

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using nlohmann::json;

namespace {
constexpr auto kStallLimit = std::chrono::seconds(10);
// Clients send nothing the feeds read; a larger message closes the connection (1009) rather
// than being buffered (Beast's default would hold up to 16 MiB per client).
constexpr std::size_t kLargestIncoming = 4096;
// Events waiting for a slow events client; beyond, the oldest go (its stall closes it soon).
constexpr std::size_t kEventBacklog = 256;
}  // namespace

// One subscriber. Everything runs on its strand; at most one write is in flight, and at most
// `backlog` messages wait behind it, the oldest dropped first: a live feed keeps only the
// newest snapshot (1), the events feed every event of a burst.
class FeedClient : public std::enable_shared_from_this<FeedClient> {
  public:
    FeedClient(beast::tcp_stream stream, std::shared_ptr<const void> slot, std::size_t backlog)
        : ws_(std::move(stream)), slot_(std::move(slot)), backlog_(backlog) {}

    void start(const server::Request& request) {
        beast::get_lowest_layer(ws_).expires_never();
        ws_.set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
        ws_.read_message_max(kLargestIncoming);
        ws_.async_accept(request, [self = shared_from_this()](beast::error_code ec) {
            if (ec) return;
            self->open_ = true;
            self->read();
            if (!self->pending_.empty()) self->write_next();
        });
    }

    void send(std::shared_ptr<const std::string> message) {
        asio::post(ws_.get_executor(), [self = shared_from_this(), message = std::move(message)] {
            if (self->closed_) return;
            if (self->writing_ &&
                std::chrono::steady_clock::now() - self->write_started_ > kStallLimit) {
                return self->close("client too slow: no write completed for 10 s");
            }
            if (self->pending_.size() == self->backlog_) self->pending_.pop_front();
            self->pending_.push_back(message);
            if (self->open_ && !self->writing_) self->write_next();
        });
    }

    bool alive() const { return !closed_; }

  private:
    void write_next() {
        if (pending_.empty()) return;
        current_ = std::move(pending_.front());
        pending_.pop_front();
        writing_ = true;
        write_started_ = std::chrono::steady_clock::now();
        ws_.text(true);
        ws_.async_write(asio::buffer(*current_),
                        [self = shared_from_this()](beast::error_code ec, std::size_t) {
                            self->writing_ = false;
                            if (ec) {
                                self->closed_ = true;
                                return;
                            }
                            self->write_next();
                        });
    }

    void read() {
        ws_.async_read(in_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
            if (ec) {
                self->closed_ = true;
                return;
            }
            self->in_.consume(
                self->in_.size());  // clients have nothing to say; keep reading for close
            self->read();
        });
    }

    void close(const std::string& reason) {
        closed_ = true;
        ws_.async_close(websocket::close_reason(websocket::close_code::policy_error, reason),
                        [self = shared_from_this()](beast::error_code) {});
    }

    websocket::stream<beast::tcp_stream> ws_;
    std::shared_ptr<const void> slot_;  // the connection's place under the server's limits
    beast::flat_buffer in_;
    std::size_t backlog_;
    std::deque<std::shared_ptr<const std::string>> pending_;
    std::shared_ptr<const std::string> current_;
    bool open_ = false;
    bool writing_ = false;
    bool closed_ = false;
    std::chrono::steady_clock::time_point write_started_;
};

LiveFeeds::LiveFeeds(asio::io_context& io, daemon::service::RackService& rack,
                     server::TokenRule token, std::chrono::milliseconds tick)
    : rack_(rack), token_(std::move(token)), tick_(tick), timer_(io) {}

LiveFeeds::~LiveFeeds() {
    stop();
}

void LiveFeeds::start() {
    timer_.expires_after(tick_);
    timer_.async_wait([this](const boost::system::error_code& ec) {
        if (ec) return;
        on_tick();
        std::lock_guard lock(mutex_);
        if (!stopped_) start();
    });
}

void LiveFeeds::stop() {
    std::lock_guard lock(mutex_);
    stopped_ = true;
    timer_.cancel();
}

LiveFeeds::ClientCounts LiveFeeds::clients() {
    std::lock_guard lock(mutex_);
    ClientCounts counts;
    for (const auto& [id, list] : live_) {
        for (const auto& c : list) counts.live += c.expired() ? 0 : 1;
    }
    for (const auto& c : events_) counts.events += c.expired() ? 0 : 1;
    return counts;
}

namespace {

// The feed's session id in "/api/v1/sessions/{id}/live"; 0 if the path is not that.
std::int64_t live_session_of(std::string_view path) {
    constexpr std::string_view kPrefix = "/api/v1/sessions/", kSuffix = "/live";
    if (path.size() <= kPrefix.size() + kSuffix.size() || !path.starts_with(kPrefix) ||
        !path.ends_with(kSuffix))
        return 0;
    const std::string id(
        path.substr(kPrefix.size(), path.size() - kPrefix.size() - kSuffix.size()));
    if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos || id.size() > 15)
        return 0;
    return std::stoll(id);
}

// Browsers cannot set headers on a WebSocket, so the token may come as ?token= as well.
bool carries_token(const server::TokenRule& rule, const server::Request& request) {
    if (!rule.needs_token(server::Access::kRead)) return true;
    if (rule.admits(server::Access::kRead, request[http::field::authorization])) return true;
    const auto query = server::query_values(request.target());
    return query && query->count("token") &&
           rule.admits_token(server::Access::kRead, query->at("token"));
}

}  // namespace

std::optional<server::Response> LiveFeeds::accept(beast::tcp_stream& stream,
                                                  const server::Request& request,
                                                  std::shared_ptr<const void> slot) {
    const std::string_view target = request.target();
    const std::string_view path = target.substr(0, target.find('?'));
    const std::int64_t session = live_session_of(path);
    if (path != "/api/v1/events" && session == 0)
        return server::error_response(http::status::not_found, "not_found",
                                      "no WebSocket feed here", request.version(), false);
    if (!carries_token(token_, request))
        return server::error_response(
            http::status::unauthorized, "unauthorized",
            "this feed needs ?token=<token> or Authorization: Bearer <token>", request.version(),
            false);
    auto client = std::make_shared<FeedClient>(std::move(stream), std::move(slot),
                                               session ? 1 : kEventBacklog);
    {
        std::lock_guard lock(mutex_);
        if (session) {
            live_[session].push_back(client);
        } else {
            events_.push_back(client);
        }
    }
    client->start(request);
    if (session)
        client->send(std::make_shared<const std::string>(snapshot(session)));  // something at once
    return std::nullopt;
}

void LiveFeeds::publish_event(const std::string& event) {
    auto message = std::make_shared<const std::string>(event);
    std::lock_guard lock(mutex_);
    std::erase_if(events_, [](const std::weak_ptr<FeedClient>& w) { return w.expired(); });
    for (auto& w : events_) {
        if (auto c = w.lock()) c->send(message);
    }
}

void LiveFeeds::on_tick() {
    std::vector<std::int64_t> sessions;
    {
        std::lock_guard lock(mutex_);
        for (auto it = live_.begin(); it != live_.end();) {
            std::erase_if(it->second, [](const std::weak_ptr<FeedClient>& w) {
                const auto c = w.lock();
                return !c || !c->alive();
            });
            if (it->second.empty()) {
                rates_.erase(it->first);
                it = live_.erase(it);
            } else {
                sessions.push_back(it->first);
                ++it;
            }
        }
    }
    for (const std::int64_t id : sessions) {
        auto message = std::make_shared<const std::string>(snapshot(id));  // once, for everyone
        std::lock_guard lock(mutex_);
        for (auto& w : live_[id]) {
            if (auto c = w.lock()) c->send(message);
        }
    }
}

// Totals, rates, losses, link state, the top functions by self time and the busiest arcs, as
// the service's live view has them: the feed only adds rates and serialises.
std::string LiveFeeds::snapshot(std::int64_t id) {
    json out = {{"session", id}};
    const auto view = rack_.live(id);
    if (!view) {
        out["state"] = "not_capturing";
        return out.dump();
    }
    const auto& c = view->state.counters;
    const auto now = std::chrono::steady_clock::now();
    double records_per_s = 0, bytes_per_s = 0;
    {
        constexpr auto kWindow = std::chrono::seconds(5);
        constexpr auto kStep = std::chrono::milliseconds(200);  // one sample per step
        std::lock_guard lock(mutex_);
        auto& seen = rates_[id];
        if (seen.empty() || now - seen.back().at >= kStep)
            seen.push_back({now, c.arcs + c.pc_samples, c.bytes_in});
        while (seen.size() > 2 && now - seen[1].at >= kWindow) seen.pop_front();
        const Rate& first = seen.front();
        const double dt = std::chrono::duration<double>(now - first.at).count();
        if (dt >= 0.25) {  // under a quarter second, one burst would be the whole rate
            records_per_s = static_cast<double>(c.arcs + c.pc_samples - first.records) / dt;
            bytes_per_s = static_cast<double>(c.bytes_in - first.bytes) / dt;
        }
    }
    const daemon::capture::LiveState& state = view->state;
    out["board"] = state.board;
    out["state"] = "capturing";
    out["link"] = state.link_state;
    // While storage's commits fail, what arrives is counted lost (losses.records_lost_storage).
    out["storage_state"] = state.storage_error.empty() ? "ok" : "storage_error";
    out["storage_error"] = state.storage_error.empty() ? json(nullptr) : json(state.storage_error);
    out["records_per_s"] = records_per_s;
    out["bytes_per_s"] = bytes_per_s;
    out["totals"] = storage::live_totals_json(c);
    out["losses"] = storage::live_losses_json(c);
    json top = json::array();
    for (const auto& f : view->top_functions) {
        top.push_back({{"name", f.name},
                       {"self_percent", f.self_percent},
                       {"calls", f.calls ? json(*f.calls) : json(nullptr)}});
    }
    out["top_functions"] = top;
    json busiest = json::array();
    for (const auto& a : view->busiest_arcs) {
        busiest.push_back({{"from", gmon::hex_address(a.from_pc)},
                           {"self", gmon::hex_address(a.self_pc)},
                           {"count", a.count}});
    }
    out["busiest_arcs"] = busiest;
    json newest = json::array();
    for (const auto& r : state.newest_arcs) {
        newest.push_back(
            {{"from", gmon::hex_address(r.from_pc)}, {"self", gmon::hex_address(r.self_pc)}});
    }
    out["newest_arcs"] = newest;
    json console = json::array();
    for (const auto& line : state.newest_console) {
        console.push_back(
            {{"received_ns", line.received_ns}, {"port", line.port}, {"text", line.text}});
    }
    out["console"] = console;
    // Console bytes are the target's: invalid UTF-8 is replaced, never fatal.
    return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace rackprof::web::feeds
