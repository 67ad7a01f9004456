#include "daemon/service/live_views.h"

#include <algorithm>

#include "gmon/report.h"

namespace rackprof::daemon::service {

namespace {

std::vector<LiveFunction> top_functions(const gmon::ProfileSource& source) {
    std::vector<LiveFunction> top;
    if (!source.elf) return top;  // no ELF: addresses only, no function names
    try {
        const auto profile = gmon::profile_json(gmon::profile_of(source), {10, 0.0, {}, {}, {}});
        for (const auto& row : profile["flat"]) {
            LiveFunction f{row["name"].get<std::string>(), row["percent"].get<double>(), {}};
            if (!row["calls"].is_null()) f.calls = row["calls"].get<std::uint64_t>();
            top.push_back(std::move(f));
        }
    } catch (const std::exception&) {
        top.clear();  // an ELF the data cannot be profiled with: no names either
    }
    return top;
}

std::vector<gmon::ArcCount> busiest_arcs(const gmon::Aggregate& aggregate) {
    auto arcs = aggregate.arcs();
    const std::size_t n = std::min<std::size_t>(arcs.size(), 5);
    std::partial_sort(arcs.begin(), arcs.begin() + static_cast<std::ptrdiff_t>(n), arcs.end(),
                      [](const auto& a, const auto& b) { return a.count > b.count; });
    arcs.resize(n);
    return arcs;
}

}  // namespace

std::optional<LiveView> LiveViews::view_of(std::int64_t session,
                                           std::optional<capture::LiveSnapshot> snapshot) {
    if (!snapshot) {  // not capturing (any more): nothing to keep for it
        std::lock_guard lock(mutex_);
        computed_.erase(session);
        return std::nullopt;
    }
    std::shared_ptr<const Computed> computed;
    {
        std::lock_guard lock(mutex_);
        const auto cached = computed_.find(session);
        if (cached != computed_.end() && cached->second->version == snapshot->version &&
            cached->second->elf == snapshot->state.elf)
            computed = cached->second;
    }
    if (!computed) {
        gmon::ProfileSource source;
        source.aggregate = snapshot->aggregate;
        source.elf = snapshot->state.elf;
        source.announced_range = snapshot->state.announced_range;
        computed = std::make_shared<const Computed>(Computed{
            snapshot->version, source.elf, top_functions(source), busiest_arcs(*source.aggregate)});
        std::lock_guard lock(mutex_);
        // Bounded whatever happens to sessions no one asks about again: a rack captures far
        // fewer sessions at once than this.
        if (computed_.size() >= kMaxSessions) computed_.clear();
        computed_[session] = computed;
    }
    return LiveView{std::move(snapshot->state), snapshot->version, computed->top_functions,
                    computed->busiest_arcs};
}

}  // namespace rackprof::daemon::service
