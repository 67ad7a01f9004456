// Who holds the server's connections and who may open another, so that no client can lock the
// others out: a limit per client (remote address) below the global one; when a limit is
// reached, the oldest idle connection (waiting for its next request) is closed to make room;
// when nothing idle is left, a few reserved slots take one request each, at most one per
// client (a health probe, the dashboard's first page), so a client that fills its own limit
// cannot also fill them. WebSockets hold their slot while they live and are never idle, so they
// have a share of their own below the global limit (in all and per client): feeds can never
// take every slot, and an ordinary request or the dashboard's page still gets in.
#pragma once

#include <boost/asio/ip/address.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>

namespace rackprof::web::server {

struct ConnectionLimits {
    std::size_t total = 256;
    std::size_t per_client = 32;
    std::size_t reserved = 2;  // above `total`, one request each, one per client
    // WebSockets, within `total` and `per_client`: in all, and per client.
    std::size_t feeds = 128;
    std::size_t feeds_per_client = 16;
};

class ConnectionTable {
  public:
    using Id = std::uint64_t;
    using Clock = std::chrono::steady_clock;
    enum class Slot { kOrdinary, kReserved, kRefused };

    struct Admission {
        Slot slot = Slot::kRefused;
        Id id = 0;
        // The idle connection closed to make room (call it outside any lock), if one was.
        std::function<void()> reclaimed;
        bool client_limit = false;  // the client's own limit was the one reached
    };

    explicit ConnectionTable(ConnectionLimits limits) : limits_(limits) {}

    // A new connection from `client`, idle until it sends something; `close` closes it if it
    // is reclaimed later (called from another thread, it must only post the work).
    Admission admit(const boost::asio::ip::address& client, std::function<void()> close,
                    Clock::time_point now = Clock::now());
    // Idle: waiting for a request (reclaimable); busy: in a request or a WebSocket. False when
    // the connection was reclaimed meanwhile: it must close.
    bool set_idle(Id id, bool idle, Clock::time_point now = Clock::now());
    void release(Id id);
    // Connection `id` becomes a WebSocket (busy for good): false when the feeds' share, in all
    // or of its client, is full (refuse the upgrade), or when it was reclaimed meanwhile.
    bool open_feed(Id id);

    std::size_t open() const;
    std::size_t open_by(const boost::asio::ip::address& client) const;
    std::size_t feeds() const;

  private:
    struct Entry {
        boost::asio::ip::address client;
        Slot slot;
        bool idle = true;
        bool feed = false;
        Clock::time_point idle_since;
        std::function<void()> close;
    };
    // The oldest idle ordinary connection (of `client` only, when given); removed, its close
    // returned.
    std::function<void()> reclaim_oldest_idle(const boost::asio::ip::address* client);
    bool holds_reserved(const boost::asio::ip::address& client) const;
    void erase_entry(Id id);  // with mutex_ held
    Admission add(const boost::asio::ip::address& client, Slot slot, std::function<void()> close,
                  Clock::time_point now);

    ConnectionLimits limits_;
    mutable std::mutex mutex_;
    std::map<Id, Entry> entries_;
    std::map<boost::asio::ip::address, std::size_t> per_client_;
    std::map<boost::asio::ip::address, std::size_t> feeds_per_client_;
    std::size_t feeds_ = 0;
    std::size_t ordinary_ = 0;
    std::size_t reserved_ = 0;
    Id next_id_ = 1;
};

// Refused and reclaimed connections told once per episode rather than once each: a line when
// the first happens, and the counts once none has come for `quiet`.
class LimitEpisode {
  public:
    using Clock = std::chrono::steady_clock;
    struct Summary {
        std::size_t refused = 0;
        std::size_t reclaimed = 0;
        Clock::duration length{};
    };

    explicit LimitEpisode(Clock::duration quiet) : quiet_(quiet) {}

    // Counts one; true when it starts an episode (tell it now).
    bool note(bool refused, Clock::time_point now = Clock::now());
    // The episode's counts once it has been quiet long enough (it is over then), else nothing.
    std::optional<Summary> end_if_quiet(Clock::time_point now = Clock::now());
    bool active() const { return active_; }
    // When it ends if nothing more happens.
    Clock::time_point quiet_at() const { return last_ + quiet_; }

  private:
    Clock::duration quiet_;
    bool active_ = false;
    Clock::time_point started_;
    Clock::time_point last_;
    Summary counts_;
};

}  // namespace rackprof::web::server
