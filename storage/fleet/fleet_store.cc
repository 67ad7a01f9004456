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

namespace rackprof::fleet {
namespace {

using nlohmann::json;

// The versions' steps, in order: kMigrations[i] takes version i to i + 1. Tables partitioned
// by the session's start (Unix ns) carry it in every row: arcs and PC counts of one month
// live in that month's partitions, so a month's queries read only it.
const char* const kMigrations[] = {
    R"sql(
CREATE TABLE firmware (
    build_id text PRIMARY KEY,
    elf bytea NOT NULL,
    elf_sha256 text NOT NULL,
    stored_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE functions (
    build_id text NOT NULL REFERENCES firmware ON DELETE CASCADE,
    address bigint NOT NULL,
    size bigint NOT NULL,
    name text NOT NULL,
    PRIMARY KEY (build_id, address, name));
CREATE TABLE sessions (
    id bigint GENERATED ALWAYS AS IDENTITY,
    bench text NOT NULL,
    local_id bigint NOT NULL,
    board text NOT NULL,
    tags text[] NOT NULL DEFAULT '{}',
    build_id text,
    started_ns bigint NOT NULL,
    ended_ns bigint,
    state text NOT NULL,
    spec jsonb NOT NULL,
    counters jsonb NOT NULL,
    pushed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (id, started_ns),
    UNIQUE (bench, local_id, started_ns)) PARTITION BY RANGE (started_ns);
CREATE INDEX sessions_build_id ON sessions (build_id);
CREATE TABLE arcs (
    session_id bigint NOT NULL,
    started_ns bigint NOT NULL,
    from_pc bigint NOT NULL,
    self_pc bigint NOT NULL,
    count bigint NOT NULL) PARTITION BY RANGE (started_ns);
CREATE INDEX arcs_session ON arcs (session_id);
CREATE TABLE pc_samples (
    session_id bigint NOT NULL,
    started_ns bigint NOT NULL,
    pc bigint NOT NULL,
    count bigint NOT NULL) PARTITION BY RANGE (started_ns);
CREATE INDEX pc_samples_session ON pc_samples (session_id);
)sql",
    // 2: per-build sums kept at push time, by (build, bench, month of the start): a build's
    // profile over thousands of sessions adds a few rows per bench instead of every session's
    // (see sum()). `build_groups` counts the sessions in each sum. Partitioned by that month
    // (month_ns, the partition's lower bound) like the rest, so a month dropped drops its sums.
    R"sql(
CREATE TABLE build_groups (
    build_id text NOT NULL,
    bench text NOT NULL,
    month_ns bigint NOT NULL,
    sessions bigint NOT NULL,
    PRIMARY KEY (build_id, bench, month_ns)) PARTITION BY RANGE (month_ns);
CREATE TABLE build_arcs (
    build_id text NOT NULL,
    bench text NOT NULL,
    month_ns bigint NOT NULL,
    from_pc bigint NOT NULL,
    self_pc bigint NOT NULL,
    count bigint NOT NULL,
    PRIMARY KEY (build_id, bench, month_ns, from_pc, self_pc)) PARTITION BY RANGE (month_ns);
CREATE TABLE build_pcs (
    build_id text NOT NULL,
    bench text NOT NULL,
    month_ns bigint NOT NULL,
    pc bigint NOT NULL,
    count bigint NOT NULL,
    PRIMARY KEY (build_id, bench, month_ns, pc)) PARTITION BY RANGE (month_ns);
)sql",
    // 3: retention (`rackprof fleet prune`): sessions that ended before sessions_before_ns were
    // removed, and a push of one is refused, so a bench does not push them again.
    R"sql(
CREATE TABLE retention (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    sessions_before_ns bigint NOT NULL,
    keep_sessions_days integer NOT NULL,
    pruned_at timestamptz NOT NULL DEFAULT now());
)sql",
    // 4: per-board sums kept at push time, by (build, bench, board, month of the start): the
    // per-board spread of a fleet profile reads one row per board and reported function
    // instead of summing every session's PC rows per board. `board_groups` counts the
    // sessions in each sum with their calls and samples; `board_functions` holds PC samples by
    // the start address of the function holding them (gmon/function_index.h over the build's
    // ELF). A session pushed without its ELF makes its group not `whole`: such a group is read
    // from its sessions' rows.
    R"sql(
CREATE TABLE board_groups (
    build_id text NOT NULL,
    bench text NOT NULL,
    board text NOT NULL,
    month_ns bigint NOT NULL,
    sessions bigint NOT NULL,
    calls bigint NOT NULL,
    samples bigint NOT NULL,
    whole boolean NOT NULL,
    PRIMARY KEY (build_id, bench, board, month_ns)) PARTITION BY RANGE (month_ns);
CREATE TABLE board_functions (
    build_id text NOT NULL,
    bench text NOT NULL,
    board text NOT NULL,
    month_ns bigint NOT NULL,
    address bigint NOT NULL,
    samples bigint NOT NULL,
    PRIMARY KEY (build_id, bench, board, month_ns, address)) PARTITION BY RANGE (month_ns);
)sql",
};
static_assert(std::size(kMigrations) == kFleetSchemaVersion);

