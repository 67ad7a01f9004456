#include "web/server/http_server.h"

#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <system_error>

namespace rackprof::web::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;

// What every connection's session reads; owned by the server, alive as long as it runs.
struct ServerContext {
    RequestHandler& handler;
    UpgradeHandler* feeds;
    const ServerLimits& limits;
    std::filesystem::path upload_dir;
    spdlog::logger& log;
    // A WebSocket refused for the feeds' share: told with the other refusals (any thread).
    std::function<void(const boost::asio::ip::address&)> feed_refused;
};

namespace {

// A connection's place in the table, given up when its last holder drops it: the session, or
// the feed that took the connection over.
class ConnectionSlot {
  public:
    ConnectionSlot(std::shared_ptr<ConnectionTable> table,
                   const ConnectionTable::Admission& admitted)
        : table_(std::move(table)),
          id_(admitted.id),
          reserved_(admitted.slot == ConnectionTable::Slot::kReserved) {}
    ~ConnectionSlot() { table_->release(id_); }
    ConnectionSlot(const ConnectionSlot&) = delete;
    ConnectionSlot& operator=(const ConnectionSlot&) = delete;

    // False when the connection was reclaimed meanwhile: it must close.
    bool set_idle(bool idle) { return table_->set_idle(id_, idle); }
    bool reserved() const { return reserved_; }
    // False when the feeds' share is full: the upgrade is refused.
    bool open_feed() { return table_->open_feed(id_); }

  private:
    std::shared_ptr<ConnectionTable> table_;
    ConnectionTable::Id id_;
    bool reserved_;
};

// Enough to see that a request has begun; the parser takes these bytes from the buffer.
constexpr std::size_t kFirstRead = 4096;

// The file an upload's body is received into: created private (mode 0600, a name nobody can
// guess) in the upload folder, removed when dropped: after the reply, or when the connection
// fails half way.
class UploadFile {
  public:
    explicit UploadFile(const std::filesystem::path& dir) {
        std::string name = (dir / ".upload-XXXXXX").string();
        const int fd = ::mkstemp(name.data());
        if (fd < 0)
            throw std::system_error(errno, std::generic_category(), "cannot create " + name);
        path_ = name;
        beast::file file;
        file.native_handle(fd);
        beast::error_code ec;
        body_.reset(std::move(file), ec);
        if (ec) {
            std::error_code ignored;
            std::filesystem::remove(path_, ignored);
            throw std::runtime_error("cannot write " + name + ": " + ec.message());
        }
    }
    ~UploadFile() {
        body_.close();
        std::error_code ignored;
        std::filesystem::remove(path_, ignored);
    }
    UploadFile(const UploadFile&) = delete;
    UploadFile& operator=(const UploadFile&) = delete;

    const std::filesystem::path& path() const { return path_; }
    http::file_body::value_type& body() { return body_; }

  private:
    std::filesystem::path path_;
    http::file_body::value_type body_;
};

class HttpSession : public std::enable_shared_from_this<HttpSession> {
  public:
    HttpSession(tcp::socket socket, const ServerContext& context)
        : stream_(std::move(socket)), context_(context) {}

