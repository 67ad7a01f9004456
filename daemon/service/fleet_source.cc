#include "daemon/service/fleet_source.h"

#include <algorithm>
#include <set>
#include <type_traits>

#include "daemon/service/rack_service.h"

namespace rackprof::daemon::service {

namespace {

// A filter as text: which kept sessions answer it.
std::string filter_key(const storage::fleet::FleetFilter& f) {
    std::string key;
    const auto list = [&key](const auto& values) {
        for (const auto& v : values) {
            if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::string>) {
                key += v;
            } else {
                key += std::to_string(v);
            }
            key += '\x1f';
        }
        key += '\x1e';
    };
    list(f.sessions);
    list(f.benches);
    list(f.boards);
    list(f.tags);
    list(f.build_ids);
    return key + std::to_string(f.from_ns) + ":" + std::to_string(f.to_ns);
}

}  // namespace

FleetSource::FleetSource(storage::fleet::FleetConnection connection, std::filesystem::path elf_dir)
    : connection_(std::move(connection)), elf_dir_(std::move(elf_dir)) {}

template <typename F>
auto FleetSource::with_store(F&& f) {
    const std::lock_guard lock(mutex_);
    // One retry on a fresh connection: a server restarted since the last request. A query
    // that fails on a sound connection is the answer, not an outage: no new login, no retry.
    for (int attempt = 0;; ++attempt) {
        if (!store_) {
            try {
                store_ = std::make_unique<storage::fleet::FleetStore>(connection_);
            } catch (const storage::fleet::PgConnectError& e) {
                if (attempt == 1)
                    throw ServiceError(Failure::kNotReady,
                                       std::string("the fleet store is not available: ") + e.what());
                continue;
            } catch (const storage::fleet::PgError& e) {
                // Reached, but its schema could not be read or set up: the server's answer.
                throw ServiceError(Failure::kBadUpstream,
                                   std::string("the fleet store could not answer: ") + e.what());
            } catch (const std::runtime_error& e) {  // the password file
                throw ServiceError(Failure::kNotReady, e.what());
            }
        }
        try {
            return f(*store_);
        } catch (const ServiceError&) {
            throw;  // the request's own fault (a selection refused)
        } catch (const std::bad_alloc&) {
            throw;
        } catch (const storage::fleet::PgReplyError& e) {
            // Reached, and answered too much, too late or the wrong shape: asking again
            // would only cost as much again.
            if (!store_->connected()) store_.reset();
            throw ServiceError(Failure::kBadUpstream,
                               std::string("the fleet store's reply was refused: ") + e.what());
        } catch (const storage::fleet::PgError& e) {
            if (store_->connected())
                throw ServiceError(Failure::kBadUpstream,
                                   std::string("the fleet store could not answer: ") + e.what());
            store_.reset();
            if (attempt == 1)
                throw ServiceError(Failure::kNotReady,
                                   std::string("the fleet store is not available: ") + e.what());
        } catch (const std::exception& e) {  // a stored row rackprof cannot read
            throw ServiceError(Failure::kBadUpstream,
                               std::string("the fleet store holds data rackprof cannot use: ") +
                                   e.what());
        }
    }
}

std::vector<storage::SessionInfo> FleetSource::select(const Selection& selection) {
    storage::fleet::FleetFilter filter{selection.sessions, selection.benches,   selection.boards,
                                       selection.tags,     selection.build_ids, selection.from_ns,
                                       selection.to_ns};
    auto sessions = with_store([&](storage::fleet::FleetStore& store) {
        // Counted before anything is loaded: a selection too wide is refused at the cost of
        // one aggregate query, and never kept.
        const auto state = store.selection_state(filter);
        if (state.sessions == 0)
            throw ServiceError(Failure::kNotFound,
                               "the selection names no session in the fleet store");
        if (static_cast<std::uint64_t>(state.sessions) > kMaxSelectedSessions) {
            throw ServiceError(Failure::kBadRequest,
                               "the selection names " + std::to_string(state.sessions) +
                                   " sessions, more than " + std::to_string(kMaxSelectedSessions) +
                                   ": narrow it (build_id=, bench=, board=, tag=, from=, to=)");
        }
        // The last selections' sessions, read again only when their fingerprint moved: ten
        // thousand rows are most of a repeated fleet request's time.
        const std::string key = filter_key(filter);
        std::vector<storage::SessionInfo> found;
        const auto hit = std::find_if(kept_.begin(), kept_.end(), [&](const KeptSelection& k) {
            return k.key == key && k.fingerprint == state.fingerprint;
        });
        if (hit != kept_.end()) {
            found = hit->sessions;
        } else {
            found = store.sessions(filter);
            kept_.push_front({key, state.fingerprint, found});
            constexpr std::size_t kKept = 4;
            if (kept_.size() > kKept) kept_.pop_back();
        }
        std::map<std::string, std::filesystem::path> elves;
        for (auto& s : found) {
            const auto& build_id = s.spec.elf_build_id;
            if (!elves.count(build_id)) elves[build_id] = store.elf_file(build_id, elf_dir_);
            s.spec.elf_path = elves[build_id].string();
        }
        return found;
    });
    for (const auto id : selection.sessions) {
        if (std::none_of(sessions.begin(), sessions.end(),
                         [id](const auto& s) { return s.id == id; }))
            throw ServiceError(Failure::kNotFound, "no fleet session " + std::to_string(id));
    }
    if (sessions.empty())
        throw ServiceError(Failure::kNotFound, "the selection names no session in the fleet store");
    return sessions;
}

std::shared_ptr<const gmon::Aggregate> FleetSource::sum(const std::vector<std::int64_t>& ids) {
    return with_store([&](storage::fleet::FleetStore& store) {
        return std::make_shared<const gmon::Aggregate>(store.sum(ids));
    });
}

std::vector<storage::fleet::FleetBoardSum> FleetSource::board_sums(
    const std::vector<std::int64_t>& ids, const gmon::FunctionIndex& index,
    const std::vector<std::uint64_t>& functions) {
    return with_store(
        [&](storage::fleet::FleetStore& store) { return store.board_sums(ids, index, functions); });
}

std::shared_ptr<gmon::ExportInput> fleet_input(FleetSource& fleet, const Selection& selection) {
    const auto sessions = fleet.select(selection);
    std::vector<std::int64_t> ids;
    for (const auto& s : sessions) ids.push_back(s.id);
    if (selection.by_name) {
        // Each build moved by name on its own: per session, as a bench merges.
        return merged_input(
            sessions, [&](std::int64_t id) { return fleet.sum({id}); },
            [](const std::string& path) { return gmon::Symbolizer::load(path); }, true,
            std::filesystem::temp_directory_path() / "rackprof-fleet-by-name");
    }
    // The SQL sum stands for the first session; the others are in it.
    const auto total = fleet.sum(ids);
    static const auto nothing = std::make_shared<const gmon::Aggregate>();
    const std::int64_t first = ids.front();
    return merged_input(
        sessions, [&](std::int64_t id) { return id == first ? total : nothing; },
        [](const std::string& path) { return gmon::Symbolizer::load(path); });
}

}  // namespace rackprof::daemon::service