// Advisory lock keys: one bench at a time migrates, or creates a month's partitions.
constexpr const char* kMigrationLock = "SELECT pg_advisory_xact_lock(72010001)";
constexpr const char* kPartitionLock = "SELECT pg_advisory_xact_lock(72010002)";

// Addresses and counts are unsigned 64-bit; bigint keeps their bits.
std::uint64_t as_unsigned(const PgResult& r, int row, int column) {
    return static_cast<std::uint64_t>(r.integer(row, column));
}

std::string text_array(const std::vector<std::string>& values) {
    std::string out = "{";
    for (std::size_t i = 0; i < values.size(); ++i) {
        if (i) out += ',';
        out += '"';
        for (char c : values[i]) {
            if (c == '"' || c == '\\') out += '\\';
            out += c;
        }
        out += '"';
    }
    return out + "}";
}

// In SQL, the first instant (Unix ns) of the UTC month a session started in: a build-sum
// group's month_ns, as month_of() gives it.
#define RACKPROF_FLEET_MONTH_OF_START                                                        \
    "(extract(epoch FROM date_trunc('month', to_timestamp(started_ns / 1000000000) AT TIME " \
    "ZONE 'UTC')) * 1000000000)::bigint"

// The UTC month holding `ns`: its first instant and the next month's, in Unix ns.
std::pair<std::int64_t, std::int64_t> month_of(std::int64_t ns, std::string& name) {
    using namespace std::chrono;
    const sys_days day = floor<days>(sys_time<nanoseconds>(nanoseconds(ns)));
    const year_month_day ymd(day);
    const year_month month = ymd.year() / ymd.month();
    const year_month next = month + months(1);
    const auto start = sys_days(month / 1), end = sys_days(next / 1);
    name = "y" + std::to_string(static_cast<int>(ymd.year())) + "m" +
           (static_cast<unsigned>(ymd.month()) < 10 ? "0" : "") +
           std::to_string(static_cast<unsigned>(ymd.month()));
    if (ns < 0) name = "before_1970";  // never from a real clock; one partition holds them
    const auto to_ns = [](sys_days d) {
        return duration_cast<nanoseconds>(d.time_since_epoch()).count();
    };
    return {to_ns(start), to_ns(end)};
}

json spec_json(const storage::SessionInfo& s) {
    return {{"protocol", s.spec.protocol},
            {"format", s.spec.format},
            {"addr_bytes", s.spec.addr_bytes},
            {"elf_build_id", s.spec.elf_build_id},
            {"elf_sha256", s.spec.elf_sha256},
            {"target",
             {{"build_id", s.target.build_id},
              {"text_lo", s.target.text_lo},
              {"text_hi", s.target.text_hi}}},
            {"histograms", storage::histograms_text(s.spec.histograms)}};
}

std::string file_bytes(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + path.string());
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

// Where a partition's month ends (Unix ns), from its name's yYYYYmMM; 0 for before_1970.
std::int64_t month_end_of(const std::string& suffix) {
    using namespace std::chrono;
    if (suffix.size() != 8 || suffix[0] != 'y' || suffix[5] != 'm') return 0;
    const int y = std::stoi(suffix.substr(1, 4));
    const unsigned m = static_cast<unsigned>(std::stoi(suffix.substr(6, 2)));
    const year_month next = year(y) / month(m) + months(1);
    return duration_cast<nanoseconds>(sys_days(next / 1).time_since_epoch()).count();
}

}  // namespace

