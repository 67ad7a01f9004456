#include "storage/session_store.h"

#include <nlohmann/json.hpp>

#include "protocol/wire_format.h"

#include <algorithm>
#include <cstddef>
#include <string>

namespace rackprof::storage {

namespace {
// Only SWO sessions keep an exception trace (an unknown protocol keeps none).
bool has_exception_trace(const NewSession& spec) {
    const auto* format = protocol::find_wire_format(spec.protocol);
    return format && format->traits.swo;
}
}  // namespace
namespace {

// Every row the statement yields, each read by `row_of`.
template <class Row, class RowOf>
std::vector<Row> rows_of(Statement& st, RowOf row_of) {
    std::vector<Row> out;
    while (st.step()) out.push_back(row_of(st));
    return out;
}

// The counters' SQL is built from kSessionCounters: their columns carry the counters' names.
std::string counter_columns() {
    std::string out;
    for (const auto& counter : kSessionCounters) {
        if (!out.empty()) out += ", ";
        out += counter.name;
    }
    return out;
}

std::string update_counters_sql() {
    std::string out = "UPDATE sessions SET ";
    for (std::size_t i = 0; i < kSessionCounters.size(); ++i) {
        if (i > 0) out += ", ";
        out += kSessionCounters[i].name;
        out += " = ?";
    }
    return out + " WHERE id = ?";
}

// read_info's columns: these, then the counters from kFirstCounterColumn in the table's order.
constexpr const char* kSessionInfoColumns =
    "id, board, link, protocol, format, addr_bytes, elf_path, elf_build_id, elf_sha256, state, "
    "started_ns, ended_ns, target_build_id, target_text_lo, target_text_hi, wire_options, "
    "histograms";
constexpr int kFirstCounterColumn = 17;

// Whether a raw_chunks / record_batches row is one plain chunk (written before v8) or a block.
bool plain_row(const Statement& row, int encoding_column) {
    const std::int64_t encoding = row.column_int(encoding_column);
    if (encoding == static_cast<std::int64_t>(BlockEncoding::kPlainChunk)) return true;
    if (is_block_encoding(encoding)) return false;
    throw StorageError("a stored chunk has an unknown encoding " + std::to_string(encoding));
}
BlockEncoding encoding_of(const Statement& row, int encoding_column) {
    return static_cast<BlockEncoding>(row.column_int(encoding_column));
}

// A record_batches row's chunks; the row's columns are received_ns, records, encoding (the
// chunks' seqs are counted from `row_seq`: readers that need them select the row's seq).
std::vector<DecodedRecordChunk> record_chunks_of(const Statement& row, std::int64_t row_seq = 0) {
    if (!plain_row(row, 2))
        return decode_record_block(row.column_blob(1), row.column_int(0), row_seq,
                                   encoding_of(row, 2));
    std::vector<DecodedRecordChunk> one;
    one.push_back({row.column_int(0), unpack_records(row.column_blob(1)), row_seq});
    return one;
}

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

}  // namespace

// Histogram shapes as the sessions table keeps them: "" for none given, else a JSON list.
std::string histograms_text(const std::optional<std::vector<gmon::HistogramSpec>>& shapes) {
    if (!shapes) return "";
    nlohmann::json list = nlohmann::json::array();
    for (const auto& h : *shapes) {
        list.push_back({{"low_pc", h.low_pc},
                        {"high_pc", h.high_pc},
                        {"bin_bytes", h.bin_bytes},
                        {"bins", h.bins},
                        {"prof_rate", h.prof_rate}});
    }
    return list.dump();
}

std::optional<std::vector<gmon::HistogramSpec>> histograms_of(const std::string& text) {
    if (text.empty()) return std::nullopt;
    const auto list = nlohmann::json::parse(text, nullptr, false);
    if (!list.is_array()) throw StorageError("a session's stored histograms are not a JSON list");
    std::vector<gmon::HistogramSpec> shapes;
    for (const auto& h : list) {
        shapes.push_back({h.value<std::uint64_t>("low_pc", 0), h.value<std::uint64_t>("high_pc", 0),
                          h.value<std::uint32_t>("bin_bytes", 2),
                          h.value<std::uint32_t>("prof_rate", 1000),
                          h.value<std::uint64_t>("bins", 0)});
    }
    return shapes;
}

namespace {

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

// The records of a session's rows after `seq`, summed.
gmon::Aggregate records_after(Database& db, std::int64_t session, std::int64_t seq) {
    Statement rows = db.prepare(
        "SELECT received_ns, records, encoding FROM record_batches WHERE session_id = ? AND seq "
        "> ? ORDER BY seq");
    rows.bind(1, session).bind(2, seq);
    gmon::Aggregate delta;
    while (rows.step()) {
        for (const auto& chunk : record_chunks_of(rows)) delta.add(chunk.records);
    }
    return delta;
}

// A read-only connection to a database older than v10 (a `convert --db` of an old file) has no
// calling-context table: its sessions read as having no tree.
// The counters, then the calling-context tree's node count, then raw_pruned_ns and
// raw_pruned_keep_days (NULL before v12).
std::string select_sessions_sql(bool has_cct, bool has_retention) {
    return std::string("SELECT ") + kSessionInfoColumns + ", " + counter_columns() +
           (has_cct ? ", (SELECT count(*) FROM session_cct WHERE session_cct.session_id = "
                      "sessions.id)"
                    : ", 0") +
           (has_retention ? ", raw_pruned_ns, raw_pruned_keep_days" : ", NULL, NULL") +
           " FROM sessions";
}

}  // namespace

SessionStore::SessionStore(const std::filesystem::path& path, Database::Mode mode)
    : db_(path, mode) {
    if (mode == Database::Mode::kReadWrite) migrate_schema(db_);
    has_cct_ = schema_version(db_) >= kCallingContextSchema;
    has_slices_ = schema_version(db_) >= kRecordSlicesSchema;
    has_retention_ = schema_version(db_) >= kRetentionSchema;
}

Statement& SessionStore::cached(std::optional<Statement>& slot, const char* sql) {
    if (!slot) slot.emplace(db_.prepare(sql));
    return *slot;
}

std::int64_t SessionStore::create_session(const NewSession& s, std::int64_t id) {
    Statement st = db_.prepare(
        "INSERT INTO sessions (board, link, protocol, format, addr_bytes, elf_path, elf_build_id, "
        "elf_sha256, state, "
        "started_ns, wire_options, histograms, id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'capturing', ?, "
        "?, ?, ?)");
    st.bind(1, s.board).bind(2, s.link).bind(3, s.protocol).bind(4, s.format).bind(5, s.addr_bytes);
    st.bind(6, s.elf_path).bind(7, s.elf_build_id).bind(8, s.elf_sha256).bind(9, s.started_ns);
    st.bind(10, s.wire_options).bind(11, histograms_text(s.histograms));
    if (id > 0) {
        st.bind(12, id);
    } else {
        st.bind_null(12);  // INTEGER PRIMARY KEY: the next free row id
    }
    st.run();
    return db_.last_insert_id();
}

std::int64_t SessionStore::max_session_id() {
    Statement st = db_.prepare("SELECT COALESCE(MAX(id), 0) FROM sessions");
    st.step();
    return st.column_int(0);
}

namespace {

// Cuts `chunks` into runs that `fits` in one block, and hands each run to `write`.
template <class Chunk, class Size>
void for_each_block(std::span<const Chunk> chunks, std::size_t cap, Size size_of,
                    const std::function<void(std::span<const Chunk>)>& write) {
    std::size_t first = 0, size = 0;
    for (std::size_t i = 0; i < chunks.size(); ++i) {
        const std::size_t n = size_of(chunks[i]);
        if (i > first && size + n > cap) {
            write(chunks.subspan(first, i - first));
            first = i;
            size = 0;
        }
        size += n;
    }
    if (first < chunks.size()) write(chunks.subspan(first));
}

}  // namespace

namespace {

using ChunkToStore = SessionStore::ChunkToStore;

// Writes one session's chunks as block rows: runs of chunks not encoded yet are cut into blocks
// here; a chunk's part encoded already (its raw bytes, its records, or both) is a row of its own
// and ends the run of that part, so rows stay in the chunks' order.
class BlockRows {
  public:
    BlockRows(std::int64_t session, Statement& raw_st, Statement& record_st)
        : session_(session), raw_st_(raw_st), record_st_(record_st) {}

