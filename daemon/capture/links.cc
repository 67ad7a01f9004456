#include "daemon/capture/links.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <array>
#include <fstream>
#include <system_error>

namespace rackprof::daemon {

namespace asio = boost::asio;

namespace {

constexpr std::size_t kReadSize = 64 * 1024;
// A file replayed flat out: larger reads, fewer chunks (one block holds 256 KiB).
constexpr std::size_t kFastReadSize = 256 * 1024;

// A serial line is read this often rather than at every byte that arrives: a 1.5 Mbaud board
// then gives one chunk of ~3 KB per read instead of a wake-up, a read and a chunk (decoding,
// a hand-off to storage) for every few hundred bytes, which on a rack of hundreds of boards
// was most of the capture thread's time. The kernel holds what arrives meanwhile (a pty
// about 14 KB, a USB serial adapter 64 KiB or more); 20 ms adds nothing a live view (updated
// every 100 ms) would show.
constexpr std::chrono::milliseconds kSerialPollPeriod{20};
// A read this large may have found the device's buffer nearly full (a fast line): the next
// read comes at once, as without a period.
constexpr std::size_t kBusyReadBytes = 8 * 1024;
// A tty hands out at most this much per read (its line discipline's buffer). A read that
// returned less found that buffer drained: another read now would mostly say "nothing more",
// and on a pty it first waits for the kernel's worker to move what is pending (a sleep and a
// wake-up; on a rack of 256 boards that read was a fifth of the capture thread's time), so what
// is left waits for the next period.
constexpr std::size_t kTtyReadBytes = 4096;

// Reads a stream-like object (descriptor or socket) until it fails; shared by serial and TCP.
// With a poll period, each read takes everything the device holds, then the reader rests for
// the period (unless the read was large).
template <typename Stream>
class StreamReader : public std::enable_shared_from_this<StreamReader<Stream>> {
  public:
    StreamReader(Stream stream, Link::DataHandler on_data, Link::ClosedHandler on_closed,
                 std::chrono::milliseconds poll_period = {})
        : stream_(std::move(stream)),
          on_data_(std::move(on_data)),
          on_closed_(std::move(on_closed)),
          poll_period_(poll_period),
          rest_(stream_.get_executor()) {
        // Reads after the first of each wake-up must say "nothing more", not wait for it.
        boost::system::error_code ignored;
        if (poll_period_.count() > 0) stream_.non_blocking(true, ignored);
    }

    void start() { read(); }
    void cancel() {
        cancelled_ = true;
        rest_.cancel();
        boost::system::error_code ignored;
        stream_.close(ignored);
    }

  private:
    void read() {
        stream_.async_read_some(
            asio::buffer(buffer_),
            [self = this->shared_from_this()](boost::system::error_code ec, std::size_t n) {
                if (self->cancelled_) return;
                if (!ec && self->poll_period_.count() > 0) n = self->read_the_rest(n, ec);
                if (n > 0) self->on_data_(std::span<const std::uint8_t>(self->buffer_.data(), n));
                if (self->cancelled_) return;  // closed from the data handler
                if (ec) {
                    self->cancel();
                    self->on_closed_(LinkClosed{
                        ec == asio::error::eof ? "closed by the other end" : ec.message(), false});
                    return;
                }
                self->read_next(n);
            });
    }
    // After the first `n` bytes: whatever else the device holds now, up to the buffer's size,
    // as long as each read came back full (kTtyReadBytes). Returns the bytes in the buffer.
    std::size_t read_the_rest(std::size_t n, boost::system::error_code& ec) {
        std::size_t last = n;
        while (n < buffer_.size() && last >= kTtyReadBytes) {
            last = stream_.read_some(asio::buffer(buffer_.data() + n, buffer_.size() - n), ec);
            n += last;
            if (ec == asio::error::would_block || ec == asio::error::try_again) {
                ec = {};
                break;
            }
            if (ec || last == 0) break;
        }
        return n;
    }
    void read_next(std::size_t last_read) {
        if (poll_period_.count() == 0 || last_read >= kBusyReadBytes) return read();
        rest_.expires_after(poll_period_);
        rest_.async_wait([self = this->shared_from_this()](const boost::system::error_code& ec) {
            if (!ec && !self->cancelled_) self->read();
        });
    }

