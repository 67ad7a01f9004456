#include "storage/session_store.h"

#include <nlohmann/json.hpp>

#include "protocol/wire_format.h"
#include "storage/session_rows.h"

#include <algorithm>
#include <cstddef>
#include <limits>
#include <string>

// SessionStore's reads: sessions, aggregates (whole, between times, after a seq), console lines,
// exceptions, calling-context trees, gaps, and the raw and record pages exports walk.
namespace rackprof::storage {

using namespace detail;

namespace {

// Only SWO sessions keep an exception trace (an unknown protocol keeps none).
bool has_exception_trace(const NewSession& spec) {
    const auto* format = protocol::find_wire_format(spec.protocol);
    return format && format->traits.swo;
}

// Task switches travel in the framed protocol (alone, or inside an SWO stream).
bool has_task_switches(const NewSession& spec) {
    return spec.protocol == "framed" || has_exception_trace(spec);
}

// Every row the statement yields, each read by `row_of`.
template <class Row, class RowOf>
std::vector<Row> rows_of(Statement& st, RowOf row_of) {
    std::vector<Row> out;
    while (st.step()) out.push_back(row_of(st));
    return out;
}

// The counters' SQL is built from kSessionCounters: their columns carry the counters' names.
// A read-only connection to a database older than v16 has no probe counters: they read as 0.
std::string counter_columns(bool has_probe_counters) {
    std::string out;
    for (const auto& counter : kSessionCounters) {
        if (!out.empty()) out += ", ";
        const bool probe =
            counter.name == "samples_halted_ns" || counter.name == "stack_unwind_failures";
        out += probe && !has_probe_counters ? std::string("0") : std::string(counter.name);
    }
    return out;
}

// read_info's columns: these, then the counters from kFirstCounterColumn in the table's order.
constexpr const char* kSessionInfoColumns =
    "id, board, link, protocol, format, addr_bytes, elf_path, elf_build_id, elf_sha256, state, "
    "started_ns, ended_ns, target_build_id, target_text_lo, target_text_hi, wire_options, "
    "histograms";
constexpr int kFirstCounterColumn = 17;

// The records of a session's chunks by seq, for the raw chunks rebuilt from them: the record
// row holding a seq is decoded once for all of its chunks.
class RecordsBySeq {
  public:
    RecordsBySeq(Database& db, std::int64_t session)
        : st_(db.prepare("SELECT received_ns, records, encoding, seq FROM record_batches WHERE "
                         "session_id = ? AND seq <= ? ORDER BY seq DESC LIMIT 1")),
          session_(session) {}
    std::span<const protocol::Record> of(std::int64_t seq) {
        if (const auto* found = find(seq)) return *found;
        st_.reset();
        st_.bind(1, session_).bind(2, seq);
        if (st_.step()) chunks_ = record_chunks_of(st_, st_.column_int(3));
        if (const auto* found = find(seq)) return *found;
        throw StorageError("the records raw chunk " + std::to_string(seq) +
                           " is rebuilt from are missing");
    }

  private:
    const std::vector<protocol::Record>* find(std::int64_t seq) const {
        for (const auto& c : chunks_)
            if (c.seq == seq) return &c.records;
        return nullptr;
    }
    Statement st_;
    std::int64_t session_;
    std::vector<DecodedRecordChunk> chunks_;
};

// A raw block's chunks with their bytes, rebuilt where they were stored as their records.
std::vector<DecodedRawChunk> raw_chunks_of(const Statement& row, int blob_column,
                                           std::int64_t row_seq, RecordsBySeq& records) {
    auto chunks = decode_raw_block(row.column_blob(blob_column), row.column_int(blob_column - 1),
                                   row_seq, encoding_of(row, blob_column + 1));
    for (auto& c : chunks) {
        if (c.codec == RawCodec::kVerbatim) continue;
        c.bytes = rebuild_raw(c.codec, c.derivation, records.of(c.seq), c.bytes, c.length);
        c.codec = RawCodec::kVerbatim;
    }
    return chunks;
}

// A deferred read transaction, so that several reads see one snapshot; none when the
// connection is inside a transaction already (the writer's, or an outer snapshot).
class ReadSnapshot {
  public:
    explicit ReadSnapshot(Database& db)
        : db_(db), began_(sqlite3_get_autocommit(db.handle()) != 0) {
        if (began_) db_.exec("BEGIN");
    }
    ~ReadSnapshot() {
        if (!began_) return;
        try {
            db_.exec("COMMIT");
        } catch (const StorageError&) {  // a read transaction has nothing to lose
        }
    }
    ReadSnapshot(const ReadSnapshot&) = delete;
    ReadSnapshot& operator=(const ReadSnapshot&) = delete;

