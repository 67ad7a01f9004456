#include "daemon/capture/live_snapshots.h"

namespace rackprof::daemon::capture {

void LiveSnapshots::publish(storage::SessionId session, LiveState state,
                            const gmon::Aggregate& delta) {
    std::lock_guard lock(mutex_);
    Entry& e = entries_[session];
    e.state = std::move(state);
    if (delta.distinct_arcs() > 0 || delta.total_samples() > 0 || delta.total_calls() > 0) {
        e.pending.merge(delta);
        e.changed = true;
    }
}

void LiveSnapshots::retire(storage::SessionId session) {
    std::lock_guard lock(mutex_);
    entries_.erase(session);
}

std::vector<storage::SessionId> LiveSnapshots::sessions() {
    std::lock_guard lock(mutex_);
    std::vector<storage::SessionId> out;
    for (const auto& [session, entry] : entries_) out.push_back(session);
    return out;
}

std::optional<LiveSnapshot> LiveSnapshots::snapshot(storage::SessionId session) {
    std::lock_guard fold(fold_mutex_);
    gmon::Aggregate changes;
    std::shared_ptr<const gmon::Aggregate> whole;
    LiveSnapshot out;
    {
        std::lock_guard lock(mutex_);
        const auto it = entries_.find(session);
        if (it == entries_.end()) return std::nullopt;
        Entry& e = it->second;
        out.session = session;
        out.state = e.state;
        whole = e.whole;
        out.version = e.version;
        if (!e.changed) {
            out.aggregate = whole;
            return out;
        }
        std::swap(changes, e.pending);
        e.changed = false;
    }
    // Folded here, on the reader's thread: the capture thread goes on publishing meanwhile.
    auto next = std::make_shared<gmon::Aggregate>(*whole);
    next->merge(changes);
    out.aggregate = next;
    std::lock_guard lock(mutex_);
    const auto it = entries_.find(session);
    if (it == entries_.end()) return out;  // retired meanwhile: this last view still holds
    it->second.whole = next;
    out.version = ++it->second.version;
    return out;
}

}  // namespace rackprof::daemon::capture
