#include "storage/fleet/fleet_sql.h"
#include "storage/fleet/fleet_store.h"

#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "gmon/function_index.h"
#include "gmon/profile.h"
#include "storage/counters_json.h"

namespace rackprof::storage::fleet {

using namespace detail;
using nlohmann::json;

namespace {

// The session columns sessions() reads: the spec's and counters' fields taken out by the
// server (->>), so that ten thousand rows are not ten thousand JSON documents parsed here.
std::string session_columns() {
    std::string sql =
        "id, bench, local_id, board, build_id, started_ns, ended_ns, state, spec->>'protocol', "
        "spec->>'format', spec->>'addr_bytes', spec->>'elf_sha256', spec#>>'{target,build_id}', "
        "spec#>>'{target,text_lo}', spec#>>'{target,text_hi}', spec->>'histograms'";
    for (const auto& counter : storage::kSessionCounters)
        sql += ", counters->>'" + std::string(counter.name) + "'";
    return sql;
}

std::uint64_t number_or_0(const PgResult& r, int row, int column) {
    if (r.is_null(row, column)) return 0;
    const std::string_view text = r.view(row, column);
    std::uint64_t value = 0;
    std::from_chars(text.data(), text.data() + text.size(), value);
    return value;
}

// " AND …" for each key of a filter, its values appended to `params` ($1, $2, …).
std::string filter_conditions(const FleetFilter& f, std::vector<PgParam>& params) {
    std::string sql;
    const auto add = [&](const std::string& condition, std::string value) {
        params.emplace_back(std::move(value));
        std::string c = condition;
        const auto at = c.find('?');
        c.replace(at, 1, "$" + std::to_string(params.size()));
        sql += " AND " + c;
    };
    if (!f.sessions.empty()) add("id = ANY(?::bigint[])", pg_array(f.sessions));
    if (!f.benches.empty()) add("bench = ANY(?::text[])", text_array(f.benches));
    if (!f.boards.empty()) {
        add("(board = ANY(?::text[]) OR bench || '/' || board = ANY(board_list.v))",
            text_array(f.boards));
        // The same list twice: named once, referenced as board_list.
        sql.replace(sql.find("board_list.v"), 12, "$" + std::to_string(params.size()) + "::text[]");
    }
    if (!f.tags.empty()) add("tags && ?::text[]", text_array(f.tags));
    if (!f.build_ids.empty()) add("build_id = ANY(?::text[])", text_array(f.build_ids));
    if (f.from_ns) add("started_ns >= ?", std::to_string(f.from_ns));
    if (f.to_ns) add("started_ns <= ?", std::to_string(f.to_ns));
    return sql;
}

}  // namespace

bool FleetStore::connected() const {
    return db_.ok();
}

FleetStore::SelectionState FleetStore::selection_state(const FleetFilter& f) {
    std::vector<PgParam> params;
    const std::string sql =
        "SELECT count(*), count(*) || ':' || COALESCE(max(id), 0) || ':' || COALESCE(sum(id), 0) "
        "FROM sessions WHERE true" +
        filter_conditions(f, params);
    const PgResult r = db_.query(sql, params);
    return {r.integer(0, 0), r.text(0, 1)};
}

std::vector<storage::SessionInfo> FleetStore::sessions(const FleetFilter& f) {
    static const std::string columns = session_columns();
    std::vector<PgParam> params;
    std::string sql =
        "SELECT " + columns + " FROM sessions WHERE true" + filter_conditions(f, params);
    sql += " ORDER BY id";
    const PgResult r = db_.query(sql, params);
    const auto text_or = [&](int row, int column, const std::string& otherwise) {
        return r.is_null(row, column) ? otherwise : r.text(row, column);
    };
    std::vector<storage::SessionInfo> out;
    out.reserve(static_cast<std::size_t>(r.rows()));
    for (int i = 0; i < r.rows(); ++i) {
        storage::SessionInfo s;
        s.id = r.integer(i, 0);
        s.spec.board = r.text(i, 1) + "/" + r.text(i, 3);
        s.spec.elf_build_id = text_or(i, 4, "");
        s.spec.started_ns = r.integer(i, 5);
        s.ended_ns = r.is_null(i, 6) ? 0 : r.integer(i, 6);
        s.state = r.text(i, 7);
        s.spec.protocol = text_or(i, 8, s.spec.protocol);
        s.spec.format = text_or(i, 9, s.spec.format);
        if (!r.is_null(i, 10)) s.spec.addr_bytes = static_cast<int>(number_or_0(r, i, 10));
        s.spec.elf_sha256 = text_or(i, 11, "");
        s.target.build_id = text_or(i, 12, "");
        s.target.text_lo = number_or_0(r, i, 13);
        s.target.text_hi = number_or_0(r, i, 14);
        s.spec.histograms = storage::histograms_of(text_or(i, 15, ""));
        int column = 16;
        for (const auto& counter : storage::kSessionCounters)
            s.counters.*counter.member = number_or_0(r, i, column++);
        s.spec.link = "fleet://" + r.text(i, 1) + "/" + r.text(i, 2);  // bench, local id
        out.push_back(std::move(s));
    }
    return out;
}

// The selection's sessions (`picked`) by build, bench and month of their start; `covered`: the
// groups whose every session is selected, whose build sums (build_arcs, build_pcs) then hold
// exactly theirs; `rest`: the other sessions, whose own rows are added. One statement each for
// arcs and PCs, so each sees one snapshot: a push into a group between the two makes that
// group's count differ from the selection's, and the second statement reads its sessions' rows.
constexpr const char* kSelectionGroups =
    "WITH picked AS (SELECT id, build_id, bench, " RACKPROF_FLEET_MONTH_OF_START
    " AS month_ns FROM sessions WHERE id = ANY($1::bigint[])),"
    R"sql(
covered AS (
    SELECT p.build_id, p.bench, p.month_ns FROM picked p
    JOIN build_groups g USING (build_id, bench, month_ns)
    GROUP BY p.build_id, p.bench, p.month_ns, g.sessions HAVING count(*) = g.sessions),
rest AS (
    SELECT id FROM picked p WHERE NOT EXISTS (
        SELECT 1 FROM covered c
        WHERE c.build_id = p.build_id AND c.bench = p.bench AND c.month_ns = p.month_ns))
)sql";

