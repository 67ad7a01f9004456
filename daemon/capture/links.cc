#include "daemon/capture/links.h"

#include "daemon/capture/gdb_link.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <fstream>
#include <system_error>

namespace rackprof::daemon::capture {

namespace asio = boost::asio;

namespace {

constexpr std::size_t kReadSize = std::size_t{64} * 1024;
// A file replayed flat out: larger reads, fewer chunks (one block holds 256 KiB).
constexpr std::size_t kFastReadSize = std::size_t{256} * 1024;

// Reads a TCP socket as data arrives, until it fails.
template <typename Stream>
class StreamReader : public std::enable_shared_from_this<StreamReader<Stream>> {
  public:
    StreamReader(Stream stream, Link::DataHandler on_data, Link::ClosedHandler on_closed)
        : stream_(std::move(stream)),
          on_data_(std::move(on_data)),
          on_closed_(std::move(on_closed)) {}

    void start() { read(); }
    void cancel() {
        cancelled_ = true;
        boost::system::error_code ignored;
        stream_.close(ignored);
    }

  private:
    void read() {
        stream_.async_read_some(
            asio::buffer(buffer_),
            [self = this->shared_from_this()](boost::system::error_code ec, std::size_t n) {
                if (self->cancelled_) return;
                if (n > 0) self->on_data_(std::span<const std::uint8_t>(self->buffer_.data(), n));
                if (self->cancelled_) return;  // closed from the data handler
                if (ec) {
                    self->cancel();
                    self->on_closed_(LinkClosed{
                        ec == asio::error::eof ? "closed by the other end" : ec.message(), false});
                    return;
                }
                self->read();
            });
    }

    Stream stream_;
    Link::DataHandler on_data_;
    Link::ClosedHandler on_closed_;
    std::array<std::uint8_t, kReadSize> buffer_{};
    bool cancelled_ = false;
};

// Every serial line of one io_context, read in turn every 20 ms on one timer. A line is read
// that often rather than at every byte that arrives: a 1.5 Mbaud board then gives ~3 KB per
// read instead of a wake-up and a read for every few hundred bytes. Read in one round, all
// lines share one wake-up and one buffer, where a timer and a reactor wait per line would cost
// a rack of 256 boards more of the daemon's CPU and a buffer per line. The kernel holds what
// arrives meanwhile: a USB serial adapter 64 KiB or more, a pty less (at 150 kB/s, 30 ms
// fills a pty's buffer, and the writer behind it has to wait). 20 ms adds nothing a live view
// (updated every 100 ms) would show.
class SerialPoller : public asio::execution_context::service {
  public:
    static inline asio::execution_context::id id;  // NOLINT: asio's key for the service

    // One open line. close() (by its link, any time, also from inside its callbacks) ends it;
    // the poller forgets it after the round.
    class Line {
      public:
        Line(asio::io_context& io, int fd, Link::DataHandler on_data, Link::ClosedHandler on_closed)
            : fd_(fd),
              waiter_(io),
              on_data_(std::move(on_data)),
              on_closed_(std::move(on_closed)) {}
        ~Line() { close(); }
        Line(const Line&) = delete;
        Line& operator=(const Line&) = delete;
        void close() {
            stop_waiting();
            if (fd_ >= 0) ::close(fd_);
            fd_ = -1;
        }
        bool open() const { return fd_ >= 0; }

      private:
        friend class SerialPoller;
        // Out of the reactor (a pending wait ends with operation_aborted): a line read in rounds
        // is not registered, or every byte it got would wake the reactor for nothing.
        void stop_waiting() {
            waiting_ = false;
            if (waiter_.is_open()) (void)waiter_.release();  // the descriptor is fd_, kept
        }

        int fd_;
        // An idle line waits in the reactor for its next byte instead of being read in rounds.
        asio::posix::stream_descriptor waiter_;
        bool waiting_ = false;
        Link::DataHandler on_data_;
        Link::ClosedHandler on_closed_;
        int empty_rounds_ = 0;  // rounds in a row that found nothing
    };

    explicit SerialPoller(asio::io_context& io)
        : asio::execution_context::service(io), io_(io), timer_(io) {}

    // Reads `fd` (non-blocking) from the next round on.
    std::shared_ptr<Line> add(int fd, Link::DataHandler on_data, Link::ClosedHandler on_closed) {
        auto line = std::make_shared<Line>(io_, fd, std::move(on_data), std::move(on_closed));
        lines_.push_back(line);
        // A period from now, not at once: what the opener posted after opening (a board marks
        // its link connected and starts its session) runs first, as it did when each line
        // waited in the reactor; else a line that already holds bytes would start its session
        // before boards opened earlier, and session ids would not follow the boards.
        if (!due_) wait_for_round(std::chrono::steady_clock::now());
        return line;
    }

  private:
    static constexpr std::chrono::milliseconds kPeriod{20};
    // A tty hands out at most this much per read (its line discipline's buffer). A read that
    // returned less found that buffer drained: another read now would mostly say "nothing
    // more", and on a pty it first waits for the kernel's worker to move what is pending (a
    // sleep and a wake-up), so what is left waits for the next round.
    static constexpr std::size_t kTtyReadBytes = 4096;
    // A line that gave this much in one round may have found its buffer nearly full (a fast
    // line): the next round comes at once.
    static constexpr std::size_t kBusyReadBytes = std::size_t{8} * 1024;
    // A line that found nothing for half a second (a board not running, a rack mostly idle)
    // waits in the reactor for its next byte and leaves the rounds until then: a read that
    // finds nothing is cheap but not free, and a rack of idle lines read every round adds up;
    // a line waiting in the reactor costs nothing until a byte comes. With every line
    // waiting, no round is due at all.
    static constexpr int kIdleRounds = 25;