    void add(const ChunkToStore& c) {
        if (c.encoded && !c.encoded->raw_block.empty()) {
            flush_raw();
            insert_raw(c, c, c.encoded->raw_block);
        } else if (!c.raw.empty()) {
            raw_.push_back(c);
        }
        if (c.encoded && !c.encoded->record_block.empty()) {
            flush_records();
            insert_records(c, c, c.encoded->records, c.encoded->record_block);
        } else if (!c.records.empty()) {
            records_.push_back(c);
        }
    }
    void flush() {
        flush_raw();
        flush_records();
    }

  private:
    void flush_raw() {
        for_each_block<ChunkToStore>(
            raw_, kBlockRawBytes, [](const ChunkToStore& c) { return c.raw.size(); },
            [&](std::span<const ChunkToStore> block) {
                std::vector<RawChunkView> views;
                views.reserve(block.size());
                for (const auto& c : block)
                    views.push_back(
                        raw_chunk_view(c.received_ns, c.raw, c.seq, c.raw_codec, c.records));
                insert_raw(block.front(), block.back(), encode_raw_block(views));
            });
        raw_.clear();
    }
    void flush_records() {
        for_each_block<ChunkToStore>(
            records_, kBlockRecords, [](const ChunkToStore& c) { return c.records.size(); },
            [&](std::span<const ChunkToStore> block) {
                std::vector<RecordChunkView> views;
                views.reserve(block.size());
                std::uint64_t count = 0;
                for (const auto& c : block) {
                    views.push_back({c.received_ns, c.records, c.seq});
                    count += c.records.size();
                }
                insert_records(block.front(), block.back(), count, encode_record_block(views));
            });
        records_.clear();
    }
    // One row; `blob` is bound, not copied: alive until run().
    void insert_raw(const ChunkToStore& first, const ChunkToStore& last,
                    std::span<const std::uint8_t> blob) {
        raw_st_.bind(1, session_).bind(2, first.seq).bind(3, first.received_ns);
        raw_st_.bind_blob(4, blob);
        raw_st_.bind(5, last.seq).bind(6, last.received_ns);
        raw_st_.run();
    }
    void insert_records(const ChunkToStore& first, const ChunkToStore& last, std::uint64_t count,
                        std::span<const std::uint8_t> blob) {
        record_st_.bind(1, session_).bind(2, first.seq).bind(3, first.received_ns);
        record_st_.bind(4, count).bind_blob(5, blob);
        record_st_.bind(6, last.seq).bind(7, last.received_ns);
        record_st_.run();
    }