  private:
    Database& db_;
    bool began_;
};

// A read-only connection to a database older than v10 (a `convert --db` of an old file) has no
// calling-context table: its sessions read as having no tree.
// The counters, then the calling-context tree's node count, then raw_pruned_ns and
// raw_pruned_keep_days (NULL before v12).
std::string select_sessions_sql(bool has_cct, bool has_retention, bool has_probe_counters,
                                bool has_arch) {
    return std::string("SELECT ") + kSessionInfoColumns + ", " +
           counter_columns(has_probe_counters) +
           (has_cct ? ", (SELECT count(*) FROM session_cct WHERE session_cct.session_id = "
                      "sessions.id)"
                    : ", 0") +
           (has_retention ? ", raw_pruned_ns, raw_pruned_keep_days" : ", NULL, NULL") +
           (has_arch ? ", arch" : ", ''") + " FROM sessions";
}

}  // namespace

SessionInfo SessionStore::read_info(Statement& s) {
    SessionInfo i;
    i.id = s.column_int(0);
    i.spec.board = s.column_text(1);
    i.spec.link = s.column_text(2);
    i.spec.protocol = s.column_text(3);
    i.spec.format = s.column_text(4);
    i.spec.addr_bytes = static_cast<int>(s.column_int(5));
    i.spec.elf_path = s.column_text(6);
    i.spec.elf_build_id = s.column_text(7);
    i.spec.elf_sha256 = s.column_text(8);
    i.state = s.column_text(9);
    i.spec.started_ns = s.column_int(10);
    i.ended_ns = s.column_is_null(11) ? 0 : s.column_int(11);
    i.target.build_id = s.column_text(12);
    i.target.text_lo = static_cast<std::uint32_t>(s.column_int(13));
    i.target.text_hi = static_cast<std::uint32_t>(s.column_int(14));
    i.spec.wire_options = s.column_text(15);
    i.spec.histograms = histograms_of(s.column_text(16));
    int column = kFirstCounterColumn;
    for (const auto& counter : kSessionCounters)
        i.counters.*counter.member = static_cast<std::uint64_t>(s.column_int(column++));
    i.calling_context_nodes = static_cast<std::uint64_t>(s.column_int(column));
    if (!s.column_is_null(column + 1))
        i.raw_pruned = RawPruned{s.column_int(column + 1), s.column_int(column + 2)};
    i.spec.arch = s.column_text(column + 3);
    return i;
}

std::vector<SessionInfo> SessionStore::sessions_after(std::int64_t id) {
    Statement st =
        db_.prepare((select_sessions_sql(has_cct_, has_retention_, has_probe_counters_, has_arch_) +
                     " WHERE id > ? ORDER BY id")
                        .c_str());
    st.bind(1, id);
    std::vector<SessionInfo> out;
    while (st.step()) out.push_back(read_info(st));
    for (auto& info : out) {
        if (has_exception_trace(info.spec)) info.exceptions = exceptions(info.id);
        if (has_task_switches(info.spec)) info.tasks = tasks(info.id);
    }
    return out;
}

std::vector<SessionInfo> SessionStore::sessions_before(
    std::int64_t before_id, std::size_t limit,
    const std::function<bool(const SessionInfo&)>& wanted) {
    Statement st =
        db_.prepare((select_sessions_sql(has_cct_, has_retention_, has_probe_counters_, has_arch_) +
                     " WHERE id < ? ORDER BY id DESC")
                        .c_str());
    st.bind(1, before_id > 0 ? before_id : std::numeric_limits<std::int64_t>::max());
    std::vector<SessionInfo> out;
    while (out.size() < limit && st.step()) {
        SessionInfo info = read_info(st);
        if (!wanted(info)) continue;
        if (has_exception_trace(info.spec)) info.exceptions = exceptions(info.id);
        if (has_task_switches(info.spec)) info.tasks = tasks(info.id);
        out.push_back(std::move(info));
    }
    return out;
}

std::optional<SessionInfo> SessionStore::session(std::int64_t id) {
    Statement st =
        db_.prepare((select_sessions_sql(has_cct_, has_retention_, has_probe_counters_, has_arch_) +
                     " WHERE id = ?")
                        .c_str());
    st.bind(1, id);
    if (!st.step()) return std::nullopt;
    SessionInfo info = read_info(st);
    if (has_exception_trace(info.spec)) info.exceptions = exceptions(id);
    if (has_task_switches(info.spec)) info.tasks = tasks(id);
    return info;
}

std::optional<SessionStore::VersionedAggregate> SessionStore::versioned_aggregate(
    std::int64_t session) {
    // The version and the rows from one snapshot: a deferred read transaction (readers'
    // connections are read-only, so not Transaction's BEGIN IMMEDIATE).
    const ReadSnapshot snapshot(db_);
    Statement version = db_.prepare("SELECT aggregate_version FROM sessions WHERE id = ?");
    version.bind(1, session);
    if (!version.step()) return std::nullopt;
    const std::int64_t at = version.column_int(0);
    return VersionedAggregate{aggregate(session), at};
}

gmon::Aggregate SessionStore::aggregate(std::int64_t session) {
    const ReadSnapshot snapshot(db_);
    if (auto sealed = sealed_aggregate(session)) return std::move(*sealed);
    return aggregate_from_rows(session);
}

std::optional<gmon::Aggregate> SessionStore::sealed_aggregate(std::int64_t session) {
    if (!has_sums_) return std::nullopt;
    Statement st = db_.prepare(
        "SELECT ss.sums FROM session_sums ss JOIN sessions s ON s.id = ss.session_id WHERE "
        "ss.session_id = ? AND ss.aggregate_version = s.aggregate_version AND s.summed_seq IS "
        "NULL");
    st.bind(1, session);
    if (!st.step()) return std::nullopt;
    gmon::Aggregate a;
    add_sums_block(st.column_blob(0), a);
    return a;
}

gmon::Aggregate SessionStore::aggregate_from_rows(std::int64_t session) {
    gmon::Aggregate a;
    Statement arcs =
        db_.prepare("SELECT from_pc, self_pc, count FROM session_arcs WHERE session_id = ?");
    arcs.bind(1, session);
    while (arcs.step()) {
        a.add_arc(static_cast<std::uint64_t>(arcs.column_int(0)),
                  static_cast<std::uint64_t>(arcs.column_int(1)),
                  static_cast<std::uint64_t>(arcs.column_int(2)));
    }
    Statement pcs = db_.prepare("SELECT pc, count FROM session_pcs WHERE session_id = ?");
    pcs.bind(1, session);
    while (pcs.step())
        a.add_pc(static_cast<std::uint64_t>(pcs.column_int(0)),
                 static_cast<std::uint64_t>(pcs.column_int(1)));
    // A capturing session's records after its sums (the writer writes them once a second).
    // A read-only open of a database before v11 has no summed_seq: its sums hold everything.
    if (!has_slices_) return a;
    Statement summed = db_.prepare("SELECT summed_seq FROM sessions WHERE id = ?");
    summed.bind(1, session);
    if (summed.step() && !summed.column_is_null(0))
        a.merge(records_after(db_, session, summed.column_int(0)));
    return a;
}

gmon::Aggregate SessionStore::aggregate_between(std::int64_t session, std::int64_t from_ns,
                                                std::int64_t to_ns) {
    if (!has_slices_) return aggregate_between_rows(session, from_ns, to_ns);
    const ReadSnapshot snapshot(db_);  // slices and rows as one commit left them
    if (!window_sums_) window_sums_ = std::make_unique<WindowSums>();
    WindowSums& a = *window_sums_;
    try {
        const auto slices = slices_inside(db_, session, from_ns, to_ns);
        for (const auto& slice : slices) a.add_slice(db_, slice);
        Statement rows = db_.prepare(
            "SELECT received_ns, records, encoding FROM record_batches WHERE session_id = ? AND "
            "seq BETWEEN ? AND ? AND received_ns <= ? AND COALESCE(last_ns, received_ns) >= ? "
            "ORDER BY seq");
        for (const auto& range : ranges_to_decode(db_, session, from_ns, to_ns, slices)) {
            rows.bind(1, session).bind(2, range.first).bind(3, range.last);
            rows.bind(4, to_ns).bind(5, from_ns);
            while (rows.step()) {
                for (const auto& chunk : record_chunks_of(rows)) {
                    if (chunk.received_ns >= from_ns && chunk.received_ns <= to_ns)
                        a.add(chunk.records);
                }
            }
            rows.reset();
        }
        return a.take();
    } catch (...) {
        window_sums_.reset();  // a window that failed part way left counts in it
        throw;
    }
}

gmon::Aggregate SessionStore::aggregate_between_rows(std::int64_t session, std::int64_t from_ns,
                                                     std::int64_t to_ns) {
    gmon::Aggregate a;
    Statement st = db_.prepare(
        "SELECT received_ns, records, encoding FROM record_batches WHERE session_id = ? AND "
        "received_ns <= ? AND COALESCE(last_ns, received_ns) >= ? ORDER BY seq");
    st.bind(1, session).bind(2, to_ns).bind(3, from_ns);
    while (st.step()) {
        for (const auto& chunk : record_chunks_of(st)) {
            if (chunk.received_ns >= from_ns && chunk.received_ns <= to_ns) a.add(chunk.records);
        }
    }
    return a;
}

std::vector<ConsoleLine> SessionStore::console(std::int64_t session, int limit) {
    // The newest `limit` lines, put back in the order received.
    Statement st = db_.prepare(
        "SELECT received_ns, port, text FROM session_console WHERE session_id = ? ORDER BY seq "
        "DESC, line DESC LIMIT ?");
    st.bind(1, session).bind(2, std::int64_t{limit > 0 ? limit : -1});
    auto out = rows_of<ConsoleLine>(st, [](const Statement& row) -> ConsoleLine {
        return {row.column_int(0), static_cast<std::uint16_t>(row.column_int(1)),
                row.column_text(2)};
    });
    std::reverse(out.begin(), out.end());
    return out;
}

std::vector<ExceptionCount> SessionStore::exceptions(std::int64_t session) {
    Statement st = db_.prepare(
        "SELECT exception, entries, cycles FROM session_exceptions WHERE session_id = ? ORDER BY "
        "exception");
    st.bind(1, session);
    return rows_of<ExceptionCount>(st, [](const Statement& row) -> ExceptionCount {
        return {static_cast<std::uint16_t>(row.column_int(0)),
                static_cast<std::uint64_t>(row.column_int(1)),
                static_cast<std::uint64_t>(row.column_int(2))};
    });
}

std::vector<TaskSummary> SessionStore::tasks(std::int64_t session) {
    if (!has_tasks_) return {};
    Statement st = db_.prepare(
        "SELECT task, handle, name, samples, switches, deleted FROM session_tasks WHERE "
        "session_id = ? ORDER BY task");
    st.bind(1, session);
    return rows_of<TaskSummary>(st, [](const Statement& row) -> TaskSummary {
        return {static_cast<std::uint32_t>(row.column_int(0)),
                static_cast<std::uint32_t>(row.column_int(1)),
                row.column_text(2),
                static_cast<std::uint64_t>(row.column_int(3)),
                static_cast<std::uint64_t>(row.column_int(4)),
                row.column_int(5) != 0};
    });
}

gmon::CallingContextTree SessionStore::calling_context(std::int64_t session) {
    if (!has_cct_) return {};
    Statement st = db_.prepare(
        "SELECT node, parent, function, exception, calls, inclusive, exclusive, incomplete FROM "
        "session_cct WHERE session_id = ? ORDER BY node");
    st.bind(1, session);
    gmon::CallingContextTree tree;
    if (has_probe_counters_) {
        Statement unit = db_.prepare("SELECT cct_unit FROM sessions WHERE id = ?");
        unit.bind(1, session);
        if (unit.step() && unit.column_int(0) == 1) tree.set_unit(gmon::ContextUnit::kSamples);
    }
    while (st.step()) {
        gmon::ContextNode n;
        if (st.column_int(0) != static_cast<std::int64_t>(tree.nodes().size()))
            throw StorageError("session " + std::to_string(session) +
                               ": calling-context nodes are not numbered 0, 1, 2, ...");
        n.parent =
            st.column_is_null(1) ? gmon::kNoParent : static_cast<std::uint32_t>(st.column_int(1));
        n.function = static_cast<std::uint64_t>(st.column_int(2));
        n.exception = static_cast<std::uint16_t>(st.column_int(3));
        n.calls = static_cast<std::uint64_t>(st.column_int(4));
        n.inclusive = static_cast<std::uint64_t>(st.column_int(5));
        n.exclusive = static_cast<std::uint64_t>(st.column_int(6));
        n.incomplete = st.column_int(7) != 0;
        try {
            tree.add_stored(n);
        } catch (const std::invalid_argument& e) {
            throw StorageError("session " + std::to_string(session) + ": " + e.what());
        }
        if (tree.nodes().size() != static_cast<std::size_t>(st.column_int(0)) + 1)
            throw StorageError("session " + std::to_string(session) +
                               ": a calling-context path is stored twice");
    }
    return tree;
}

std::vector<Gap> SessionStore::gaps(std::int64_t session) {
    Statement st = db_.prepare(
        "SELECT started_ns, ended_ns, reason, records_lost, bytes_lost FROM session_gaps WHERE "
        "session_id = ? ORDER BY rowid");
    st.bind(1, session);
    const auto count = [](const Statement& row, int column) -> std::optional<std::uint64_t> {
        if (row.column_is_null(column)) return std::nullopt;
        return static_cast<std::uint64_t>(row.column_int(column));
    };
    return rows_of<Gap>(st, [&](const Statement& row) -> Gap {
        return {row.column_int(0), row.column_int(1), row.column_text(2), count(row, 3),
                count(row, 4)};
    });
}

void SessionStore::for_each_chunk(
    std::int64_t session,
    const std::function<void(std::int64_t, std::span<const std::uint8_t>)>& f) {
    Statement st = db_.prepare(
        "SELECT received_ns, bytes, encoding, seq FROM raw_chunks WHERE session_id = ? ORDER BY "
        "seq");
    st.bind(1, session);
    RecordsBySeq records(db_, session);
    while (st.step()) {
        if (plain_row(st, 2)) {
            f(st.column_int(0), st.column_blob(1));
            continue;
        }
        for (const auto& chunk : raw_chunks_of(st, 1, st.column_int(3), records))
            f(chunk.received_ns, chunk.bytes);
    }
}

std::vector<SessionStore::ChunkRow> SessionStore::chunk_page(std::int64_t session,
                                                             std::int64_t after_seq, int limit) {
    Statement st = db_.prepare(
        "SELECT COALESCE(last_seq, seq), received_ns, bytes, encoding, seq FROM raw_chunks WHERE "
        "session_id = ? AND seq > ? ORDER BY seq LIMIT ?");
    st.bind(1, session).bind(2, after_seq).bind(3, limit);
    std::vector<ChunkRow> out;
    RecordsBySeq records(db_, session);
    while (st.step()) {
        const std::int64_t seq = st.column_int(0);
        if (plain_row(st, 3)) {
            const auto blob = st.column_blob(2);
            out.push_back({seq, st.column_int(1), {blob.begin(), blob.end()}});
            continue;
        }
        for (auto& chunk : raw_chunks_of(st, 2, st.column_int(4), records))
            out.push_back({seq, chunk.received_ns, std::move(chunk.bytes)});
    }
    return out;
}

std::vector<SessionStore::BatchRow> SessionStore::batch_page(std::int64_t session,
                                                             std::int64_t after_seq, int limit) {
    Statement st = db_.prepare(
        "SELECT received_ns, records, encoding, COALESCE(last_seq, seq) FROM record_batches "
        "WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?");
    st.bind(1, session).bind(2, after_seq).bind(3, limit);
    std::vector<BatchRow> out;
    while (st.step()) {
        const std::int64_t seq = st.column_int(3);
        for (auto& chunk : record_chunks_of(st))
            out.push_back({seq, chunk.received_ns, std::move(chunk.records)});
    }
    return out;
}

void SessionStore::for_each_record_batch(
    std::int64_t session,
    const std::function<void(std::int64_t, std::span<const protocol::Record>)>& f) {
    Statement st = db_.prepare(
        "SELECT received_ns, records, encoding FROM record_batches WHERE session_id = ? ORDER BY "
        "seq");
    st.bind(1, session);
    while (st.step()) {
        for (const auto& chunk : record_chunks_of(st)) f(chunk.received_ns, chunk.records);
    }
}

}  // namespace rackprof::storage
