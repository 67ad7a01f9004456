#include "storage/retention.h"

#include <ctime>

namespace rackprof::storage {

namespace {

// The raw tables and their blob column, in the order a session's rows are deleted.
struct RawTable {
    const char* select;  // rowid and blob length of up to ?2 rows of session ?1
    const char* remove;  // one row by rowid
};
constexpr RawTable kRawTables[] = {
    {"SELECT rowid, length(sums) FROM record_slices WHERE session_id = ?1 LIMIT ?2",
     "DELETE FROM record_slices WHERE rowid = ?"},
    {"SELECT rowid, length(records) FROM record_batches WHERE session_id = ?1 LIMIT ?2",
     "DELETE FROM record_batches WHERE rowid = ?"},
    {"SELECT rowid, length(bytes) FROM raw_chunks WHERE session_id = ?1 LIMIT ?2",
     "DELETE FROM raw_chunks WHERE rowid = ?"},
};

constexpr const char* kHasRawRows =
    "(EXISTS (SELECT 1 FROM raw_chunks r WHERE r.session_id = sessions.id) OR "
    "EXISTS (SELECT 1 FROM record_batches b WHERE b.session_id = sessions.id) OR "
    "EXISTS (SELECT 1 FROM record_slices s WHERE s.session_id = sessions.id))";

}  // namespace

std::string raw_pruned_reason(const RawPruned& pruned) {
    const std::time_t seconds = static_cast<std::time_t>(pruned.at_ns / 1'000'000'000);
    std::tm utc{};
    gmtime_r(&seconds, &utc);
    char date[32];
    std::strftime(date, sizeof date, "%Y-%m-%d", &utc);
    return "raw data pruned on " + std::string(date) +
           " by retention (keep_raw_days = " + std::to_string(pruned.keep_days) + ")";
}

RetentionPass::RetentionPass(SessionStore& store, const RetentionRules& rules, std::int64_t now_ns,
                             const std::set<std::int64_t>& open)
    : store_(store), rules_(rules), now_ns_(now_ns) {
    Database& db = store_.db();
    std::set<std::int64_t> whole;
    if (rules_.keep_sessions_days > 0) {
        Statement st = db.prepare(
            "SELECT id FROM sessions WHERE state <> 'capturing' AND ended_ns IS NOT NULL AND "
            "ended_ns < ? ORDER BY ended_ns");
        st.bind(1, now_ns - rules_.keep_sessions_days * kNsPerDay);
        while (st.step()) {
            const std::int64_t id = st.column_int(0);
            if (open.count(id)) continue;
            whole.insert(id);
            todo_.push_back({id, true, false});
        }
    }
    // Raw data due by age, and any whose pruning a stop or crash interrupted (marked, rows
    // left): finished whatever the rules say now, so a marked session holds no raw rows.
    Statement st = db.prepare((std::string("SELECT id FROM sessions WHERE state <> 'capturing' "
                                           "AND summed_seq IS NULL AND (raw_pruned_ns IS NOT "
                                           "NULL OR (?1 > 0 AND ended_ns IS NOT NULL AND "
                                           "ended_ns < ?2)) AND ") +
                               kHasRawRows + " ORDER BY ended_ns")
                                  .c_str());
    st.bind(1, rules_.keep_raw_days);
    st.bind(2,
            rules_.keep_raw_days > 0 ? now_ns - rules_.keep_raw_days * kNsPerDay : std::int64_t{0});
    while (st.step()) {
        const std::int64_t id = st.column_int(0);
        if (open.count(id) || whole.count(id)) continue;
        todo_.push_back({id, false, false});
    }
}

bool RetentionPass::delete_rows(std::int64_t session, int rows) {
    Database& db = store_.db();
    for (const RawTable& table : kRawTables) {
        Statement select = db.prepare(table.select);
        select.bind(1, session).bind(2, rows);
        std::vector<std::int64_t> ids;
        while (select.step()) {
            ids.push_back(select.column_int(0));
            totals_.bytes += static_cast<std::uint64_t>(select.column_int(1));
        }
        if (ids.empty()) continue;
        Statement remove = db.prepare(table.remove);
        for (const std::int64_t id : ids) {
            remove.bind(1, id);
            remove.run();
        }
        totals_.rows += ids.size();
        return true;
    }
    return false;
}

std::vector<std::int64_t> RetentionPass::step(std::chrono::steady_clock::duration budget,
                                              int rows) {
    const auto until = std::chrono::steady_clock::now() + budget;
    std::vector<std::int64_t> to_delete;
    Database& db = store_.db();
    // At least one transaction a call, however small the budget: every step makes progress.
    for (bool first = true; !todo_.empty() && (first || std::chrono::steady_clock::now() < until);
         first = false) {
        Due& due = todo_.front();
        Transaction t(db);
        if (!due.marked) {
            // First, before any row goes: readers answer raw_pruned_reason from now on.
            Statement mark = db.prepare(
                "UPDATE sessions SET raw_pruned_ns = ?, raw_pruned_keep_days = ? WHERE id = ? "
                "AND raw_pruned_ns IS NULL AND state <> 'capturing'");
            mark.bind(1, now_ns_)
                .bind(2, due.whole ? rules_.keep_sessions_days : rules_.keep_raw_days)
                .bind(3, due.session);
            mark.run();
            due.marked = true;
        }
        const bool more = delete_rows(due.session, rows);
        t.commit();
        if (more) continue;
        if (due.whole) {
            to_delete.push_back(due.session);
            ++totals_.sessions_deleted;
        } else {
            ++totals_.sessions_raw_pruned;
        }
        todo_.pop_front();
    }
    return to_delete;
}

}  // namespace rackprof::storage
