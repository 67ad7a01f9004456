// The HTTP server inside `rackprof serve` (Boost.Beast): a listener, one session per
// connection on its own strand, keep-alive, and limits (header and body size, read time,
// connections). Requests go to a RequestHandler, upgrades to an UpgradeHandler; nothing here
// knows about routes.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/logger.h>

#include "web/server/connection_table.h"
#include "web/server/upgrade_handler.h"

namespace rackprof::web::server {

struct ServerContext;

struct ServerLimits {
    std::size_t header_bytes = 8 * 1024;
    std::size_t body_bytes = 1 << 20;
    // Uploads (RequestHandler::is_upload: PUT /api/v1/firmware, POST /api/v1/sessions/import)
    // are received into a file, never held in memory.
    std::size_t upload_bytes = 64u << 20;
    std::chrono::seconds request_time{30};  // a request must arrive whole within this (slowloris)
    // Connections, WebSockets included (see connection_table.h): in all, per client (remote
    // address), and reserved above `connections` for one request each, one per client (a
    // health probe, the dashboard), when nothing idle can be reclaimed.
    std::size_t connections = 256;
    std::size_t connections_per_client = 32;
    std::size_t reserved_connections = 2;
    // WebSockets (the feeds), within the connections above: in all and per client, so that
    // feeds never take every slot from ordinary requests.
    std::size_t feeds = 128;
    std::size_t feeds_per_client = 16;
};

class HttpServer {
  public:
    HttpServer(RequestHandler& handler, std::shared_ptr<spdlog::logger> log,
               ServerLimits limits = {});
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    // Binds "host:port" (port 0: any free port) and serves on `threads` threads. Returns the
    // bound endpoint. Throws std::runtime_error naming the address when it cannot listen.
    boost::asio::ip::tcp::endpoint start(const std::string& listen, int threads = 2);
    void stop();

    boost::asio::io_context& io() { return io_; }
    // WebSocket upgrades go here (set before start()).
    void set_feeds(UpgradeHandler* feeds) { feeds_ = feeds; }
    // Where uploads are received (set before start(); default: $TMPDIR). Beside the database,
    // a stored firmware image is a rename away.
    void set_upload_dir(std::filesystem::path dir);

  private:
    void accept();
    void admit(boost::asio::ip::tcp::socket socket);
    // `feed`: a WebSocket refused for the feeds' share (always a refusal).
    void note_limit(bool refused, const boost::asio::ip::address& client, bool feed = false);
    void watch_episode();

    static constexpr std::chrono::seconds kEpisodeQuiet{10};

    RequestHandler& handler_;
    UpgradeHandler* feeds_ = nullptr;
    std::shared_ptr<spdlog::logger> log_;
    ServerLimits limits_;
    std::filesystem::path upload_dir_;
    std::unique_ptr<ServerContext> context_;
    boost::asio::io_context io_;
    std::shared_ptr<ConnectionTable> connections_;  // shared with the connections' slots
    boost::asio::ip::tcp::acceptor acceptor_;
    boost::asio::steady_timer episode_timer_;  // on the acceptor's strand
    LimitEpisode episode_{kEpisodeQuiet};
    std::vector<std::thread> threads_;
};

// "127.0.0.1:8080", "[::1]:8080", "0.0.0.0:8080" -> endpoint. Throws std::invalid_argument.
boost::asio::ip::tcp::endpoint parse_listen_address(const std::string& listen);

}  // namespace rackprof::web::server