std::int64_t fleet_session_end(const storage::SessionInfo& info) {
    return info.ended_ns ? info.ended_ns : info.spec.started_ns;
}

FleetPruned FleetStore::prune(std::int64_t before_ns, std::int64_t keep_days) {
    FleetPruned out;
    PgTransaction t(db_);
    db_.exec(kPartitionLock);  // no month is created meanwhile
    // The cutoff only moves forward: a shorter rule run later never lets old sessions back.
    db_.query(
        "INSERT INTO retention (sessions_before_ns, keep_sessions_days) VALUES ($1, $2) "
        "ON CONFLICT (one) DO UPDATE SET sessions_before_ns = GREATEST("
        "retention.sessions_before_ns, excluded.sessions_before_ns), keep_sessions_days = "
        "excluded.keep_sessions_days, pruned_at = now()",
        {std::to_string(before_ns), std::to_string(keep_days)});
    // Months wholly before the cutoff, none of whose sessions ended after it: dropped whole
    // (instant, and the space goes back to the file system at once).
    const PgResult months = db_.query(
        "SELECT substring(c.relname from 10) FROM pg_inherits i "
        "JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent "
        "WHERE p.relname = 'sessions' AND c.relname ~ '^sessions_(y[0-9]{4}m[0-9]{2}|"
        "before_1970)$' ORDER BY 1");
    for (int i = 0; i < months.rows(); ++i) {
        const std::string month = months.text(i, 0);
        if (month_end_of(month) > before_ns) continue;
        const PgResult later = db_.query("SELECT count(*) FROM sessions_" + month +
                                             " WHERE COALESCE(ended_ns, started_ns) >= $1",
                                         {std::to_string(before_ns)});
        if (later.integer(0, 0) > 0) continue;
        out.sessions_deleted += db_.query("SELECT count(*) FROM sessions_" + month).integer(0, 0);
        for (const char* table : {"arcs", "pc_samples", "sessions"})
            db_.exec(std::string("DROP TABLE ") + table + "_" + month);
        // Its build and board sums (schemas 2, 4) with it; an older month may have none.
        for (const char* table :
             {"build_arcs", "build_pcs", "build_groups", "board_functions", "board_groups"})
            db_.exec(std::string("DROP TABLE IF EXISTS ") + table + "_" + month);
        out.months_dropped.push_back(month);
    }
    // The rest row by row: their counts with them, and the build sums of the groups they were
    // in (sum() would never read a group with a session missing, since its session count no
    // longer matches any selection, but the rows would stay; those groups are read from their
    // sessions' rows from now on).
    const PgResult gone = db_.query(
        "WITH gone AS (DELETE FROM sessions WHERE COALESCE(ended_ns, started_ns) < $1 "
        "RETURNING id, started_ns, build_id, bench, board, " RACKPROF_FLEET_MONTH_OF_START
        " AS month_ns), "
        "a AS (DELETE FROM arcs USING gone WHERE arcs.session_id = gone.id AND "
        "arcs.started_ns = gone.started_ns), "
        "p AS (DELETE FROM pc_samples USING gone WHERE pc_samples.session_id = gone.id AND "
        "pc_samples.started_ns = gone.started_ns), "
        "ba AS (DELETE FROM build_arcs b USING gone WHERE (b.build_id, b.bench, b.month_ns) = "
        "(gone.build_id, gone.bench, gone.month_ns)), "
        "bp AS (DELETE FROM build_pcs b USING gone WHERE (b.build_id, b.bench, b.month_ns) = "
        "(gone.build_id, gone.bench, gone.month_ns)), "
        "bg AS (DELETE FROM build_groups b USING gone WHERE (b.build_id, b.bench, b.month_ns) = "
        "(gone.build_id, gone.bench, gone.month_ns)), "
        "bf AS (DELETE FROM board_functions b USING gone WHERE (b.build_id, b.bench, b.board, "
        "b.month_ns) = (gone.build_id, gone.bench, gone.board, gone.month_ns)), "
        "bb AS (DELETE FROM board_groups b USING gone WHERE (b.build_id, b.bench, b.board, "
        "b.month_ns) = (gone.build_id, gone.bench, gone.board, gone.month_ns)) "
        "SELECT count(*) FROM gone",
        {std::to_string(before_ns)});
    out.sessions_deleted += gone.integer(0, 0);
    t.commit();
    return out;
}

