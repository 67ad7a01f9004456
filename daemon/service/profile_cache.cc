#include "daemon/service/profile_cache.h"

#include <algorithm>

namespace rackprof::daemon::service {

bool ProfileCache::Entry::serves(std::int64_t id, const gmon::ProfileSource& source) const {
    // Pointers compared only while alive: a freed aggregate's address may be reused.
    const auto a = aggregate.lock();
    const auto e = elf.lock();
    return session == id && a && a == source.aggregate && e && e == source.elf &&
           announced_range == source.announced_range && a->total_calls() == total_calls &&
           a->total_samples() == total_samples;
}

ProfileCache::Computed ProfileCache::compute(const gmon::ProfileSource& source) {
    Computed c{gmon::profile_of(source), {}};
    if (source.elf && source.aggregate) c.fit = gmon::check_elf_fit(*source.aggregate, *source.elf);
    return c;
}

std::shared_ptr<const ProfileCache::Computed> ProfileCache::get(std::int64_t session,
                                                                const gmon::ProfileSource& source) {
    {
        std::lock_guard lock(mutex_);
        for (auto it = entries_.begin(); it != entries_.end(); ++it) {
            if (!it->serves(session, source)) continue;
            std::rotate(entries_.begin(), it, it + 1);
            return entries_.front().profile;
        }
    }
    // Computed outside the lock: two requests may both compute it, none waits on the other.
    // The source's aggregate is held here, so no commit changes it in place meanwhile.
    const std::uint64_t computed_calls = source.aggregate ? source.aggregate->total_calls() : 0;
    const std::uint64_t computed_samples = source.aggregate ? source.aggregate->total_samples() : 0;
    auto profile = std::make_shared<const Computed>(compute(source));
    std::lock_guard lock(mutex_);
    // The session's older profile, and any whose aggregate is gone (evicted or replaced): they
    // can never be served again, and a large firmware's profile is tens of megabytes.
    std::erase_if(entries_, [&](const Entry& e) {
        return e.session == session || e.aggregate.expired() || e.elf.expired();
    });
    entries_.insert(entries_.begin(),
                    Entry{session, source.aggregate, source.elf, source.announced_range, profile,
                          computed_calls, computed_samples});
    if (entries_.size() > capacity_) entries_.pop_back();
    return profile;
}

}  // namespace rackprof::daemon::service
