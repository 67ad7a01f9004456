#include "storage/session_store.h"

#include <nlohmann/json.hpp>

#include "protocol/wire_format.h"
#include "storage/session_rows.h"

#include <algorithm>
#include <cstddef>
#include <string>

namespace rackprof::storage {

namespace detail {

bool plain_row(const Statement& row, int encoding_column) {
    const std::int64_t encoding = row.column_int(encoding_column);
    if (encoding == static_cast<std::int64_t>(BlockEncoding::kPlainChunk)) return true;
    if (is_block_encoding(encoding)) return false;
    throw StorageError("a stored chunk has an unknown encoding " + std::to_string(encoding));
}
BlockEncoding encoding_of(const Statement& row, int encoding_column) {
    return static_cast<BlockEncoding>(row.column_int(encoding_column));
}

std::vector<DecodedRecordChunk> record_chunks_of(const Statement& row, std::int64_t row_seq) {
    if (!plain_row(row, 2))
        return decode_record_block(row.column_blob(1), row.column_int(0), row_seq,
                                   encoding_of(row, 2));
    std::vector<DecodedRecordChunk> one;
    one.push_back({row.column_int(0), unpack_records(row.column_blob(1)), row_seq});
    return one;
}

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

}  // namespace detail

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

SessionStore::SessionStore(const std::filesystem::path& path, Database::Mode mode)
    : db_(path, mode) {
    if (mode == Database::Mode::kReadWrite) migrate_schema(db_);
    has_cct_ = schema_version(db_) >= kCallingContextSchema;
    has_slices_ = schema_version(db_) >= kRecordSlicesSchema;
    has_retention_ = schema_version(db_) >= kRetentionSchema;
    has_sums_ = schema_version(db_) >= kSessionSumsSchema;
    has_probe_counters_ = schema_version(db_) >= kProbeCountersSchema;
    has_arch_ = schema_version(db_) >= kArchSchema;
    has_tasks_ = schema_version(db_) >= kTasksSchema;
}

Statement& SessionStore::cached(std::optional<Statement>& slot, const char* sql) {
    if (!slot) slot.emplace(db_.prepare(sql));
    return *slot;
}

}  // namespace rackprof::storage
