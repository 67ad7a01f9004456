#include "web/server/connection_table.h"

namespace rackprof::web::server {

ConnectionTable::Admission ConnectionTable::admit(const boost::asio::ip::address& client,
                                                  std::function<void()> close,
                                                  Clock::time_point now) {
    std::lock_guard lock(mutex_);
    const auto held = per_client_.find(client);
    const std::size_t own = held == per_client_.end() ? 0 : held->second;
    const bool client_full = own >= limits_.per_client;
    if (client_full || ordinary_ >= limits_.total) {
        // Make room from the client's own idle connections first, then anyone's.
        auto reclaimed = reclaim_oldest_idle(client_full ? &client : nullptr);
        if (reclaimed) {
            Admission out = add(client, Slot::kOrdinary, std::move(close), now);
            out.reclaimed = std::move(reclaimed);
            out.client_limit = client_full;
            return out;
        }
        Admission out;
        if (reserved_ < limits_.reserved && !holds_reserved(client))
            out = add(client, Slot::kReserved, std::move(close), now);
        out.client_limit = client_full;
        return out;
    }
    return add(client, Slot::kOrdinary, std::move(close), now);
}

ConnectionTable::Admission ConnectionTable::add(const boost::asio::ip::address& client, Slot slot,
                                                std::function<void()> close,
                                                Clock::time_point now) {
    const Id id = next_id_++;
    entries_.emplace(id, Entry{client, slot, true, false, now, std::move(close)});
    ++per_client_[client];
    ++(slot == Slot::kReserved ? reserved_ : ordinary_);
    Admission out;
    out.slot = slot;
    out.id = id;
    return out;
}

std::function<void()> ConnectionTable::reclaim_oldest_idle(const boost::asio::ip::address* client) {
    auto oldest = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        const Entry& e = it->second;
        if (!e.idle || e.slot != Slot::kOrdinary || (client && e.client != *client)) continue;
        if (oldest == entries_.end() || e.idle_since < oldest->second.idle_since) oldest = it;
    }
    if (oldest == entries_.end()) return {};
    auto close = std::move(oldest->second.close);
    if (!close) close = [] {};
    const Id id = oldest->first;
    erase_entry(id);
    return close;
}

bool ConnectionTable::holds_reserved(const boost::asio::ip::address& client) const {
    for (const auto& [id, e] : entries_) {
        if (e.slot == Slot::kReserved && e.client == client) return true;
    }
    return false;
}

bool ConnectionTable::set_idle(Id id, bool idle, Clock::time_point now) {
    std::lock_guard lock(mutex_);
    const auto it = entries_.find(id);
    if (it == entries_.end()) return false;
    if (it->second.feed) return true;  // a WebSocket is busy while it lives
    if (idle && !it->second.idle) it->second.idle_since = now;
    it->second.idle = idle;
    return true;
}

bool ConnectionTable::open_feed(Id id) {
    std::lock_guard lock(mutex_);
    const auto it = entries_.find(id);
    if (it == entries_.end()) return false;
    Entry& e = it->second;
    if (e.feed) return true;
    if (feeds_ >= limits_.feeds) return false;
    const auto held = feeds_per_client_.find(e.client);
    if (held != feeds_per_client_.end() && held->second >= limits_.feeds_per_client) return false;
    e.feed = true;
    e.idle = false;
    ++feeds_;
    ++feeds_per_client_[e.client];
    return true;
}

void ConnectionTable::release(Id id) {
    std::lock_guard lock(mutex_);
    erase_entry(id);
}

void ConnectionTable::erase_entry(Id id) {
    const auto it = entries_.find(id);
    if (it == entries_.end()) return;
    const auto client = per_client_.find(it->second.client);
    if (--client->second == 0) per_client_.erase(client);
    --(it->second.slot == Slot::kReserved ? reserved_ : ordinary_);
    if (it->second.feed) {
        --feeds_;
        const auto feeds = feeds_per_client_.find(it->second.client);
        if (--feeds->second == 0) feeds_per_client_.erase(feeds);
    }
    entries_.erase(it);
}

std::size_t ConnectionTable::open() const {
    std::lock_guard lock(mutex_);
    return entries_.size();
}

std::size_t ConnectionTable::open_by(const boost::asio::ip::address& client) const {
    std::lock_guard lock(mutex_);
    const auto it = per_client_.find(client);
    return it == per_client_.end() ? 0 : it->second;
}

std::size_t ConnectionTable::feeds() const {
    std::lock_guard lock(mutex_);
    return feeds_;
}

bool LimitEpisode::note(bool refused, Clock::time_point now) {
    const bool starts = !active_;
    if (starts) {
        active_ = true;
        started_ = now;
        counts_ = {};
    }
    last_ = now;
    ++(refused ? counts_.refused : counts_.reclaimed);
    return starts;
}

std::optional<LimitEpisode::Summary> LimitEpisode::end_if_quiet(Clock::time_point now) {
    if (!active_ || now - last_ < quiet_) return std::nullopt;
    active_ = false;
    Summary out = counts_;
    out.length = last_ - started_;
    return out;
}

}  // namespace rackprof::web::server
