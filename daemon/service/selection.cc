#include "daemon/service/selection.h"

#include <algorithm>
#include <set>

#include "daemon/ingest/capture_import.h"
#include "daemon/ingest/wire_settings.h"
#include "daemon/service/rack_service.h"
#include "gmon/name_layout.h"
#include "gmon/tasks.h"
#include "storage/retention.h"

namespace rackprof::daemon::service {

namespace {

[[noreturn]] void bad(const std::string& why) {
    throw ServiceError(Failure::kBadRequest, why);
}

std::vector<std::string> split_commas(const std::string& text, const char* key) {
    std::vector<std::string> out;
    std::size_t start = 0;
    while (start <= text.size()) {
        const auto end = std::min(text.find(',', start), text.size());
        const std::string value = text.substr(start, end - start);
        if (value.empty()) bad(std::string(key) + ": an empty value");
        // No name, tag or build-id holds one, and PostgreSQL refuses a NUL in text.
        if (std::any_of(value.begin(), value.end(),
                        [](unsigned char c) { return c < 0x20 || c == 0x7F; }))
            bad(std::string(key) + ": control characters (such as %00) are not allowed");
        out.push_back(value);
        start = end + 1;
    }
    return out;
}

std::int64_t time_ns(const std::map<std::string, std::string>& p, const char* key) {
    const auto it = p.find(key);
    return it == p.end() ? 0 : parse_count<std::int64_t>(it->second, key);
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

std::string percent_decoded(std::string_view text) {
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '+') {
            out += ' ';
        } else if (text[i] == '%') {
            if (i + 2 >= text.size() || hex_value(text[i + 1]) < 0 || hex_value(text[i + 2]) < 0)
                bad("a '%' not followed by two hex digits");
            out += static_cast<char>(hex_value(text[i + 1]) * 16 + hex_value(text[i + 2]));
            i += 2;
        } else {
            out += text[i];
        }
    }
    return out;
}

}  // namespace