    void start(std::shared_ptr<ConnectionSlot> slot) {
        slot_ = std::move(slot);
        asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read(); });
    }

    // Closes it from any thread: it was idle, and its slot went to a new connection.
    void reclaim() {
        asio::post(stream_.get_executor(), [self = shared_from_this()] {
            beast::error_code ignored;
            self->stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
            self->stream_.close();
        });
    }

  private:
    // Waits for the next request as an idle connection, which the server may reclaim when it
    // is full; bytes already buffered (a pipelined request) make it busy at once. The whole
    // request, this wait included, must arrive within request_time (slowloris).
    void read() {
        stream_.expires_after(context_.limits.request_time);
        if (buffer_.size() > 0) return read_request();
        if (!slot_->set_idle(true)) return close();
        stream_.async_read_some(buffer_.prepare(kFirstRead),
                                [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                                    if (ec) return self->on_read(ec);
                                    self->buffer_.commit(n);
                                    if (!self->slot_->set_idle(false)) return self->close();
                                    self->read_request();
                                });
    }

    void read_request() {
        parser_.emplace();
        parser_->header_limit(static_cast<std::uint32_t>(context_.limits.header_bytes));
        // Beast checks a Content-Length against the limit as soon as the header is complete,
        // before we know whether the request is an upload: start with the larger limit and set
        // the request's own once the header is read.
        body_limit_ = std::max(context_.limits.body_bytes, context_.limits.upload_bytes);
        parser_->body_limit(body_limit_);
        http::async_read_header(stream_, buffer_, *parser_,
                                [self = shared_from_this()](beast::error_code ec, std::size_t) {
                                    if (ec) return self->on_read(ec);
                                    self->on_header();
                                });
    }

    void on_header() {
        const bool upload = context_.handler.is_upload(parser_->get());
        body_limit_ = upload ? context_.limits.upload_bytes : context_.limits.body_bytes;
        if (parser_->content_length().value_or(0) > body_limit_)
            return on_read(http::error::body_limit);  // refused from the header alone
        if (!upload) {
            parser_->body_limit(body_limit_);
            return read_body(*parser_);
        }
        try {
            upload_.emplace(context_.upload_dir);
        } catch (const std::exception& e) {
            context_.log.error("http: cannot receive an upload: {}", e.what());
            return send(error_response(http::status::internal_server_error, "upload_failed",
                                       "the upload could not be stored; the daemon's log has why",
                                       11, false));
        }
        // The same parser state, now writing the body to the file (Beast allows this between
        // header and body).
        upload_parser_.emplace(std::move(*parser_));
        parser_.reset();
        upload_parser_->body_limit(body_limit_);
        upload_parser_->get().body() = std::move(upload_->body());
        continue_if_expected(
            [self = shared_from_this()] { self->read_body(*self->upload_parser_); });
    }

    // A client that sent "Expect: 100-continue" (curl does above 1 MiB) waits for this before
    // sending the body, or a second if it never comes.
    template <typename Next>
    void continue_if_expected(Next next) {
        const auto& header = upload_parser_->get();
        if (!beast::iequals(header[http::field::expect], "100-continue")) return next();
        auto interim = std::make_shared<http::response<http::empty_body>>(http::status::continue_,
                                                                          header.version());
        http::async_write(stream_, *interim,
                          [self = shared_from_this(), interim, next = std::move(next)](
                              beast::error_code ec, std::size_t) {
                              if (ec) return self->close();
                              next();
                          });
    }

    template <typename Parser>
    void read_body(Parser& parser) {
        http::async_read(
            stream_, buffer_, parser,
            [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
    }

    void on_read(beast::error_code ec) {
        if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
            ec == asio::error::connection_reset || ec == asio::error::operation_aborted ||
            !stream_.socket().is_open()) {
            return close();
        }
        if (ec == http::error::body_limit) {
            return send(error_response(
                http::status::payload_too_large, "payload_too_large",
                "the request body is larger than " + std::to_string(body_limit_) + " bytes", 11,
                false));
        }
        if (ec == http::error::header_limit) {
            return send(error_response(http::status::request_header_fields_too_large,
                                       "headers_too_large", "the request headers are too large", 11,
                                       false));
        }
        if (ec && upload_ &&
            ec.category() != http::make_error_code(http::error::bad_method).category()) {
            context_.log.error("http: an upload could not be received: {}", ec.message());
            return send(error_response(http::status::internal_server_error, "upload_failed",
                                       "the upload could not be stored", 11, false));
        }
        if (ec) {
            return send(error_response(http::status::bad_request, "bad_request",
                                       "malformed HTTP request", 11, false));
        }
        if (upload_) return answer_upload();
        if (beast::websocket::is_upgrade(parser_->get())) {
            if (!context_.feeds)
                return send(error_response(http::status::not_found, "not_found",
                                           "no WebSocket feed here", 11, false));
            if (slot_->reserved())
                return send(error_response(http::status::service_unavailable, "server_busy",
                                           "the server is at its connection limit", 11, false));
            if (!slot_->open_feed()) {
                beast::error_code ignored;
                const auto remote = stream_.socket().remote_endpoint(ignored);
                if (!ignored) context_.feed_refused(remote.address());
                return send(error_response(
                    http::status::service_unavailable, "too_many_feeds",
                    "the server has as many WebSocket feeds open as it allows (" +
                        std::to_string(context_.limits.feeds) + " in all, " +
                        std::to_string(context_.limits.feeds_per_client) + " per client)",
                    11, false));
            }
            auto refusal = context_.feeds->accept(stream_, parser_->get(), slot_);
            if (!refusal) return;  // the feed owns the connection (and its slot) now
            refusal->keep_alive(false);
            return send(std::move(*refusal));
        }
        answer(context_.handler.handle(parser_->get(), {}));
    }

    // The body is in the file, complete: the handler reads it from there, and the file goes
    // once the handler is done with it.
    void answer_upload() {
        auto& message = upload_parser_->get();
        message.body().close();
        const Request request(std::move(message.base()));
        auto reply = context_.handler.handle(request, upload_->path());
        upload_parser_.reset();
        upload_.reset();
        answer(std::move(reply));
    }

    // A reserved slot serves one request, so it is soon free for the next probe.
    void answer(Reply reply) {
        if (auto* whole = std::get_if<Response>(&reply)) {
            if (slot_->reserved()) whole->keep_alive(false);
            return send(std::move(*whole));
        }
        auto& streamed = std::get<StreamedResponse>(reply);
        if (slot_->reserved()) streamed.header.keep_alive(false);
        stream(std::move(streamed));
    }

    // Header first, then each chunk once the previous one is written: a slow client holds
    // only its own connection back, and the export never sits whole in memory.
    void stream(StreamedResponse reply) {
        streamed_ = std::make_shared<StreamedResponse>(std::move(reply));
        ahead_.reset();
        ahead_failed_ = false;
        streamed_->header.chunked(true);
        serializer_.emplace(streamed_->header);
        stream_.expires_after(context_.limits.request_time);  // as in send()
        http::async_write_header(stream_, *serializer_,
                                 [self = shared_from_this()](beast::error_code ec, std::size_t) {
                                     if (ec) return self->close();
                                     self->next_chunk();
                                 });
    }

    void next_chunk() {
        std::optional<std::string> chunk;
        if (ahead_) {
            chunk = std::move(*ahead_);
            ahead_.reset();
        } else if (!pull(chunk)) {
            return close();
        }
        stream_.expires_after(context_.limits.request_time);
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
                              if (ec || self->ahead_failed_) return self->close();
                              self->next_chunk();
                          });
        // The next chunk is made while the kernel sends this one (the client reads on another
        // core), so making and sending overlap; a connection holds two chunks at most.
        std::optional<std::string> ahead;
        if (pull(ahead)) {
            ahead_ = std::move(ahead);
        } else {
            ahead_failed_ = true;
        }
    }

    // The stream's next chunk; false when making it failed (the reply is already under way:
    // all that is left is to end it).
    bool pull(std::optional<std::string>& chunk) {
        try {
            chunk = streamed_->next();
            return true;
        } catch (const std::exception&) {
            return false;
        }
    }

    void send(Response response) {
        // The write gets its own deadline: the one read() set ran while the answer was being
        // computed (a fleet profile over 10^4 sessions can take as long), and an expired one
        // would cut a large body short.
        stream_.expires_after(context_.limits.request_time);
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
    std::optional<http::request_parser<http::file_body>> upload_parser_;  // an upload's body
    std::optional<UploadFile> upload_;
    std::uint64_t body_limit_ = 0;  // this request's
    std::shared_ptr<StreamedResponse> streamed_;
    std::optional<http::response_serializer<http::empty_body>> serializer_;
    std::string chunk_;
    std::optional<std::optional<std::string>> ahead_;  // made, not yet sent (nullopt inside: end)
    bool ahead_failed_ = false;
    const ServerContext& context_;
    std::shared_ptr<ConnectionSlot> slot_;
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
    : handler_(handler),
      log_(std::move(log)),
      limits_(limits),
      connections_(std::make_shared<ConnectionTable>(
          ConnectionLimits{limits.connections, limits.connections_per_client,
                           limits.reserved_connections, limits.feeds, limits.feeds_per_client})),
      acceptor_(asio::make_strand(io_)),
      episode_timer_(acceptor_.get_executor()) {}

HttpServer::~HttpServer() {
    stop();
}

void HttpServer::set_upload_dir(std::filesystem::path dir) {
    upload_dir_ = std::move(dir);
}

tcp::endpoint HttpServer::start(const std::string& listen, int threads) {
    const tcp::endpoint endpoint = parse_listen_address(listen);
    beast::error_code ec;
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) throw std::runtime_error("cannot listen on " + listen + ": " + ec.message());
    context_ = std::make_unique<ServerContext>(
        ServerContext{handler_, feeds_, limits_,
                      upload_dir_.empty() ? std::filesystem::temp_directory_path() : upload_dir_,
                      *log_, [this](const asio::ip::address& client) {
                          asio::post(acceptor_.get_executor(),
                                     [this, client] { note_limit(true, client, true); });
                      }});
    accept();
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { io_.run(); });
    return acceptor_.local_endpoint();
}

