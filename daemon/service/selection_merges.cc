#include "daemon/service/selection_merges.h"

#include <map>
#include <set>
#include <stdexcept>

#include "gmon/calling_context.h"
#include "gmon/function_index.h"
#include "gmon/profile_pipeline.h"

namespace rackprof::daemon::service {

std::vector<storage::SessionInfo> SelectionMerges::selected(const Selection& selection) {
    if (fleet_) return fleet_->select(selection);
    std::map<std::string, std::vector<std::string>> boards_by_tag;
    for (const auto& b : capture_.board_configs()) {
        for (const auto& tag : b.tags) boards_by_tag[tag].push_back(b.name);
    }
    return select_sessions(selection, readers_.lease()->sessions(), boards_by_tag);
}

std::shared_ptr<gmon::ExportInput> SelectionMerges::merged_input_of(
    const std::vector<storage::SessionInfo>& sessions, bool by_name,
    const std::function<std::shared_ptr<const gmon::Aggregate>(std::int64_t)>& aggregate_of) {
    return merged_input(
        sessions, aggregate_of, [this](const std::string& path) { return elves_.get(path); },
        by_name, by_name_dir_);
}

std::shared_ptr<const MergedSelection> SelectionMerges::merged(const Selection& selection) {
    const auto sessions = selected(selection);
    // What was merged, as far as it can change: finished sessions' merges are kept under it.
    if (fleet_ && !selection.tasks.empty())
        throw ServiceError(Failure::kBadRequest,
                           "task= decodes sessions' raw bytes again, which the fleet store does "
                           "not keep");
    std::string key = selection.by_name ? "by_name" : "by_build";
    for (const auto& task : selection.tasks) key += ";task=" + task;
    bool finished = true;
    for (const auto& s : sessions) {
        finished = finished && s.state != "capturing";
        key += ";" + std::to_string(s.id) + ":" + std::to_string(s.counters.arcs) + ":" +
               std::to_string(s.counters.pc_samples) + ":" + s.spec.elf_path;
    }
    if (finished) {
        const std::lock_guard lock(kept_mutex_);
        for (auto it = kept_.begin(); it != kept_.end(); ++it) {
            if (it->first != key) continue;
            kept_.splice(kept_.begin(), kept_, it);
            return it->second;
        }
    }
    auto made = merge(sessions, selection.by_name, selection.tasks);
    if (finished) {
        constexpr std::size_t kKept = 4;
        const std::lock_guard lock(kept_mutex_);
        kept_.emplace_front(std::move(key), made);
        if (kept_.size() > kKept) kept_.pop_back();
    }
    return made;
}

std::shared_ptr<const MergedSelection> SelectionMerges::merge(
    const std::vector<storage::SessionInfo>& sessions, bool by_name,
    const std::vector<std::string>& tasks) {
    // task=: each session decoded again once, its tasks' records and trees kept.
    std::map<std::int64_t, TaskSlice> slices;
    for (const auto& s : tasks.empty() ? std::vector<storage::SessionInfo>{} : sessions)
        slices[s.id] = task_slice(*readers_.lease(), s, tasks);
    const auto stored = [&](std::int64_t id) -> std::shared_ptr<const gmon::Aggregate> {
        if (!tasks.empty()) return slices.at(id).aggregate;
        return fleet_ ? fleet_->sum({id}) : aggregates_.whole(id);
    };
    if (fleet_ && !by_name) return merge_in_fleet(sessions);
    auto made = std::make_shared<MergedSelection>();
    // Board by board, each session's aggregate loaded once: the boards' sums are the spread's,
    // and the fleet's is their sum.
    std::map<std::int64_t, std::shared_ptr<const gmon::Aggregate>> board_sum_at;  // first session
    for (const auto& [board, own] : sessions_by_board(sessions)) {
        const auto part = merged_input_of(own, by_name, stored);
        const auto& sum = part->source.aggregate;
        gmon::BoardSamples b{board, {}, sum->total_calls(), sum->total_samples(), {}};
        for (const auto& s : own) b.sessions.push_back(s.id);
        if (part->source.elf) b.function = gmon::samples_by_function(*sum, *part->source.elf);
        made->boards.push_back(std::move(b));
        board_sum_at[own.front().id] = sum;
    }
    std::shared_ptr<gmon::ExportInput> input;
    if (by_name) {
        input = merged_input_of(sessions, true, stored);  // builds are moved by name: per session
    } else {
        // Each board's sum stands for its first session; its other sessions are in it.
        static const auto nothing = std::make_shared<const gmon::Aggregate>();
        input = merged_input_of(sessions, false, [&](std::int64_t id) {
            const auto it = board_sum_at.find(id);
            return it == board_sum_at.end() ? nothing : it->second;
        });
    }
    if (tasks.empty()) {
        input->calling_context = merged_calling_context(sessions, by_name);
    } else {
        input->calling_context = merged_task_trees(slices, by_name);
        input->summary["tasks"] = tasks;
    }
    if (input->source.elf) {
        made->profile = std::make_shared<const gmon::Profile>(gmon::profile_of(input->source));
        // A board whose ELF is gone is counted with the fleet's (the same build).
        for (std::size_t i = 0; i < made->boards.size(); ++i) {
            auto& b = made->boards[i];
            if (b.function.empty() && b.samples > 0 && !by_name) {
                const auto& sum = board_sum_at.at(b.sessions.front());
                b.function = gmon::samples_by_function(*sum, *input->source.elf);
            }
        }
    }
    made->input = std::move(input);
    return made;
}

// The sessions' calling-context trees added by path. Paths are addresses, so only sessions of
// one build add up: a by-name merge of several builds gets none.
std::shared_ptr<const gmon::CallingContextTree> SelectionMerges::merged_calling_context(
    const std::vector<storage::SessionInfo>& sessions, bool by_name) {
    // The fleet store keeps no calling-context trees, and its ids are not this rack's.
    if (fleet_) return nullptr;
    std::set<std::string> builds;
    for (const auto& s : sessions) builds.insert(s.spec.elf_build_id + "|" + s.target.build_id);
    if (by_name && builds.size() > 1) return nullptr;
    auto merged = std::make_shared<gmon::CallingContextTree>();
    const auto store = readers_.lease();
    try {
        for (const auto& s : sessions) merged->merge(store->calling_context(s.id));
    } catch (const std::invalid_argument&) {
        return nullptr;  // probe boards' sampled stacks beside measured cycles: no one tree
    }
    if (merged->empty()) return nullptr;
    return merged;
}

// The task slices' trees added by path (addresses: one build's sessions only, as above).
std::shared_ptr<const gmon::CallingContextTree> SelectionMerges::merged_task_trees(
    const std::map<std::int64_t, TaskSlice>& slices, bool by_name) {
    if (by_name) return nullptr;
    auto merged = std::make_shared<gmon::CallingContextTree>();
    for (const auto& [id, slice] : slices) merged->merge(*slice.tree);
    if (merged->empty()) return nullptr;
    return merged;
}

const gmon::Profile& SelectionMerges::profile_of(const MergedSelection& merged) {
    if (!merged.profile) {
        throw ServiceError(
            Failure::kNoElf,
            "no session of the selection has a usable ELF, so functions cannot be named");
    }
    return *merged.profile;
}

// The whole selection summed by PostgreSQL (from its build sums), standing for the first
// session. The boards' own sums are read for the spread when it is asked for, from the board
// sums kept at push time (fleet_spread_boards): only the functions it shows.
std::shared_ptr<const MergedSelection> SelectionMerges::merge_in_fleet(
    const std::vector<storage::SessionInfo>& sessions) {
    auto made = std::make_shared<MergedSelection>();
    std::vector<std::int64_t> ids;
    for (const auto& s : sessions) ids.push_back(s.id);
    const auto total = fleet_->sum(ids);
    static const auto none = std::make_shared<const gmon::Aggregate>();
    const std::int64_t first = ids.front();
    auto input = merged_input_of(sessions, false,
                                 [&](std::int64_t id) { return id == first ? total : none; });
    for (const auto& [board, own] : sessions_by_board(sessions)) {
        gmon::BoardSamples b{board, {}, 0, 0, {}};
        for (const auto& s : own) b.sessions.push_back(s.id);
        made->boards.push_back(std::move(b));
    }
    if (input->source.elf)
        made->profile = std::make_shared<const gmon::Profile>(gmon::profile_of(input->source));
    made->input = std::move(input);
    made->fleet_boards = true;
    return made;
}

std::vector<gmon::BoardSamples> SelectionMerges::spread_boards(
    const MergedSelection& merged, const std::vector<std::string>& functions) {
    if (merged.fleet_boards) return fleet_spread_boards(merged, functions);
    return merged.boards;
}

// The fleet's boards for a spread over `functions`: each board's calls, samples and samples in
// those functions, from the fleet store's board sums (every function of that name: a static
// function's name may be on several).
std::vector<gmon::BoardSamples> SelectionMerges::fleet_spread_boards(
    const MergedSelection& merged, const std::vector<std::string>& functions) {
    const std::lock_guard lock(merged.spread_mutex);
    if (!merged.spread_functions.empty() && merged.spread_functions == functions)
        return merged.spread_boards;
    std::vector<gmon::BoardSamples> boards = merged.boards;
    const auto& elf = merged.input->source.elf;
    if (!elf) return boards;
    const gmon::FunctionIndex index(*elf);
    const std::set<std::string> wanted(functions.begin(), functions.end());
    std::map<std::uint64_t, const std::string*> name_at;
    std::vector<std::uint64_t> addresses;
    for (const auto& f : index.symbols()) {
        if (const auto it = wanted.find(f.name); it != wanted.end()) {
            name_at[f.addr] = &*it;
            addresses.push_back(f.addr);
        }
    }
    std::vector<std::int64_t> ids;
    for (const auto& b : boards) ids.insert(ids.end(), b.sessions.begin(), b.sessions.end());
    std::map<std::string, gmon::BoardSamples*> by_name;
    for (auto& b : boards) by_name[b.board] = &b;
    for (const auto& sum : fleet_->board_sums(ids, index, addresses)) {
        const auto it = by_name.find(sum.board);
        if (it == by_name.end()) continue;  // none: the sessions are the boards'
        auto& b = *it->second;
        b.calls = sum.calls;
        b.samples = sum.samples;
        for (const auto& [address, count] : sum.function_samples)
            b.function[*name_at.at(address)] += count;
    }
    merged.spread_functions = functions;
    merged.spread_boards = boards;
    return boards;
}

}  // namespace rackprof::daemon::service
