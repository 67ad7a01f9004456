#include "daemon/service/symbolizer_cache.h"

#include <algorithm>

namespace rackprof::daemon::service {

std::shared_ptr<const gmon::Symbolizer> SymbolizerCache::get(const std::string& path) {
    std::error_code ec;
    const auto modified = std::filesystem::last_write_time(path, ec);
    std::lock_guard lock(mutex_);
    const auto hit = std::find_if(entries_.begin(), entries_.end(),
                                  [&](const Entry& e) { return e.path == path; });
    if (hit != entries_.end()) {
        if (!ec && hit->modified == modified) {
            std::rotate(entries_.begin(), hit, hit + 1);
            return entries_.front().elf;
        }
        entries_.erase(hit);  // rewritten (or gone) since it was loaded
    }
    auto elf = gmon::Symbolizer::load(path);
    entries_.insert(entries_.begin(), Entry{path, modified, elf});
    if (entries_.size() > capacity_) entries_.resize(capacity_);
    return elf;
}

}  // namespace rackprof::daemon::service