void HttpServer::accept() {
    acceptor_.async_accept(asio::make_strand(io_),
                           [this](beast::error_code ec, tcp::socket socket) {
                               if (ec == asio::error::operation_aborted) return;
                               if (!ec) admit(std::move(socket));
                               accept();
                           });
}

// On the acceptor's strand, like the episode's bookkeeping.
void HttpServer::admit(tcp::socket socket) {
    beast::error_code ec;
    const auto remote = socket.remote_endpoint(ec);
    if (ec) return;  // gone already
    auto session = std::make_shared<HttpSession>(std::move(socket), *context_);
    const auto admitted =
        connections_->admit(remote.address(), [weak = std::weak_ptr<HttpSession>(session)] {
            if (const auto s = weak.lock()) s->reclaim();
        });
    if (admitted.reclaimed) admitted.reclaimed();
    const bool refused = admitted.slot == ConnectionTable::Slot::kRefused;
    if (admitted.reclaimed || refused) note_limit(refused, remote.address());
    if (refused) return;  // the socket closes with the session
    session->start(std::make_shared<ConnectionSlot>(connections_, admitted));
}

// Refusals are told once per episode, with their count at its end, not once each.
void HttpServer::note_limit(bool refused, const asio::ip::address& client, bool feed) {
    if (!episode_.note(refused)) return;
    if (feed) {
        log_->warn(
            "http: WebSocket limits reached ({}: at most {} feeds per client, {} in all; {} "
            "open): refusing new feeds; a count follows when it is over",
            client.to_string(), limits_.feeds_per_client, limits_.feeds, connections_->feeds());
    } else {
        log_->warn(
            "http: connection limits reached ({}: {} of {} per client; {} open, {} in all): "
            "closing "
            "idle connections and refusing the rest; a count follows when it is over",
            client.to_string(), connections_->open_by(client), limits_.connections_per_client,
            connections_->open(), limits_.connections);
    }
    watch_episode();
}

void HttpServer::watch_episode() {
    episode_timer_.expires_at(episode_.quiet_at());
    episode_timer_.async_wait([this](const boost::system::error_code& ec) {
        if (ec) return;
        if (const auto over = episode_.end_if_quiet()) {
            log_->warn(
                "http: connection limits: {} connection(s) refused and {} idle one(s) closed to "
                "make room over {} s",
                over->refused, over->reclaimed,
                std::chrono::duration_cast<std::chrono::seconds>(over->length).count());
            return;
        }
        watch_episode();
    });
}

void HttpServer::stop() {
    if (threads_.empty()) return;
    asio::post(acceptor_.get_executor(), [this] {
        beast::error_code ignored;
        acceptor_.close(ignored);
        episode_timer_.cancel();
    });
    io_.stop();
    for (auto& t : threads_) t.join();
    threads_.clear();
}

}  // namespace rackprof::web::server
