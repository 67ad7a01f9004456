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

namespace detail {

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

}  // namespace detail

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

FleetStore::FleetStore(const FleetConnection& connection)
    : db_(connection_parameters(connection), connection.limits) {
    // The statements here are many small lookups whose row estimates (arrays of ids) are
    // far too high: PostgreSQL's JIT would then spend far longer compiling them than they
    // take to run.
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

}  // namespace rackprof::storage::fleet