gmon::Aggregate FleetStore::sum(const std::vector<std::int64_t>& ids) {
    gmon::Aggregate out;
    if (ids.empty()) return out;
    const std::string list = pg_array(ids);
    // ANY(ARRAY(…)): the rest's ids become one array, read through the session_id index.
    const PgResult arcs = db_.query(
        std::string(kSelectionGroups) +
            "SELECT from_pc, self_pc, sum(count)::bigint FROM ("
            " SELECT a.from_pc, a.self_pc, a.count FROM build_arcs a"
            " JOIN covered USING (build_id, bench, month_ns)"
            " UNION ALL SELECT from_pc, self_pc, count FROM arcs"
            " WHERE session_id = ANY(ARRAY(SELECT id FROM rest))) t GROUP BY from_pc, self_pc",
        {list});
    for (int i = 0; i < arcs.rows(); ++i)
        out.add_arc(as_unsigned(arcs, i, 0), as_unsigned(arcs, i, 1), as_unsigned(arcs, i, 2));
    const PgResult pcs = db_.query(
        std::string(kSelectionGroups) +
            "SELECT pc, sum(count)::bigint FROM ("
            " SELECT b.pc, b.count FROM build_pcs b JOIN covered USING (build_id, bench, month_ns)"
            " UNION ALL SELECT pc, count FROM pc_samples"
            " WHERE session_id = ANY(ARRAY(SELECT id FROM rest))) t GROUP BY pc",
        {list});
    for (int i = 0; i < pcs.rows(); ++i) out.add_pc(as_unsigned(pcs, i, 0), as_unsigned(pcs, i, 1));
    return out;
}

// Per board of the selection, one statement (one snapshot): `covered` the whole board groups
// whose every session is selected, read from their sums; `rest` the other sessions, read from
// their rows. Rows tagged by `kind`: 0 a covered group's calls and samples, 1 its samples in
// one of the functions asked for ($2), 2 a rest session's calls, 3 a rest board's samples at
// one PC.
constexpr const char* kBoardSums =
    "WITH picked AS (SELECT id, started_ns, build_id, bench, board, " RACKPROF_FLEET_MONTH_OF_START
    " AS month_ns FROM sessions WHERE id = ANY($1::bigint[])),"
    R"sql(
covered AS (
    SELECT p.build_id, p.bench, p.board, p.month_ns, g.calls, g.samples FROM picked p
    JOIN board_groups g USING (build_id, bench, board, month_ns) WHERE g.whole
    GROUP BY p.build_id, p.bench, p.board, p.month_ns, g.sessions, g.calls, g.samples
    HAVING count(*) = g.sessions),
rest AS (
    SELECT p.* FROM picked p WHERE NOT EXISTS (
        SELECT 1 FROM covered c WHERE (c.build_id, c.bench, c.board, c.month_ns) =
            (p.build_id, p.bench, p.board, p.month_ns)))
