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

namespace {

using nlohmann::json;

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

}  // namespace

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

}  // namespace rackprof::storage::fleet