    void shutdown() override {
        timer_.cancel();
        lines_.clear();
    }

    void round() {
        due_ = false;
        const auto started = std::chrono::steady_clock::now();
        bool busy = false;
        bool reading = false;  // a line still in the rounds
        // By index: a callback may open a line (a reconnect), which appends to lines_.
        for (std::size_t i = 0; i < lines_.size(); ++i) {
            const std::shared_ptr<Line> line = lines_[i];  // kept while its callbacks run
            if (!line->open() || line->waiting_) continue;
            const std::size_t n = read(*line);
            line->empty_rounds_ = n == 0 ? line->empty_rounds_ + 1 : 0;
            busy |= n >= kBusyReadBytes;
            if (line->open() && line->empty_rounds_ >= kIdleRounds) wait_in_reactor(line);
            reading |= line->open() && !line->waiting_;
        }
        std::erase_if(lines_, [](const std::shared_ptr<Line>& l) { return !l->open(); });
        if (!reading) return;  // the next add() or waking line starts the rounds again
        if (busy) {
            due_ = true;
            asio::post(io_, [this] { round(); });
            return;
        }
        // From this round's start: a long round (many lines' bytes to decode) must not
        // lengthen what each line's kernel buffer has to hold.
        wait_for_round(started);
    }

    void wait_for_round(std::chrono::steady_clock::time_point from) {
        due_ = true;
        timer_.expires_at(from + kPeriod);
        timer_.async_wait([this](const boost::system::error_code& ec) {
            if (!ec) round();
        });
    }

    // The line leaves the rounds until the reactor says it is readable. Armed first, then read
    // once more: a byte that came after the last read is either read now or wakes the wait.
    void wait_in_reactor(const std::shared_ptr<Line>& line) {
        boost::system::error_code ec;
        (void)line->waiter_.assign(line->fd_, ec);
        if (ec) return;  // stays in the rounds
        line->waiting_ = true;
        line->waiter_.async_wait(
            asio::posix::stream_descriptor::wait_read,
            [this, weak = std::weak_ptr<Line>(line)](const boost::system::error_code& error) {
                const auto woken = weak.lock();
                // Ended, closed, or already back (a later read found bytes first).
                if (error || !woken || !woken->open() || !woken->waiting_) return;
                back_to_rounds(*woken);
            });
        if (read(*line) > 0 && line->open()) back_to_rounds(*line);
    }

    void back_to_rounds(Line& line) {
        line.stop_waiting();
        line.empty_rounds_ = 0;
        if (!due_) wait_for_round(std::chrono::steady_clock::now() - kPeriod);
    }

    // What the line holds now, up to the buffer's size, to its data handler; then its end, if
    // it ended. Returns the bytes read.
    std::size_t read(Line& line) {
        std::size_t n = 0;
        std::string ended;
        while (n < buffer_.size()) {
            const ssize_t got = ::read(line.fd_, buffer_.data() + n, buffer_.size() - n);
            if (got > 0) {
                n += static_cast<std::size_t>(got);
                if (static_cast<std::size_t>(got) < kTtyReadBytes) break;
                continue;
            }
            if (got == 0) {
                ended = "closed by the other end";
                break;
            }
            if (errno == EINTR) continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                ended = std::system_category().message(errno);
            break;
        }
        if (n > 0) line.on_data_(std::span<const std::uint8_t>(buffer_.data(), n));
        if (!ended.empty() && line.open()) {  // the data handler may have closed it
            line.close();
            line.on_closed_(LinkClosed{ended, false});
        }
        return n;
    }

    asio::io_context& io_;
    asio::steady_timer timer_;
    std::vector<std::shared_ptr<Line>> lines_;
    bool due_ = false;                              // a round is posted or its timer set
    std::array<std::uint8_t, kReadSize> buffer_{};  // every line's: handlers copy what they keep
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
        line_ =
            asio::use_service<SerialPoller>(io_).add(fd, std::move(on_data), std::move(on_closed));
    }
    void close() override {
        if (auto line = line_.lock()) line->close();
        line_.reset();
    }

  private:
    asio::io_context& io_;
    std::string path_;
    std::uint32_t baud_;
    std::weak_ptr<SerialPoller::Line> line_;
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

std::unique_ptr<Link> make_link(asio::io_context& io, const config::LinkUri& uri,
                                const std::filesystem::path& elf) {
    if (uri.scheme == "serial")
        return std::make_unique<SerialLink>(io, uri.path,
                                            static_cast<std::uint32_t>(uri.number("baud", 0)));
    if (uri.scheme == "tcp") return std::make_unique<TcpLink>(io, uri.host, uri.port);
    if (uri.is_probe()) return make_gdb_link(io, uri, elf);
    if (uri.scheme == "file") {
        return std::make_unique<FileLink>(io, uri.path, uri.param("pace", "fast") == "realtime",
                                          uri.number("rate", 150000));
    }
    throw std::invalid_argument("links of kind '" + uri.scheme + "' are made by the board");
}

}  // namespace rackprof::daemon::capture