FleetStore::FleetStore(const FleetConnection& connection) : db_(connection_parameters(connection)) {
    // The statements here are many small lookups whose row estimates (arrays of ids) are
    // far too high: PostgreSQL's JIT then compiled them for 1.5 s to save milliseconds
    // (EXPLAIN ANALYZE of the board sums over 10^4 sessions: 1.7 s with, 0.26 s without).
    db_.exec("SET jit = off");
    migrate();
}

void FleetStore::migrate() {
    PgTransaction t(db_);
    db_.exec(kMigrationLock);
    db_.exec("CREATE TABLE IF NOT EXISTS rackprof_schema (version integer NOT NULL)");
    const PgResult r = db_.query("SELECT version FROM rackprof_schema");
    int version = r.rows() ? static_cast<int>(r.integer(0, 0)) : 0;
    if (version > kFleetSchemaVersion) {
        throw PgError("the fleet database has schema version " + std::to_string(version) +
                      ", newer than this rackprof's " + std::to_string(kFleetSchemaVersion));
    }
    for (; version < kFleetSchemaVersion; ++version) db_.exec(kMigrations[version]);
    db_.exec("DELETE FROM rackprof_schema");
    db_.query("INSERT INTO rackprof_schema (version) VALUES ($1)", {std::to_string(version)});
    t.commit();
}

void FleetStore::ensure_month(std::int64_t started_ns) {
    std::string name;
    const auto [from, to] = month_of(started_ns, name);
    // The last table made: a month made before schema 2 or 4 gets the later sums' partitions.
    if (db_.query("SELECT to_regclass($1)", {"board_functions_" + name}).is_null(0, 0) == false)
        return;
    db_.exec(kPartitionLock);  // held to the end of the caller's transaction
    for (const char* table : {"sessions", "arcs", "pc_samples", "build_groups", "build_arcs",
                              "build_pcs", "board_groups", "board_functions"}) {
        const std::string bounds = name == "before_1970" ? "FROM (MINVALUE) TO (0)"
                                                         : "FROM (" + std::to_string(from) +
                                                               ") TO (" + std::to_string(to) + ")";
        db_.exec(std::string("CREATE TABLE IF NOT EXISTS ") + table + "_" + name +
                 " PARTITION OF " + table + " FOR VALUES " + bounds);
    }
}

std::set<std::pair<std::int64_t, std::int64_t>> FleetStore::pushed(const std::string& bench) {
    const PgResult r =
        db_.query("SELECT local_id, started_ns FROM sessions WHERE bench = $1", {bench});
    std::set<std::pair<std::int64_t, std::int64_t>> out;
    for (int i = 0; i < r.rows(); ++i) out.emplace(r.integer(i, 0), r.integer(i, 1));
    return out;
}

void FleetStore::store_firmware(const std::string& build_id, const gmon::Symbolizer& elf,
                                const std::string& sha256) {
    if (db_.query("SELECT 1 FROM firmware WHERE build_id = $1", {build_id}).rows() > 0) return;
    std::string bytes;
    std::vector<gmon::ProfileSymbol> table;
    try {
        bytes = file_bytes(elf.path());
        table = gmon::gprof_symbol_table(elf);
    } catch (const std::exception&) {
        return;  // gone or naming no function: the session goes without, as it would locally
    }
    db_.query(
        "INSERT INTO firmware (build_id, elf, elf_sha256) VALUES ($1, $2::bytea, $3) "
        "ON CONFLICT DO NOTHING",
        {build_id, pg_bytea(bytes), sha256});
    std::vector<std::string> names;
    std::vector<std::int64_t> addresses, sizes;
    for (const auto& f : table) {
        names.push_back(f.name);
        addresses.push_back(static_cast<std::int64_t>(f.addr));
        sizes.push_back(static_cast<std::int64_t>(f.end_addr + 1 - f.addr));
    }
    db_.query(
        "INSERT INTO functions (build_id, address, size, name) "
        "SELECT $1, unnest($2::bigint[]), unnest($3::bigint[]), unnest($4::text[]) "
        "ON CONFLICT DO NOTHING",
        {build_id, pg_array(addresses), pg_array(sizes), text_array(names)});
}

