#include "daemon/capture/gdb_link.h"

#include <boost/asio/post.hpp>

#include <condition_variable>
#include <mutex>
#include <system_error>
#include <thread>

#include "probe/gdb_client.h"
#include "protocol/framed_format.h"

namespace rackprof::daemon::capture {

namespace asio = boost::asio;

namespace {

using Clock = std::chrono::steady_clock;

// Samples are handed to capture in pieces of this many (or every 50 ms at low rates).
constexpr std::size_t kSamplesPerPiece = 64;
constexpr auto kPieceInterval = std::chrono::milliseconds(50);
// How long close() lets the sampler halt, detach and end before cutting the server off.
constexpr auto kDetachWait = std::chrono::milliseconds(500);
// Connecting is cut short as soon as the client exists (abort); the TCP connect alone is not.
constexpr auto kConnectTimeout = std::chrono::milliseconds(1000);

class GdbLink : public Link {
  public:
    GdbLink(asio::io_context& io, std::string host, std::uint16_t port, std::uint64_t rate)
        : io_(io),
          host_(std::move(host)),
          port_(port),
          period_(std::chrono::nanoseconds(1'000'000'000 / std::max<std::uint64_t>(rate, 1))) {}
    ~GdbLink() override { close(); }

    void open(DataHandler on_data, ClosedHandler on_closed) override {
        close();
        alive_ = std::make_shared<bool>(true);
        stop_ = done_ = false;
        try {
            thread_ = std::thread(
                [this, on_data, on_closed, alive = alive_] { sample(on_data, on_closed, alive); });
        } catch (const std::system_error& e) {
            asio::post(io_, [on_closed, alive = alive_, what = std::string(e.what())] {
                if (*alive) on_closed(LinkClosed{"cannot start the GDB sampler: " + what, false});
            });
        }
    }

    // The sampler halts, detaches and ends; a server that does not let it within kDetachWait
    // is cut off (its client aborted), so capture's thread never waits long here.
    void close() override {
        if (!thread_.joinable()) return;
        *alive_ = false;  // capture's thread: what is posted and not yet run is dropped
        {
            std::unique_lock lock(mutex_);
            stop_ = true;
            wake_.notify_all();
            if (!wake_.wait_for(lock, kDetachWait, [this] { return done_; }) && connection_)
                connection_->abort();
        }
        thread_.join();
    }

  private:
    // The sampling thread: connect, then halt-read-resume until closed or the server fails.
    // Nothing escapes it: a failure ends the link with its reason, as a serial link's does.
    void sample(const DataHandler& on_data, const ClosedHandler& on_closed,
                const std::shared_ptr<bool>& alive) {
        std::string failure;
        try {
            run(on_data, alive);
        } catch (const std::exception& e) {
            failure = e.what();
            let_run_on();
        }
        std::lock_guard lock(mutex_);
        client_.reset();
        connection_.reset();
        done_ = true;
        wake_.notify_all();
        if (stop_) return;
        try {
            asio::post(io_, [on_closed, alive, failure] {
                if (*alive) on_closed(LinkClosed{failure, false});
            });
        } catch (const std::exception&) {  // out of memory: the board sees no data, as unplugged
        }
    }

    void run(const DataHandler& on_data, const std::shared_ptr<bool>& alive) {
        probe::GdbClientOptions options;
        options.connect_timeout = kConnectTimeout;
        // close() may cut the handshake short from here on (a server slow to describe itself).
        client_ = probe::GdbClient::connect(host_, port_, options, [this](probe::GdbClient& c) {
            std::lock_guard lock(mutex_);
            connection_ = c.abort_handle();
            if (stop_) c.abort();  // closed while connecting: the handshake fails at once
        });
        if (stop_requested()) return;
        probe::GdbClient& gdb = *client_;  // this thread's alone
        const auto pc = gdb.pc_register();
        if (!pc)
            throw probe::ProbeError("the GDB server's target description names no pc register");
        protocol::FramedEncoder encoder(4);
        std::size_t pending = 0;
        auto piece_due = Clock::now() + kPieceInterval;
        auto next = Clock::now();
        gdb.halt();  // it may be running or halted: halted from here on
        while (true) {
            gdb.resume();
            next += period_;
            if (wait_until(next)) break;
            gdb.halt();
            const auto at = static_cast<std::uint32_t>(gdb.read_register(*pc));
            encoder.record(protocol::Record::pc_sample(at));
            (void)gdb.take_console();  // not a sample; kept bounded by the client meanwhile
            if (++pending >= kSamplesPerPiece || Clock::now() >= piece_due) {
                hand_on(encoder, on_data, alive);
                pending = 0;
                piece_due = Clock::now() + kPieceInterval;
            }
            if (Clock::now() > next + 100 * period_) next = Clock::now();  // fell far behind
        }
        hand_on(encoder, on_data, alive);
        gdb.halt();
        gdb.request("D");  // detach: the target runs on without us
    }

    // After a failure, best effort: a server still there lets the target run on, not halted.
    void let_run_on() {
        if (!client_) return;
        try {
            client_->resume();
        } catch (const std::exception&) {
        }
    }

    bool stop_requested() {
        std::lock_guard lock(mutex_);
        return stop_;
    }

    // Sleeps until `t`; true when the link is being closed.
    bool wait_until(Clock::time_point t) {
        std::unique_lock lock(mutex_);
        return wake_.wait_until(lock, t, [this] { return stop_; });
    }

    void hand_on(protocol::FramedEncoder& encoder, const DataHandler& on_data,
                 const std::shared_ptr<bool>& alive) {
        encoder.flush();
        auto bytes = std::make_shared<std::vector<std::uint8_t>>(encoder.take_wire());
        if (bytes->empty()) return;
        asio::post(io_, [on_data, alive, bytes] {
            if (*alive) on_data(*bytes);
        });
    }

    asio::io_context& io_;
    std::string host_;
    std::uint16_t port_;
    Clock::duration period_;
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(false);
    std::thread thread_;
    std::mutex mutex_;
    std::condition_variable wake_;
    bool stop_ = false;
    bool done_ = false;                         // the sampling thread has finished (mutex_)
    std::unique_ptr<probe::GdbClient> client_;  // the sampling thread's alone
    // The client's connection, for close() to cut short (mutex_); harmless once it is gone.
    std::shared_ptr<probe::AbortHandle> connection_;
};

}  // namespace

std::unique_ptr<Link> make_gdb_link(asio::io_context& io, const config::LinkUri& uri) {
    return std::make_unique<GdbLink>(io, uri.host, uri.port, uri.number("rate", 100));
}

}  // namespace rackprof::daemon::capture
