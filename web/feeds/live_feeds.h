// WebSocket feeds: /api/v1/sessions/{id}/live (snapshots of a capturing session, several per
// second) and /api/v1/events (board and session state changes). A snapshot is built once per
// session per tick and shared by every subscriber; a slow live client keeps only the newest
// one (an events client every event), and a client whose writes stall for long is closed
// with a reason. Capture never waits.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/tcp_stream.hpp>

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "daemon/service/rack_service.h"
#include "web/server/token_rule.h"
#include "web/server/upgrade_handler.h"

namespace rackprof::web::feeds {

class FeedClient;

class LiveFeeds : public server::UpgradeHandler {
  public:
    // `token`: the API's rule; the feeds are reads (a token only with token_for_reads).
    LiveFeeds(boost::asio::io_context& io, daemon::service::RackService& rack,
              server::TokenRule token = {},
              std::chrono::milliseconds tick = std::chrono::milliseconds(250));
    ~LiveFeeds() override;

    void start();
    void stop();
    // Takes over an upgrade request for one of the feed paths; else a 404, or a 401 when the
    // token is needed and neither `?token=` nor `Authorization: Bearer` carries it.
    std::optional<server::Response> accept(boost::beast::tcp_stream& stream,
                                           const server::Request& request,
                                           std::shared_ptr<const void> slot) override;
    // Queues an event for every /api/v1/events client (any thread).
    void publish_event(const std::string& json);
    // Connected clients, for /metrics.
    struct ClientCounts {
        std::size_t live = 0;
        std::size_t events = 0;
    };
    ClientCounts clients();

  private:
    void on_tick();
    std::string snapshot(std::int64_t session_id);

    // A session's counters as seen at one moment; a session keeps the last few seconds of
    // them, and rates are taken over that window: counters move in bursts (a link's reads,
    // the writer's batches), and every snapshot (one per client and tick) sees them, so a rate
    // between two successive snapshots zig-zagged for a board sending at a constant rate.
    struct Rate {
        std::chrono::steady_clock::time_point at;
        std::uint64_t records = 0;
        std::uint64_t bytes = 0;
    };

    daemon::service::RackService& rack_;
    server::TokenRule token_;
    std::chrono::milliseconds tick_;
    boost::asio::steady_timer timer_;
    std::mutex mutex_;
    std::map<std::int64_t, std::vector<std::weak_ptr<FeedClient>>> live_;
    std::vector<std::weak_ptr<FeedClient>> events_;
    std::map<std::int64_t, std::deque<Rate>> rates_;
    bool stopped_ = false;
};

}  // namespace rackprof::web::feeds