SELECT 0, bench || '/' || board, calls, samples FROM covered
UNION ALL
SELECT 1, f.bench || '/' || f.board, f.address, f.samples FROM board_functions f
    JOIN covered USING (build_id, bench, board, month_ns) WHERE f.address = ANY($2::bigint[])
UNION ALL
SELECT 2, r.bench || '/' || r.board, (SELECT COALESCE(sum(a.count), 0) FROM arcs a
    WHERE a.session_id = r.id AND a.started_ns = r.started_ns)::bigint, 0 FROM rest r
UNION ALL
SELECT 3, r.bench || '/' || r.board, s.pc, sum(s.count)::bigint FROM rest r
    JOIN pc_samples s ON s.session_id = r.id AND s.started_ns = r.started_ns GROUP BY 2, 3
)sql";

std::vector<FleetBoardSum> FleetStore::board_sums(const std::vector<std::int64_t>& ids,
                                                  const gmon::FunctionIndex& index,
                                                  const std::vector<std::uint64_t>& functions) {
    if (ids.empty()) return {};
    std::vector<std::int64_t> wanted;
    for (const auto f : functions) wanted.push_back(static_cast<std::int64_t>(f));
    const PgResult r = db_.query(kBoardSums, {pg_array(ids), pg_array(wanted)});
    const std::set<std::uint64_t> asked(functions.begin(), functions.end());
    std::map<std::string, FleetBoardSum> boards;
    for (int i = 0; i < r.rows(); ++i) {
        auto& b = boards[r.text(i, 1)];
        const std::uint64_t key = as_unsigned(r, i, 2), value = as_unsigned(r, i, 3);
        switch (r.integer(i, 0)) {
            case 0:
                b.calls += key;
                b.samples += value;
                break;
            case 1:
                b.function_samples[key] += value;
                break;
            case 2:
                b.calls += key;
                break;
            default:  // a rest board's PC, given to its function here
                b.samples += value;
                if (const auto* f = index.holding(key); f && asked.count(f->addr))
                    b.function_samples[f->addr] += value;
        }
    }
    std::vector<FleetBoardSum> out;
    for (auto& [name, b] : boards) {
        b.board = name;
        out.push_back(std::move(b));
    }
    return out;
}

gmon::Aggregate FleetStore::sum_of_session_rows(const std::vector<std::int64_t>& ids) {
    gmon::Aggregate out;
    if (ids.empty()) return out;
    const std::string list = pg_array(ids);
    const PgResult arcs = db_.query(
        "SELECT from_pc, self_pc, sum(count)::bigint FROM arcs WHERE session_id = "
        "ANY($1::bigint[]) GROUP BY from_pc, self_pc",
        {list});
    for (int i = 0; i < arcs.rows(); ++i)
        out.add_arc(as_unsigned(arcs, i, 0), as_unsigned(arcs, i, 1), as_unsigned(arcs, i, 2));
    const PgResult pcs = db_.query(
        "SELECT pc, sum(count)::bigint FROM pc_samples WHERE session_id = ANY($1::bigint[]) "
        "GROUP BY pc",
        {list});
    for (int i = 0; i < pcs.rows(); ++i) out.add_pc(as_unsigned(pcs, i, 0), as_unsigned(pcs, i, 1));
    return out;
}

std::filesystem::path FleetStore::elf_file(const std::string& build_id,
                                           const std::filesystem::path& dir) {
    if (build_id.empty() || build_id.find_first_not_of("0123456789abcdef") != std::string::npos)
        return {};
    const auto path = dir / (build_id + ".elf");
    std::error_code ec;
    if (std::filesystem::is_regular_file(path, ec)) return path;
    const PgResult r = db_.query("SELECT elf FROM firmware WHERE build_id = $1", {build_id});
    if (r.rows() == 0) return {};
    std::filesystem::create_directories(dir);
    const auto partial = dir / (build_id + ".elf.part" + std::to_string(::getpid()));
    {
        const std::string bytes = r.bytes(0, 0);
        std::ofstream out(partial, std::ios::binary);
        out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        if (!out) throw std::runtime_error("cannot write " + partial.string());
    }
    std::filesystem::rename(partial, path);
    return path;
}

std::int64_t FleetStore::count(const std::string& table) {
    return db_.query("SELECT count(*) FROM " + table).integer(0, 0);
}

std::int64_t FleetStore::session_bytes() {
    return db_
        .query(
            "SELECT COALESCE(sum(pg_total_relation_size(oid)), 0)::bigint FROM pg_class WHERE "
            "relkind = 'r' AND "
            "relname ~ '^(sessions|arcs|pc_samples|build_groups|build_arcs|build_pcs)_'")
        .integer(0, 0);
}

}  // namespace rackprof::storage::fleet