    Stream stream_;
    Link::DataHandler on_data_;
    Link::ClosedHandler on_closed_;
    std::chrono::milliseconds poll_period_;  // 0: read again as soon as a read completes
    asio::steady_timer rest_;
    std::array<std::uint8_t, kReadSize> buffer_{};
    bool cancelled_ = false;
};

class SerialLink : public Link {
  public:
    SerialLink(asio::io_context& io, std::string path, std::uint32_t baud)
        : io_(io), path_(std::move(path)), baud_(baud) {}
    ~SerialLink() override { close(); }

    void open(DataHandler on_data, ClosedHandler on_closed) override {
        int fd = -1;
        try {
            fd = open_serial_device(path_, baud_);
        } catch (const std::system_error& e) {
            asio::post(io_, [on_closed, why = std::string(e.what())] {
                on_closed(LinkClosed{why, false});
            });
            return;
        }
        reader_ = std::make_shared<StreamReader<asio::posix::stream_descriptor>>(
            asio::posix::stream_descriptor(io_, fd), std::move(on_data), std::move(on_closed),
            kSerialPollPeriod);
        reader_->start();
    }
    void close() override {
        if (reader_) reader_->cancel();
        reader_.reset();
    }

  private:
    asio::io_context& io_;
    std::string path_;
    std::uint32_t baud_;
    std::shared_ptr<StreamReader<asio::posix::stream_descriptor>> reader_;
};

class TcpLink : public Link {
  public:
    TcpLink(asio::io_context& io, std::string host, std::uint16_t port)
        : io_(io), host_(std::move(host)), port_(port) {}
    ~TcpLink() override { close(); }

    void open(DataHandler on_data, ClosedHandler on_closed) override {
        auto socket = std::make_shared<asio::ip::tcp::socket>(io_);
        auto resolver = std::make_shared<asio::ip::tcp::resolver>(io_);
        std::weak_ptr<int> alive = alive_;
        resolver->async_resolve(
            host_, std::to_string(port_),
            [this, socket, resolver, alive, on_data, on_closed](
                const boost::system::error_code& ec,
                const asio::ip::tcp::resolver::results_type& results) {
                if (alive.expired()) return;
                if (ec)
                    return on_closed(
                        LinkClosed{"cannot resolve " + host_ + ": " + ec.message(), false});
                asio::async_connect(
                    *socket, results,
                    [this, socket, alive, on_data, on_closed](const boost::system::error_code& cec,
                                                              const asio::ip::tcp::endpoint&) {
                        if (alive.expired()) return;
                        if (cec)
                            return on_closed(LinkClosed{"cannot connect to " + host_ + ":" +
                                                            std::to_string(port_) + ": " +
                                                            cec.message(),
                                                        false});
                        reader_ = std::make_shared<StreamReader<asio::ip::tcp::socket>>(
                            std::move(*socket), on_data, on_closed);
                        reader_->start();
                    });
            });
    }
    void close() override {
        alive_ = std::make_shared<int>(0);
        if (reader_) reader_->cancel();
        reader_.reset();
    }

  private:
    asio::io_context& io_;
    std::string host_;
    std::uint16_t port_;
    std::shared_ptr<int> alive_ =
        std::make_shared<int>(0);  // callbacks of an earlier open() see it expired
    std::shared_ptr<StreamReader<asio::ip::tcp::socket>> reader_;
};

// Replays a capture file: as fast as the loop allows, or paced to a byte rate.
class FileLink : public Link {
  public:
    FileLink(asio::io_context& io, std::string path, bool realtime, std::uint64_t rate)
        : io_(io),
          path_(std::move(path)),
          realtime_(realtime),
          rate_(std::max<std::uint64_t>(1, rate)),  // parse_link_uri refuses 0; never divide by it
          timer_(io) {}
    ~FileLink() override { close(); }