std::int64_t FleetStore::retained_from() {
    const PgResult r = db_.query("SELECT sessions_before_ns FROM retention");
    return r.rows() ? r.integer(0, 0) : 0;
}

bool FleetStore::push_session(const PushedSession& session, const gmon::Aggregate& aggregate,
                              const std::shared_ptr<const gmon::Symbolizer>& elf) {
    const auto& info = session.info;
    const std::string started = std::to_string(info.spec.started_ns);
    PgTransaction t(db_);
    // Retention removed what ended before its cutoff: such a session is not taken again.
    if (fleet_session_end(info) < retained_from()) return false;
    ensure_month(info.spec.started_ns);
    if (elf && !session.build_id.empty())
        store_firmware(session.build_id, *elf, info.spec.elf_sha256);
    const PgResult row = db_.query(
        "INSERT INTO sessions (bench, local_id, board, tags, build_id, started_ns, ended_ns, "
        "state, spec, counters) VALUES ($1, $2, $3, $4::text[], $5, $6, $7, $8, $9::jsonb, "
        "$10::jsonb) ON CONFLICT DO NOTHING RETURNING id",
        {session.bench, std::to_string(info.id), info.spec.board, text_array(session.tags),
         session.build_id.empty() ? PgParam() : PgParam(session.build_id), started,
         info.ended_ns ? PgParam(std::to_string(info.ended_ns)) : PgParam(), info.state,
         spec_json(info).dump(), storage::counters_json(info.counters).dump()});
    if (row.rows() == 0) return false;  // pushed before: the transaction changes nothing
    const std::string id = row.text(0, 0);
    std::vector<std::int64_t> from, self, counts;
    for (const auto& a : aggregate.arcs()) {
        from.push_back(static_cast<std::int64_t>(a.from_pc));
        self.push_back(static_cast<std::int64_t>(a.self_pc));
        counts.push_back(static_cast<std::int64_t>(a.count));
    }
    const std::string arc_from = pg_array(from), arc_self = pg_array(self),
                      arc_counts = pg_array(counts);
    db_.query(
        "INSERT INTO arcs (session_id, started_ns, from_pc, self_pc, count) "
        "SELECT $1, $2, unnest($3::bigint[]), unnest($4::bigint[]), unnest($5::bigint[])",
        {id, started, arc_from, arc_self, arc_counts});
    std::vector<std::int64_t> pcs;
    counts.clear();
    for (const auto& p : aggregate.pc_samples()) {
        pcs.push_back(static_cast<std::int64_t>(p.pc));
        counts.push_back(static_cast<std::int64_t>(p.count));
    }
    const std::string pc_list = pg_array(pcs), pc_counts = pg_array(counts);
    db_.query(
        "INSERT INTO pc_samples (session_id, started_ns, pc, count) "
        "SELECT $1, $2, unnest($3::bigint[]), unnest($4::bigint[])",
        {id, started, pc_list, pc_counts});
    if (!session.build_id.empty() && info.spec.started_ns >= 0) {
        add_to_build_sums(session, arc_from, arc_self, arc_counts, pc_list, pc_counts);
        add_to_board_sums(session, aggregate, elf.get());
    }
    t.commit();
    return true;
}

