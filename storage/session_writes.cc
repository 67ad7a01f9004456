#include "storage/session_store.h"

#include "storage/session_rows.h"

#include <algorithm>
#include <cstddef>
#include <functional>
#include <string>

// SessionStore's writes: sessions created and ended, chunks stored as blocks, sums, counters,
// gaps, console lines, boards. Its reads are in session_reads.cc.
namespace rackprof::storage {

using namespace detail;

namespace {

using ChunkToStore = SessionStore::ChunkToStore;

std::string update_counters_sql() {
    std::string out = "UPDATE sessions SET ";
    for (std::size_t i = 0; i < kSessionCounters.size(); ++i) {
        if (i > 0) out += ", ";
        out += kSessionCounters[i].name;
        out += " = ?";
    }
    return out + " WHERE id = ?";
}

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

std::int64_t SessionStore::create_session(const NewSession& s, std::int64_t id) {
    Statement st = db_.prepare(
        "INSERT INTO sessions (board, link, protocol, format, addr_bytes, elf_path, elf_build_id, "
        "elf_sha256, state, "
        "started_ns, wire_options, histograms, id, arch) VALUES (?, ?, ?, ?, ?, ?, ?, ?, "
        "'capturing', ?, ?, ?, ?, ?)");
    st.bind(1, s.board).bind(2, s.link).bind(3, s.protocol).bind(4, s.format).bind(5, s.addr_bytes);
    st.bind(6, s.elf_path).bind(7, s.elf_build_id).bind(8, s.elf_sha256).bind(9, s.started_ns);
    st.bind(10, s.wire_options).bind(11, histograms_text(s.histograms));
    if (id > 0) {
        st.bind(12, id);
    } else {
        st.bind_null(12);  // INTEGER PRIMARY KEY: the next free row id
    }
    st.bind(13, s.arch);
    st.run();
    return db_.last_insert_id();
}

std::int64_t SessionStore::max_session_id() {
    Statement st = db_.prepare("SELECT COALESCE(MAX(id), 0) FROM sessions");
    st.step();
    return st.column_int(0);
}

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

int SessionStore::complete_sums(std::int64_t below_id) {
    std::vector<std::pair<std::int64_t, std::int64_t>> unsummed;
    {
        Statement st = db_.prepare(
            "SELECT id, summed_seq FROM sessions WHERE summed_seq IS NOT NULL AND id < ?");
        st.bind(1, below_id);
        while (st.step()) unsummed.emplace_back(st.column_int(0), st.column_int(1));
    }
    Transaction t(db_);  // all or nothing: a second start must not add them twice
    for (const auto& entry : unsummed)
        add_to_aggregate(entry.first, records_after(db_, entry.first, entry.second));
    t.commit();
    return static_cast<int>(unsummed.size());
}

bool SessionStore::seal_sums(std::int64_t session) {
    Statement state = db_.prepare(
        "SELECT aggregate_version FROM sessions WHERE id = ? AND state != 'capturing' AND "
        "summed_seq IS NULL");
    state.bind(1, session);
    if (!state.step()) return false;
    const std::int64_t version = state.column_int(0);
    const auto sums = encode_sums_block(aggregate_from_rows(session));
    Statement st = db_.prepare(
        "INSERT INTO session_sums (session_id, aggregate_version, sums) VALUES (?, ?, ?) ON "
        "CONFLICT (session_id) DO UPDATE SET aggregate_version = excluded.aggregate_version, "
        "sums = excluded.sums");
    st.bind(1, session).bind(2, version).bind_blob(3, sums);
    st.run();
    return true;
}

std::vector<std::int64_t> SessionStore::unsealed_sessions(std::int64_t below_id, int limit) {
    Statement st = db_.prepare(
        "SELECT s.id FROM sessions s LEFT JOIN session_sums ss ON ss.session_id = s.id WHERE "
        "s.id < ? AND s.state != 'capturing' AND s.summed_seq IS NULL AND (ss.session_id IS NULL "
        "OR ss.aggregate_version != s.aggregate_version) ORDER BY s.id DESC LIMIT ?");
    st.bind(1, below_id).bind(2, limit);
    std::vector<std::int64_t> ids;
    while (st.step()) ids.push_back(st.column_int(0));
    return ids;
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

void SessionStore::set_tasks(std::int64_t session, std::span<const TaskSummary> tasks) {
    Statement clear = db_.prepare("DELETE FROM session_tasks WHERE session_id = ?");
    clear.bind(1, session);
    clear.run();
    Statement st = db_.prepare(
        "INSERT INTO session_tasks (session_id, task, handle, name, samples, switches, deleted) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)");
    for (const auto& t : tasks) {
        st.bind(1, session).bind(2, std::int64_t{t.number}).bind(3, std::int64_t{t.handle});
        st.bind(4, t.name).bind(5, t.samples).bind(6, t.switches).bind(7, t.deleted ? 1 : 0);
        st.run();
    }
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
    Statement unit = db_.prepare("UPDATE sessions SET cct_unit = ? WHERE id = ?");
    unit.bind(1, static_cast<std::int64_t>(tree.unit())).bind(2, session);
    unit.run();
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
        "UPDATE sessions SET target_build_id = ?, target_text_lo = ?, target_text_hi = ?, arch = "
        "CASE WHEN ? = '' THEN arch ELSE ? END WHERE id = ?");
    st.bind(1, target.build_id)
        .bind(2, std::int64_t{target.text_lo})
        .bind(3, std::int64_t{target.text_hi})
        .bind(4, target.arch)
        .bind(5, target.arch)
        .bind(6, session);
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

int SessionStore::interrupt_unfinished(std::int64_t now_ns, std::int64_t below_id) {
    Statement st = db_.prepare(
        "UPDATE sessions SET state = 'interrupted', ended_ns = COALESCE("
        "(SELECT MAX(COALESCE(last_ns, received_ns)) FROM raw_chunks WHERE session_id = "
        "sessions.id), ?) WHERE state = 'capturing' AND id < ?");
    st.bind(1, now_ns);
    st.bind(2, below_id);
    st.run();
    return db_.changes();
}

}  // namespace rackprof::storage