Selection parse_selection(const std::map<std::string, std::string>& p) {
    Selection s;
    if (const auto it = p.find("session"); it != p.end()) {
        for (const auto& id : split_commas(it->second, "session"))
            s.sessions.push_back(parse_count<std::int64_t>(id, "session"));
    }
    if (const auto it = p.find("board"); it != p.end())
        s.boards = split_commas(it->second, "board");
    if (const auto it = p.find("tag"); it != p.end()) s.tags = split_commas(it->second, "tag");
    if (const auto it = p.find("build_id"); it != p.end()) {
        s.build_ids = split_commas(it->second, "build_id");
        for (auto& id : s.build_ids) {
            std::transform(id.begin(), id.end(), id.begin(),
                           [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
            if (!std::all_of(id.begin(), id.end(), [](char c) { return hex_value(c) >= 0; }))
                bad("build_id: hex digits only");
        }
    }
    if (const auto it = p.find("bench"); it != p.end())
        s.benches = split_commas(it->second, "bench");
    s.from_ns = time_ns(p, "from");
    s.to_ns = time_ns(p, "to");
    if (const auto it = p.find("task"); it != p.end()) s.tasks = split_commas(it->second, "task");
    if (const auto it = p.find("merge"); it != p.end()) {
        if (it->second != "by_name") bad("merge: the only way is by_name");
        s.by_name = true;
    }
    if (s.sessions.empty() && s.boards.empty() && s.tags.empty() && s.build_ids.empty() &&
        s.benches.empty() && s.from_ns == 0 && s.to_ns == 0) {
        bad("a selection names sessions by at least one of session, board, tag, build_id, bench, "
            "from, to");
    }
    return s;
}

std::map<std::string, std::string> parse_query_string(std::string_view text) {
    std::map<std::string, std::string> out;
    std::size_t start = 0;
    while (start < text.size()) {
        const auto end = std::min(text.find('&', start), text.size());
        const std::string_view pair = text.substr(start, end - start);
        start = end + 1;
        if (pair.empty()) continue;
        const auto eq = pair.find('=');
        if (eq == std::string_view::npos) bad("'" + std::string(pair) + "' is not key=value");
        const std::string key = percent_decoded(pair.substr(0, eq));
        if (out.count(key)) bad(key + ": given twice (join values with commas)");
        out[key] = percent_decoded(pair.substr(eq + 1));
    }
    return out;
}

TaskSlice task_slice(storage::SessionStore& store, const storage::SessionInfo& session,
                     const std::vector<std::string>& tasks) {
    const std::string what = "session " + std::to_string(session.id);
    if (session.raw_pruned)
        throw ServiceError(Failure::kGone, what + ": task= decodes the raw bytes again, and its " +
                                               storage::raw_pruned_reason(*session.raw_pruned));
    gmon::TaskSplitOptions options;
    options.aggregates = true;
    gmon::TaskSplit split(options);
    ingest::redecode_session(store, session.id, ingest::wire_spec_of(session.spec), split);
    auto sum = std::make_shared<gmon::Aggregate>();
    auto tree = std::make_shared<gmon::CallingContextTree>();
    const gmon::CallingContextTree whole = split.tree();
    bool found = false;
    for (const auto& name : tasks) {
        for (const auto number : split.tasks_named(name)) {
            sum->merge(split.task_aggregate(number));
            tree->merge(whole.task_tree(number));
            found = true;
        }
    }
    if (!found) {
        std::string known;
        for (const auto& t : split.tasks()) {
            if (t.number > gmon::kUnknownTask)
                known += (known.empty() ? "" : ", ") + gmon::task_label(t);
        }
        throw ServiceError(Failure::kNotFound, what + " has no task " + tasks.front() +
                                                   (known.empty() ? " (it has no task switches)"
                                                                  : " (its tasks: " + known + ")"));
    }
    return {std::move(sum), std::move(tree)};
}

std::string build_id_of(const storage::SessionInfo& s) {
    if (!s.spec.elf_build_id.empty()) return s.spec.elf_build_id;
    if (!s.spec.elf_sha256.empty()) return s.spec.elf_sha256;
    return s.target.build_id;
}

std::vector<storage::SessionInfo> select_sessions(
    const Selection& selection, std::vector<storage::SessionInfo> all,
    const std::map<std::string, std::vector<std::string>>& boards_by_tag) {
    const auto has = [](const auto& list, const auto& value) {
        return std::find(list.begin(), list.end(), value) != list.end();
    };
    if (!selection.benches.empty())
        bad("bench= selects from the fleet store: configure [fleet] url (or RACKPROF_FLEET_URL)");
    std::set<std::string> tagged;
    for (const auto& tag : selection.tags) {
        if (const auto it = boards_by_tag.find(tag); it != boards_by_tag.end())
            tagged.insert(it->second.begin(), it->second.end());
    }
    for (const auto id : selection.sessions) {
        if (std::none_of(all.begin(), all.end(), [id](const auto& s) { return s.id == id; }))
            throw ServiceError(Failure::kNotFound, "no session " + std::to_string(id));
    }
    std::vector<storage::SessionInfo> out;
    for (auto& s : all) {
        if (!selection.sessions.empty() && !has(selection.sessions, s.id)) continue;
        if (!selection.boards.empty() && !has(selection.boards, s.spec.board)) continue;
        if (!selection.tags.empty() && !tagged.count(s.spec.board)) continue;
        if (!selection.build_ids.empty() && !has(selection.build_ids, build_id_of(s))) continue;
        if (selection.from_ns && s.spec.started_ns < selection.from_ns) continue;
        if (selection.to_ns && s.spec.started_ns > selection.to_ns) continue;
        out.push_back(std::move(s));
    }
    if (out.empty()) throw ServiceError(Failure::kNotFound, "the selection names no session");
    if (out.size() > kMaxSelectedSessions) {
        throw ServiceError(Failure::kBadRequest,
                           "the selection names " + std::to_string(out.size()) +
                               " sessions; at most " + std::to_string(kMaxSelectedSessions) +
                               " at once (narrow it with from/to, board or tag)");
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
    return out;
}

std::string build_id_in(const nlohmann::json& summary) {
    const auto it = summary.find("build_id");
    return it != summary.end() && it->is_string() ? it->get<std::string>() : std::string();
}

void require_one_build(const nlohmann::json& a, const nlohmann::json& b, bool by_name,
                       const std::string& what_a, const std::string& what_b) {
    const std::string build_a = build_id_in(a), build_b = build_id_in(b);
    if (by_name || build_a.empty() || build_b.empty() || build_a == build_b) return;
    throw ServiceError(Failure::kConflict,
                       "cannot compare " + what_a + " and " + what_b +
                           ": they are different builds (build-id " + build_a + " and " + build_b +
                           "); add merge=by_name to match functions by name (a function of "
                           "the same name may be other code)");
}

std::string common_build_id(const std::vector<storage::SessionInfo>& sessions) {
    std::map<std::string, std::vector<std::int64_t>> by_build;
    for (const auto& s : sessions) by_build[build_id_of(s)].push_back(s.id);
    if (by_build.size() == 1) return by_build.begin()->first;
    std::string builds;
    for (const auto& [id, members] : by_build) {
        builds += (builds.empty() ? "" : "; ") + (id.empty() ? std::string("no build-id") : id) +
                  ": session(s)";
        for (std::size_t i = 0; i < members.size() && i < 5; ++i)
            builds += " " + std::to_string(members[i]);
        if (members.size() > 5) builds += " …";
    }
    throw ServiceError(
        Failure::kConflict,
        "the selection holds sessions of " + std::to_string(by_build.size()) +
            " different builds (" + builds +
            "); sessions of different firmware are never merged silently: add build_id= "
            "to the selection, or merge=by_name to match functions by name");
}

std::map<std::string, std::vector<storage::SessionInfo>> sessions_by_board(
    const std::vector<storage::SessionInfo>& sessions) {
    std::map<std::string, std::vector<storage::SessionInfo>> out;
    for (const auto& s : sessions) out[s.spec.board].push_back(s);
    return out;
}

namespace {

// Sessions of several builds: each build's aggregates added, then moved by function name into
// one layout of every build's functions.
std::shared_ptr<gmon::ExportInput> merged_by_name(
    const std::vector<storage::SessionInfo>& sessions,
    const std::function<std::shared_ptr<const gmon::Aggregate>(std::int64_t)>& aggregate_of,
    const std::function<std::shared_ptr<const gmon::Symbolizer>(const std::string&)>& elf_of,
    const std::filesystem::path& scratch) {
    struct Build {
        gmon::Aggregate aggregate;
        std::shared_ptr<const gmon::Symbolizer> elf;
        std::int64_t first_session = 0;
    };
    std::map<std::string, Build> builds;
    nlohmann::json ids = nlohmann::json::array();
    std::set<std::string> boards;
    for (const auto& s : sessions) {
        auto& b = builds[build_id_of(s)];
        if (b.aggregate.empty() && !b.elf) b.first_session = s.id;
        b.aggregate.merge(*aggregate_of(s.id));
        if (!b.elf && !s.spec.elf_path.empty()) {
            try {
                b.elf = elf_of(s.spec.elf_path);
            } catch (const std::exception&) {
                // moved or deleted since: the next session's copy may still be there
            }
        }
        ids.push_back(s.id);
        boards.insert(s.spec.board);
    }
    std::vector<std::shared_ptr<const gmon::Symbolizer>> elves;
    nlohmann::json build_list = nlohmann::json::array();
    for (const auto& [id, b] : builds) {
        if (!b.elf) {
            throw ServiceError(Failure::kNoElf,
                               "build " + (id.empty() ? std::string("(no build-id)") : id) +
                                   " (session " + std::to_string(b.first_session) +
                                   ") has no usable ELF: its functions cannot be matched by name");
        }
        elves.push_back(b.elf);
        build_list.push_back(id);
    }
    const gmon::NameLayout layout = gmon::name_layout(elves);
    gmon::NameMerge merge;
    for (const auto& [id, b] : builds) gmon::merge_by_name(b.aggregate, *b.elf, layout, merge);
    auto input = std::make_shared<gmon::ExportInput>();
    input->source.elf = gmon::layout_elf(
        layout,
        scratch.empty() ? std::filesystem::temp_directory_path() / "rackprof-by-name" : scratch);
    input->source.aggregate = std::make_shared<const gmon::Aggregate>(std::move(merge.aggregate));
    input->summary = {{"sessions", ids},
                      {"boards", boards},
                      {"build_id", nullptr},
                      {"builds", build_list},
                      {"matched_by_name", true},
                      {"samples_outside_functions", merge.samples_outside},
                      {"calls_outside_functions", merge.calls_outside}};
    return input;
}

}  // namespace

std::shared_ptr<gmon::ExportInput> merged_input(
    const std::vector<storage::SessionInfo>& sessions,
    const std::function<std::shared_ptr<const gmon::Aggregate>(std::int64_t)>& aggregate_of,
    const std::function<std::shared_ptr<const gmon::Symbolizer>(const std::string&)>& elf_of,
    bool by_name, const std::filesystem::path& scratch) {
    if (by_name) {
        std::set<std::string> builds;
        for (const auto& s : sessions) builds.insert(build_id_of(s));
        if (builds.size() > 1) return merged_by_name(sessions, aggregate_of, elf_of, scratch);
    }
    const std::string build_id = common_build_id(sessions);
    auto input = std::make_shared<gmon::ExportInput>();
    auto& source = input->source;
    auto merged = std::make_shared<gmon::Aggregate>();
    nlohmann::json ids = nlohmann::json::array();
    std::set<std::string> boards;
    const auto& first = sessions.front();
    for (const auto& s : sessions) {
        if (s.spec.histograms != first.spec.histograms) {
            throw ServiceError(Failure::kConflict,
                               "sessions " + std::to_string(first.id) + " and " +
                                   std::to_string(s.id) +
                                   " were imported with different histogram shapes");
        }
        merged->merge(*aggregate_of(s.id));
        ids.push_back(s.id);
        boards.insert(s.spec.board);
        if (!source.elf && !s.spec.elf_path.empty()) {
            try {
                source.elf = elf_of(s.spec.elf_path);
            } catch (const std::exception&) {
                // moved or deleted since: the next session's copy may still be there
            }
        }
    }
    source.aggregate = std::move(merged);
    source.announced_range = ingest::announced_range(first.target);
    source.histograms = first.spec.histograms;
    input->summary = {
        {"sessions", ids},
        {"boards", boards},
        {"build_id", build_id.empty() ? nlohmann::json(nullptr) : nlohmann::json(build_id)}};
    return input;
}

}  // namespace rackprof::daemon::service