// Inside push_session's transaction: the session's counts added to its build's sums for its
// bench and month. Keys in order, so two transactions adding to the same rows (two daemons
// under one bench name) take their locks in the same order.
void FleetStore::add_to_build_sums(const PushedSession& session, const std::string& arc_from,
                                   const std::string& arc_self, const std::string& arc_counts,
                                   const std::string& pcs, const std::string& pc_counts) {
    std::string name;
    const std::string month = std::to_string(month_of(session.info.spec.started_ns, name).first);
    db_.query(
        "INSERT INTO build_groups (build_id, bench, month_ns, sessions) VALUES ($1, $2, $3, 1) "
        "ON CONFLICT (build_id, bench, month_ns) DO UPDATE "
        "SET sessions = build_groups.sessions + 1",
        {session.build_id, session.bench, month});
    db_.query(
        "INSERT INTO build_arcs (build_id, bench, month_ns, from_pc, self_pc, count) "
        "SELECT $1, $2, $3, f, s, c FROM unnest($4::bigint[], $5::bigint[], $6::bigint[]) "
        "AS u(f, s, c) ORDER BY f, s "
        "ON CONFLICT (build_id, bench, month_ns, from_pc, self_pc) DO UPDATE "
        "SET count = build_arcs.count + excluded.count",
        {session.build_id, session.bench, month, arc_from, arc_self, arc_counts});
    db_.query(
        "INSERT INTO build_pcs (build_id, bench, month_ns, pc, count) "
        "SELECT $1, $2, $3, p, c FROM unnest($4::bigint[], $5::bigint[]) AS u(p, c) ORDER BY p "
        "ON CONFLICT (build_id, bench, month_ns, pc) DO UPDATE "
        "SET count = build_pcs.count + excluded.count",
        {session.build_id, session.bench, month, pcs, pc_counts});
}

// Inside push_session's transaction: the session's calls, samples and samples by function
// added to its board's sums for its build and month. Without the ELF (or one naming no
// function) its samples cannot be given to functions: the group is no longer whole.
void FleetStore::add_to_board_sums(const PushedSession& session, const gmon::Aggregate& aggregate,
                                   const gmon::Symbolizer* elf) {
    std::vector<std::int64_t> addresses, samples;
    bool whole = elf != nullptr;
    if (elf) {
        try {
            const gmon::FunctionIndex index(*elf);
            std::map<std::uint64_t, std::uint64_t> by_function;
            for (const auto& pc : aggregate.pc_samples()) {
                if (const auto* f = index.holding(pc.pc)) by_function[f->addr] += pc.count;
            }
            for (const auto& [address, count] : by_function) {
                addresses.push_back(static_cast<std::int64_t>(address));
                samples.push_back(static_cast<std::int64_t>(count));
            }
        } catch (const std::exception&) {
            whole = false;  // an ELF naming no function
        }
    }
    std::string name;
    const std::string month = std::to_string(month_of(session.info.spec.started_ns, name).first);
    db_.query(
        "INSERT INTO board_groups (build_id, bench, board, month_ns, sessions, calls, samples, "
        "whole) VALUES ($1, $2, $3, $4, 1, $5, $6, $7) "
        "ON CONFLICT (build_id, bench, board, month_ns) DO UPDATE SET "
        "sessions = board_groups.sessions + 1, calls = board_groups.calls + excluded.calls, "
        "samples = board_groups.samples + excluded.samples, "
        "whole = board_groups.whole AND excluded.whole",
        {session.build_id, session.bench, session.info.spec.board, month,
         std::to_string(static_cast<std::int64_t>(aggregate.total_calls())),
         std::to_string(static_cast<std::int64_t>(aggregate.total_samples())),
         whole ? "true" : "false"});
    if (addresses.empty()) return;
    db_.query(
        "INSERT INTO board_functions (build_id, bench, board, month_ns, address, samples) "
        "SELECT $1, $2, $3, $4, a, n FROM unnest($5::bigint[], $6::bigint[]) AS u(a, n) "
        "ORDER BY a ON CONFLICT (build_id, bench, board, month_ns, address) DO UPDATE "
        "SET samples = board_functions.samples + excluded.samples",
        {session.build_id, session.bench, session.info.spec.board, month, pg_array(addresses),
         pg_array(samples)});
}

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
    const char* text = PQgetvalue(r.raw(), row, column);
    std::uint64_t value = 0;
    std::from_chars(text, text + std::strlen(text), value);
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

std::string FleetStore::fingerprint(const FleetFilter& f) {
    std::vector<PgParam> params;
    const std::string sql =
        "SELECT count(*) || ':' || COALESCE(max(id), 0) || ':' || COALESCE(sum(id), 0) FROM "
        "sessions WHERE true" +
        filter_conditions(f, params);
    return db_.query(sql, params).text(0, 0);
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

}  // namespace rackprof::fleet
