#include "web/server/http_server.h"

#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

#include <optional>

namespace rackprof::web {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;

namespace {

class HttpSession : public std::enable_shared_from_this<HttpSession> {
  public:
    HttpSession(tcp::socket socket, RequestHandler& handler, UpgradeHandler* feeds,
                const ServerLimits& limits,
                std::shared_ptr<std::atomic<std::size_t>> open_connections)
        : stream_(std::move(socket)),
          handler_(handler),
          feeds_(feeds),
          limits_(limits),
          open_connections_(std::move(open_connections)) {}
    ~HttpSession() { --*open_connections_; }

    void start() {
        asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read(); });
    }

  private:
    void read() {
        parser_.emplace();
        parser_->header_limit(static_cast<std::uint32_t>(limits_.header_bytes));
        parser_->body_limit(limits_.body_bytes);
        stream_.expires_after(limits_.request_time);
        http::async_read_header(stream_, buffer_, *parser_,
                                [self = shared_from_this()](beast::error_code ec, std::size_t) {
                                    if (ec) return self->on_read(ec);
                                    // Uploads (ELF images, captures) may be larger than JSON
                                    // requests.
                                    if (self->handler_.is_upload(self->parser_->get()))
                                        self->parser_->body_limit(self->limits_.upload_bytes);
                                    http::async_read(self->stream_, self->buffer_, *self->parser_,
                                                     [self](beast::error_code ec2, std::size_t) {
                                                         self->on_read(ec2);
                                                     });
                                });
    }

    void on_read(beast::error_code ec) {
        if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
            ec == asio::error::connection_reset) {
            return close();
        }
        if (ec == http::error::body_limit) {
            return send(error_response(
                http::status::payload_too_large, "payload_too_large",
                "the request body is larger than " + std::to_string(limits_.body_bytes) + " bytes",
                11, false));
        }
        if (ec == http::error::header_limit) {
            return send(error_response(http::status::request_header_fields_too_large,
                                       "headers_too_large", "the request headers are too large", 11,
                                       false));
        }
        if (ec) {
            return send(error_response(http::status::bad_request, "bad_request",
                                       "malformed HTTP request", 11, false));
        }
        if (beast::websocket::is_upgrade(parser_->get())) {
            if (!feeds_)
                return send(error_response(http::status::not_found, "not_found",
                                           "no WebSocket feed here", 11, false));
            auto refusal = feeds_->accept(stream_, parser_->get());
            if (!refusal) return;  // the feed owns the connection now
            refusal->keep_alive(false);
            return send(std::move(*refusal));
        }
        auto reply = handler_.handle(parser_->get());
        if (auto* whole = std::get_if<Response>(&reply)) return send(std::move(*whole));
        stream(std::move(std::get<StreamedResponse>(reply)));
    }

    // Header first, then each chunk once the previous one is written: a slow client holds
    // only its own connection back, and the export never sits whole in memory.
    void stream(StreamedResponse reply) {
        streamed_ = std::make_shared<StreamedResponse>(std::move(reply));
        streamed_->header.chunked(true);
        serializer_.emplace(streamed_->header);
        http::async_write_header(stream_, *serializer_,
                                 [self = shared_from_this()](beast::error_code ec, std::size_t) {
                                     if (ec) return self->close();
                                     self->next_chunk();
                                 });
    }

    void next_chunk() {
        std::optional<std::string> chunk;
        try {
            chunk = streamed_->next();
        } catch (const std::exception&) {
            return close();  // the reply is already under way: all that is left is to end it
        }
        stream_.expires_after(limits_.request_time);
        if (!chunk) {
            asio::async_write(stream_, http::make_chunk_last(),
                              [self = shared_from_this()](beast::error_code ec, std::size_t) {
                                  const bool keep = !ec && self->streamed_->header.keep_alive();
                                  self->streamed_.reset();
                                  self->serializer_.reset();
                                  if (keep) return self->read();
                                  self->close();
                              });
            return;
        }
        chunk_ = std::move(*chunk);
        asio::async_write(stream_, http::make_chunk(asio::buffer(chunk_)),
                          [self = shared_from_this()](beast::error_code ec, std::size_t) {
                              if (ec) return self->close();
                              self->next_chunk();
                          });
    }

    void send(Response response) {
        response.prepare_payload();
        auto shared = std::make_shared<Response>(std::move(response));
        const bool keep_alive = shared->keep_alive();
        http::async_write(
            stream_, *shared,
            [self = shared_from_this(), shared, keep_alive](beast::error_code ec, std::size_t) {
                if (ec || !keep_alive) return self->close();
                self->read();
            });
    }

    void close() {
        beast::error_code ignored;
        stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    }

    beast::tcp_stream stream_;
    beast::flat_buffer buffer_;
    std::optional<http::request_parser<http::string_body>> parser_;
    std::shared_ptr<StreamedResponse> streamed_;
    std::optional<http::response_serializer<http::empty_body>> serializer_;
    std::string chunk_;
    RequestHandler& handler_;
    UpgradeHandler* feeds_;
    const ServerLimits& limits_;
    std::shared_ptr<std::atomic<std::size_t>> open_connections_;
};

}  // namespace

tcp::endpoint parse_listen_address(const std::string& listen) {
    const auto colon = listen.rfind(':');
    if (colon == std::string::npos)
        throw std::invalid_argument("listen address '" + listen + "' needs host:port");
    std::string host = listen.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
        host = host.substr(1, host.size() - 2);
    boost::system::error_code ec;
    const auto address = asio::ip::make_address(host, ec);
    if (ec)
        throw std::invalid_argument("listen address '" + listen + "': '" + host +
                                    "' is not an IP address");
    const std::string port = listen.substr(colon + 1);
    if (port.empty() || port.size() > 5 ||
        port.find_first_not_of("0123456789") != std::string::npos || std::stoul(port) > 65535) {
        throw std::invalid_argument("listen address '" + listen + "': bad port");
    }
    return {address, static_cast<std::uint16_t>(std::stoul(port))};
}

HttpServer::HttpServer(RequestHandler& handler, std::shared_ptr<spdlog::logger> log,
                       ServerLimits limits)
    : handler_(handler), log_(std::move(log)), limits_(limits), acceptor_(asio::make_strand(io_)) {}

HttpServer::~HttpServer() {
    stop();
}

tcp::endpoint HttpServer::start(const std::string& listen, int threads) {
    const tcp::endpoint endpoint = parse_listen_address(listen);
    beast::error_code ec;
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) throw std::runtime_error("cannot listen on " + listen + ": " + ec.message());
    accept();
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { io_.run(); });
    return acceptor_.local_endpoint();
}

void HttpServer::accept() {
    acceptor_.async_accept(
        asio::make_strand(io_), [this](beast::error_code ec, tcp::socket socket) {
            if (ec == asio::error::operation_aborted) return;
            if (!ec) {
                if (*open_connections_ >= limits_.connections) {
                    log_->warn("http: connection limit ({}) reached, refusing a client",
                               limits_.connections);
                    beast::error_code ignored;
                    socket.close(ignored);
                } else {
                    ++*open_connections_;
                    std::make_shared<HttpSession>(std::move(socket), handler_, feeds_, limits_,
                                                  open_connections_)
                        ->start();
                }
            }
            accept();
        });
}

void HttpServer::stop() {
    if (threads_.empty()) return;
    asio::post(acceptor_.get_executor(), [this] {
        beast::error_code ignored;
        acceptor_.close(ignored);
    });
    io_.stop();
    for (auto& t : threads_) t.join();
    threads_.clear();
}

}  // namespace rackprof::web