    std::int64_t session_;
    Statement& raw_st_;
    Statement& record_st_;
    std::vector<ChunkToStore> raw_, records_;
};

// The records of `chunks`, an encoded chunk's decoded again.
gmon::Aggregate sum_of(std::span<const ChunkToStore> chunks) {
    gmon::Aggregate summed;
    for (const auto& c : chunks) {
        summed.add(c.records);
        if (c.encoded && !c.encoded->record_block.empty()) {
            for (const auto& d : decode_record_block(c.encoded->record_block, c.received_ns, c.seq))
                summed.add(d.records);
        }
    }
    return summed;
}

}  // namespace

void SessionStore::append_chunks(std::int64_t session, std::span<const ChunkToStore> chunks,
                                 const gmon::Aggregate* sums) {
    static_assert(kBlockEncoding == BlockEncoding::kZstdBlockColumns, "the rows' encoding");
    BlockRows rows(
        session,
        cached(insert_raw_,
               "INSERT INTO raw_chunks (session_id, seq, received_ns, bytes, encoding, last_seq, "
               "last_ns) VALUES (?, ?, ?, ?, 3, ?, ?)"),
        cached(insert_records_,
               "INSERT INTO record_batches (session_id, seq, received_ns, count, records, "
               "encoding, last_seq, last_ns) VALUES (?, ?, ?, ?, ?, 3, ?, ?)"));
    std::optional<SliceSpan> span;
    for (const auto& c : chunks) {
        rows.add(c);
        if (c.record_count() == 0) continue;
        if (!span) span = SliceSpan{c.seq, c.seq, c.received_ns, c.received_ns, 0};
        span->last_seq = c.seq;
        span->min_ns = std::min(span->min_ns, c.received_ns);
        span->max_ns = std::max(span->max_ns, c.received_ns);
        span->records += c.record_count();
    }
    rows.flush();
    if (!span) return;
    if (sums) return slices_.add(session, *span, *sums);
    slices_.add(session, *span, sum_of(chunks));
}

std::int64_t SessionStore::add_to_aggregate(std::int64_t session, const gmon::Aggregate& delta) {
    Statement& arcs = cached(
        upsert_arc_,
        "INSERT INTO session_arcs (session_id, from_pc, self_pc, count) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (session_id, from_pc, self_pc) DO UPDATE SET count = count + excluded.count");
    for (const auto& a : delta.arcs()) {
        arcs.bind(1, session).bind(2, a.from_pc).bind(3, a.self_pc).bind(4, a.count);
        arcs.run();
    }
    Statement& pcs =
        cached(upsert_pc_,
               "INSERT INTO session_pcs (session_id, pc, count) VALUES (?, ?, ?) "
               "ON CONFLICT (session_id, pc) DO UPDATE SET count = count + excluded.count");
    for (const auto& p : delta.pc_samples()) {
        pcs.bind(1, session).bind(2, p.pc).bind(3, p.count);
        pcs.run();
    }
    Statement& version = cached(
        bump_aggregate_version_,
        "UPDATE sessions SET aggregate_version = aggregate_version + 1, summed_seq = NULL WHERE "
        "id = ? RETURNING aggregate_version");
    version.bind(1, session);
    const std::int64_t now = version.step() ? version.column_int(0) : 0;
    version.reset();
    return now;
}

std::int64_t SessionStore::defer_sums(std::int64_t session, std::int64_t seq) {
    Statement& st =
        cached(defer_sums_,
               "UPDATE sessions SET aggregate_version = aggregate_version + 1, summed_seq = "
               "COALESCE(summed_seq, ?) WHERE id = ? RETURNING aggregate_version");
    st.bind(1, seq).bind(2, session);
    const std::int64_t now = st.step() ? st.column_int(0) : 0;
    st.reset();
    return now;
}

int SessionStore::complete_sums() {
    std::vector<std::pair<std::int64_t, std::int64_t>> unsummed;
    {
        Statement st =
            db_.prepare("SELECT id, summed_seq FROM sessions WHERE summed_seq IS NOT NULL");
        while (st.step()) unsummed.emplace_back(st.column_int(0), st.column_int(1));
    }
    Transaction t(db_);  // all or nothing: a second start must not add them twice
    for (const auto& entry : unsummed)
        add_to_aggregate(entry.first, records_after(db_, entry.first, entry.second));
    t.commit();
    return static_cast<int>(unsummed.size());
}

void SessionStore::update_counters(std::int64_t session, const SessionCounters& counters) {
    static const std::string sql = update_counters_sql();
    Statement& st = cached(update_counters_, sql.c_str());
    int column = 1;
    for_each_counter(counters,
                     [&](const SessionCounter&, std::uint64_t value) { st.bind(column++, value); });
    st.bind(column, session);
    st.run();
}

void SessionStore::append_console(std::int64_t session, std::int64_t seq, std::int64_t index,
                                  const ConsoleLine& line) {
    Statement& st = cached(
        insert_console_,
        "INSERT INTO session_console (session_id, seq, line, received_ns, port, text) VALUES (?, "
        "?, ?, ?, ?, ?)");
    st.bind(1, session).bind(2, seq).bind(3, index).bind(4, line.received_ns);
    st.bind(5, std::int64_t{line.port}).bind(6, line.text);
    st.run();
}

void SessionStore::set_exceptions(std::int64_t session,
                                  std::span<const ExceptionCount> exceptions) {
    Statement clear = db_.prepare("DELETE FROM session_exceptions WHERE session_id = ?");
    clear.bind(1, session);
    clear.run();
    Statement st = db_.prepare(
        "INSERT INTO session_exceptions (session_id, exception, entries, cycles) VALUES (?, ?, ?, "
        "?)");
    for (const auto& e : exceptions) {
        st.bind(1, session).bind(2, std::int64_t{e.number}).bind(3, e.entries).bind(4, e.cycles);
        st.run();
    }
}

void SessionStore::set_calling_context(std::int64_t session, const gmon::CallingContextTree& tree) {
    Statement clear = db_.prepare("DELETE FROM session_cct WHERE session_id = ?");
    clear.bind(1, session);
    clear.run();
    Statement st = db_.prepare(
        "INSERT INTO session_cct (session_id, node, parent, function, exception, calls, "
        "inclusive, exclusive, incomplete) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
    for (std::size_t i = 0; i < tree.nodes().size(); ++i) {
        const auto& n = tree.nodes()[i];
        st.bind(1, session).bind(2, static_cast<std::int64_t>(i));
        if (n.parent == gmon::kNoParent) {
            st.bind_null(3);
        } else {
            st.bind(3, std::int64_t{n.parent});
        }
        st.bind(4, n.function).bind(5, std::int64_t{n.exception}).bind(6, n.calls);
        st.bind(7, n.inclusive).bind(8, n.exclusive).bind(9, n.incomplete ? 1 : 0);
        st.run();
    }
}

void SessionStore::set_target(std::int64_t session, const TargetInfo& target) {
    Statement st = db_.prepare(
        "UPDATE sessions SET target_build_id = ?, target_text_lo = ?, target_text_hi = ? WHERE id "
        "= ?");
    st.bind(1, target.build_id)
        .bind(2, std::int64_t{target.text_lo})
        .bind(3, std::int64_t{target.text_hi})
        .bind(4, session);
    st.run();
}

void SessionStore::add_gap(std::int64_t session, const Gap& gap) {
    Statement st = db_.prepare(
        "INSERT INTO session_gaps (session_id, started_ns, ended_ns, reason, records_lost, "
        "bytes_lost) VALUES (?, ?, ?, ?, ?, ?)");
    st.bind(1, session).bind(2, gap.started_ns).bind(3, gap.ended_ns).bind(4, gap.reason);
    if (gap.records_lost) {
        st.bind(5, *gap.records_lost);
    } else {
        st.bind_null(5);
    }
    if (gap.bytes_lost) {
        st.bind(6, *gap.bytes_lost);
    } else {
        st.bind_null(6);
    }
    st.run();
}

void SessionStore::end_session(std::int64_t session, const std::string& state,
                               std::int64_t ended_ns) {
    Statement st = db_.prepare("UPDATE sessions SET state = ?, ended_ns = ? WHERE id = ?");
    st.bind(1, state).bind(2, ended_ns).bind(3, session);
    st.run();
}

void SessionStore::set_firmware(std::int64_t session, const std::string& elf_path,
                                const std::string& build_id, const std::string& sha256) {
    Statement st = db_.prepare(
        "UPDATE sessions SET elf_path = ?, elf_build_id = ?, elf_sha256 = ? WHERE id = ?");
    st.bind(1, elf_path).bind(2, build_id).bind(3, sha256).bind(4, session);
    st.run();
}

void SessionStore::save_board(const std::string& name, const std::string& config_json,
                              std::int64_t at_ns) {
    Statement st = db_.prepare(
        "INSERT INTO boards (name, config, updated_ns) VALUES (?, ?, ?) "
        "ON CONFLICT (name) DO UPDATE SET config = excluded.config, updated_ns = "
        "excluded.updated_ns");
    st.bind(1, name).bind(2, config_json).bind(3, at_ns);
    st.run();
}

void SessionStore::delete_board(const std::string& name) {
    Statement st = db_.prepare("DELETE FROM boards WHERE name = ?");
    st.bind(1, name);
    st.run();
}

std::vector<std::pair<std::string, std::string>> SessionStore::stored_boards() {
    Statement st = db_.prepare("SELECT name, config FROM boards ORDER BY name");
    std::vector<std::pair<std::string, std::string>> out;
    while (st.step()) out.emplace_back(st.column_text(0), st.column_text(1));
    return out;
}

void SessionStore::delete_session(std::int64_t session) {
    Statement st = db_.prepare("DELETE FROM sessions WHERE id = ?");  // the rest cascades
    st.bind(1, session);
    st.run();
    slices_.forget(session);
}

int SessionStore::interrupt_unfinished(std::int64_t now_ns) {
    Statement st = db_.prepare(
        "UPDATE sessions SET state = 'interrupted', ended_ns = COALESCE("
        "(SELECT MAX(COALESCE(last_ns, received_ns)) FROM raw_chunks WHERE session_id = "
        "sessions.id), "
        "?) WHERE state "
        "= 'capturing'");
    st.bind(1, now_ns);
    st.run();
    return db_.changes();
}

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
    return i;
}

std::vector<SessionInfo> SessionStore::sessions() {
    Statement st =
        db_.prepare((select_sessions_sql(has_cct_, has_retention_) + " ORDER BY id").c_str());
    std::vector<SessionInfo> out;
    while (st.step()) out.push_back(read_info(st));
    for (auto& info : out) {
        if (has_exception_trace(info.spec)) info.exceptions = exceptions(info.id);
    }
    return out;
}

std::optional<SessionInfo> SessionStore::session(std::int64_t id) {
    Statement st =
        db_.prepare((select_sessions_sql(has_cct_, has_retention_) + " WHERE id = ?").c_str());
    st.bind(1, id);
    if (!st.step()) return std::nullopt;
    SessionInfo info = read_info(st);
    if (has_exception_trace(info.spec)) info.exceptions = exceptions(id);
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

gmon::CallingContextTree SessionStore::calling_context(std::int64_t session) {
    if (!has_cct_) return {};
    Statement st = db_.prepare(
        "SELECT node, parent, function, exception, calls, inclusive, exclusive, incomplete FROM "
        "session_cct WHERE session_id = ? ORDER BY node");
    st.bind(1, session);
    gmon::CallingContextTree tree;
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