    void open(DataHandler on_data, ClosedHandler on_closed) override {
        on_data_ = std::move(on_data);
        on_closed_ = std::move(on_closed);
        file_.open(path_, std::ios::binary);
        open_ = true;
        if (!file_) {
            open_ = false;
            asio::post(io_, [on_closed = on_closed_, why = "cannot open " + path_] {
                on_closed(LinkClosed{why, false});
            });
            return;
        }
        schedule();
    }
    void close() override {
        open_ = false;
        alive_ = std::make_shared<int>(0);
        timer_.cancel();
        file_.close();
    }
    void set_backpressure(std::function<bool()> has_room) override {
        has_room_ = std::move(has_room);
    }

  private:
    void schedule() {
        // Storage behind: look again shortly instead of reading bytes it would have to drop.
        const bool wait = has_room_ && !has_room_();
        const auto delay = wait        ? std::chrono::microseconds(2000)
                           : realtime_ ? std::chrono::microseconds(chunk_size() * 1'000'000 / rate_)
                                       : std::chrono::microseconds(0);
        if (!wait && !realtime_) {  // flat out: no timer system call per read
            asio::post(io_, [this, alive = std::weak_ptr<int>(alive_)] {
                if (!alive.expired() && open_) read_next();
            });
            return;
        }
        if (wait) {
            timer_.expires_after(delay);
            timer_.async_wait(
                [this, alive = std::weak_ptr<int>(alive_)](const boost::system::error_code& ec) {
                    if (!ec && !alive.expired() && open_) schedule();
                });
            return;
        }
        timer_.expires_after(delay);
        timer_.async_wait(
            [this, alive = std::weak_ptr<int>(alive_)](const boost::system::error_code& ec) {
                if (ec || alive.expired() || !open_) return;
                read_next();
            });
    }
    void read_next() {
        buffer_.resize(chunk_size());
        file_.read(reinterpret_cast<char*>(buffer_.data()),
                   static_cast<std::streamsize>(buffer_.size()));
        const auto n = static_cast<std::size_t>(file_.gcount());
        if (n > 0) on_data_(std::span<const std::uint8_t>(buffer_.data(), n));
        if (!open_) return;
        if (n < buffer_.size()) {
            open_ = false;
            on_closed_(LinkClosed{"end of file", true});
            return;
        }
        schedule();
    }
    std::size_t chunk_size() const {
        return realtime_ ? std::max<std::size_t>(64, rate_ / 50) : kFastReadSize;
    }

    asio::io_context& io_;
    std::string path_;
    bool realtime_;
    std::uint64_t rate_;
    asio::steady_timer timer_;
    std::ifstream file_;
    bool open_ = false;
    DataHandler on_data_;
    ClosedHandler on_closed_;
    std::function<bool()> has_room_;
    std::vector<std::uint8_t> buffer_;
    std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace

std::unique_ptr<Link> make_link(asio::io_context& io, const LinkUri& uri) {
    if (uri.scheme == "serial")
        return std::make_unique<SerialLink>(io, uri.path,
                                            static_cast<std::uint32_t>(uri.number("baud", 0)));
    if (uri.scheme == "tcp") return std::make_unique<TcpLink>(io, uri.host, uri.port);
    if (uri.scheme == "file") {
        return std::make_unique<FileLink>(io, uri.path, uri.param("pace", "fast") == "realtime",
                                          uri.number("rate", 150000));
    }
    throw std::invalid_argument("links of kind '" + uri.scheme + "' are made by the board");
}

}  // namespace rackprof::daemon
