#include "daemon/service/upload_import.h"

#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "daemon/capture/board.h"
#include "daemon/capture/capture_session.h"
#include "daemon/ingest/import_formats.h"
#include "daemon/ingest/wire_settings.h"
#include "gmon/gmon_reader.h"
#include "storage/counters_json.h"

namespace rackprof::daemon::service {

namespace {

using nlohmann::json;

// An imported capture's wire from the query (protocol, addr_bytes and the itm keys, as a
// board's), checked by the same rules as a board's settings.
config::BoardConfig import_wire(const ImportParameters& query, const std::string& format) {
    json board = {{"name", "import"}, {"link", "file:///import"}, {"format", format}};
    if (query.count("protocol")) board["protocol"] = query.at("protocol");
    for (const char* key :
         {"addr_bytes", "tpiu_stream", "framed_port", "orbstat_port", "console_port"}) {
        if (query.count(key)) board[key] = parse_count<int>(query.at(key), key);
    }
    if (query.count("tpiu")) board["tpiu"] = query.at("tpiu") == "true" || query.at("tpiu") == "1";
    try {
        return config::board_from_json(board);
    } catch (const config::BoardFieldError& e) {
        throw ServiceError(Failure::kBadRequest, e.key() + ": " + e.what());
    }
}

// An import's records and raw bytes handed to storage as they come, in pieces of about 1 MiB
// each (a chunk's raw bytes and records need not match: raw chunks are read back in order and
// records are counted wherever they are), so an import of any size holds about two pieces.
class ImportPieces : public protocol::RecordSink {
  public:
    explicit ImportPieces(capture::SessionImport& stored) : stored_(stored) {
        records_.reserve(kRecordsPerPiece);
    }
    void on_records(std::span<const protocol::Record> batch) override {
        if (tasks_.has_tasks()) tasks_.on_records(batch);
        for (const auto& r : batch) {
            records_.push_back(r);
            if (records_.size() == kRecordsPerPiece) append({});
        }
    }
    void on_event(const protocol::StreamEvent& event) override { tasks_.on_event(event); }
    // The RTOS's tasks the stream named (none without task switches).
    std::vector<storage::TaskSummary> tasks() const { return capture::task_summaries(tasks_); }
    // Raw bytes as they are read (64 KiB at a time), gathered into pieces of kRawPerPiece.
    void on_raw(std::span<const std::uint8_t> bytes) {
        so_far_.bytes_in += bytes.size();
        raw_.insert(raw_.end(), bytes.begin(), bytes.end());
        if (raw_.size() >= kRawPerPiece) append(std::exchange(raw_, {}));
    }
    // The last piece; a session with no records at all still gets one (empty) piece.
    void finish() {
        if (!records_.empty() || !raw_.empty() || !appended_) append(std::exchange(raw_, {}));
    }

  private:
    static constexpr std::size_t kRecordsPerPiece = 64 * 1024;  // 1 MiB of records
    static constexpr std::size_t kRawPerPiece = 1 << 20;

    void append(std::vector<std::uint8_t> raw) {
        std::vector<protocol::Record> records;
        records.reserve(kRecordsPerPiece);
        records.swap(records_);
        stored_.append(std::move(raw), std::move(records), so_far_);
        appended_ = true;
    }

    capture::SessionImport& stored_;
    std::vector<protocol::Record> records_;
    std::vector<std::uint8_t> raw_;
    storage::SessionCounters so_far_;  // what the session shows while the import goes on
    bool appended_ = false;
    gmon::TaskSplit tasks_{gmon::TaskSplitOptions{.events = false}};
};

}  // namespace

std::vector<std::int64_t> UploadImport::import(const std::filesystem::path& file,
                                               const ImportParameters& query) {
    // Its records would be counted lost, not stored: refused, for the client to try again.
    if (const storage::StorageHealth health = capture_.storage_health(); health.failing)
        throw ServiceError(Failure::kNotReady,
                           "storage is failing (" + health.error + "): import again later");
    const std::string format = query.count("format") ? query.at("format") : "bin";
    const ingest::ImportFormat* kind = ingest::find_import_format(format);
    if (!kind || !kind->uploadable)
        throw ServiceError(Failure::kBadRequest,
                           "format must be " + ingest::import_format_names(true));
    const bool histogram_file = kind->kind != ingest::InputKind::kCapture;
    const config::BoardConfig wire_settings = import_wire(query, histogram_file ? "bin" : format);
    std::shared_ptr<const gmon::Symbolizer> elf;
    storage::NewSession spec;
    spec.board = query.count("board") ? query.at("board") : "import";
    try {
        config::validate_board_name(spec.board);  // it reaches file names and log lines
    } catch (const config::BoardFieldError& e) {
        throw ServiceError(Failure::kBadRequest, std::string("board: ") + e.what());
    }
    spec.link = "import";
    spec.protocol = wire_settings.protocol;
    spec.format = format;
    spec.addr_bytes = wire_settings.addr_bytes;
    spec.started_ns = capture::unix_now_ns();
    if (query.count("firmware")) {
        const std::string id = query.at("firmware");
        const auto path = firmware_.find(id);
        if (!path) throw ServiceError(Failure::kNotFound, "no firmware " + id);
        elf = elves_.get(path->string());
        spec.elf_path = path->string();
        spec.elf_build_id = elf->build_id();
        spec.elf_sha256 = capture::file_sha256(*path);
        spec.arch = elf->arch();
    }
    ingest::ImportSpec import;
    import.kind = kind->kind;
    import.wire = ingest::wire_spec_of(wire_settings);
    import.wire.code_range = ingest::decode_range_of(elf.get());
    import.layout = elf ? elf->layout() : gmon::TargetLayout{};
    const std::string reports = query.count("reports") ? query.at("reports") : "each";
    if (reports != "each" && reports != "sum")
        throw ServiceError(Failure::kBadRequest, "reports must be each or sum");
    if (import.kind == ingest::InputKind::kGmon) return {import_gmon(file, import, spec)};
    if (import.kind == ingest::InputKind::kTiva) return import_tiva(file, reports == "sum", spec);
    return {import_capture(file, import, spec)};
}

// A gmon.out is mapped, not read whole: its histograms' shapes go with the session's row,
// then its records are stored in pieces as its bins are read (no raw bytes).
std::int64_t UploadImport::import_gmon(const std::filesystem::path& file,
                                       const ingest::ImportSpec& import, storage::NewSession spec) {
    const auto bad_gmon = [&](const gmon::GmonFormatError& e) {
        std::string why = e.what();  // without the upload's path, which is the daemon's business
        if (why.starts_with(file.string() + ": ")) why.erase(0, file.string().size() + 2);
        throw ServiceError(Failure::kBadGmon, why);
    };
    std::optional<ingest::GmonFile> gmon_file;
    try {
        gmon_file.emplace(file, import.layout);
    } catch (const gmon::GmonFormatError& e) {
        bad_gmon(e);
    }
    spec.histograms = gmon_file->histograms();  // its own ranges and rate, exactly
    const auto stored = capture_.begin_import(spec);
    ImportPieces pieces(*stored);
    ingest::Imported imported;
    try {
        imported = gmon_file->emit(pieces);
    } catch (const gmon::GmonFormatError& e) {
        bad_gmon(e);
    }
    pieces.finish();
    storage::SessionCounters counters;
    storage::set_decoder_counters(counters, imported.stats);
    return stored->complete(counters);
}

// A Tiva binned PC report becomes sessions as a gmon.out does: its histogram's shape (512
// bins of 64 bytes, 100 Hz) with each session's row, its bins as PC-sample records; a session
// per report, or one for their sum. What the reader skipped and missed goes with each session
// (wire_options "tiva"), beside which report it is.
std::vector<std::int64_t> UploadImport::import_tiva(const std::filesystem::path& file, bool summed,
                                                    const storage::NewSession& spec) {
    std::optional<gmon::TivaReport> all;
    try {
        all = ingest::read_tiva_file(file);
    } catch (const gmon::TivaFormatError& e) {
        std::string why = e.what();  // without the upload's path, which is the daemon's business
        if (why.starts_with(file.string() + ": ")) why.erase(0, file.string().size() + 2);
        throw ServiceError(Failure::kBadGmon, why);
    }
    std::error_code ec;
    const std::uint64_t bytes_in = std::filesystem::file_size(file, ec);
    json found = {{"reports", all->reports},
                  {"lines_skipped", all->lines_skipped},
                  {"lines_unread", all->lines_unread},
                  {"samples_outside", all->samples_outside}};
    if (summed) {
        storage::NewSession one = spec;
        found["summed"] = true;
        found["bins_missing"] = all->bins_missing;
        one.wire_options = json{{"tiva", found}}.dump();
        return {store_tiva(*all, ec ? 0 : bytes_in, std::move(one))};
    }
    std::vector<std::int64_t> ids;
    for (std::size_t i = 0; i < all->reports; ++i) {
        const gmon::TivaSection& part = all->parts[i];
        storage::NewSession one = spec;
        found["report"] = i + 1;
        found["number"] = part.number;  // its DONE COLLECTING (N); 0 when that line was lost
        found["first_line"] = part.first_line;
        found["bins_missing"] = part.bins_missing;
        one.wire_options = json{{"tiva", found}}.dump();
        ids.push_back(
            store_tiva(gmon::only_report(*all, i), i == 0 && !ec ? bytes_in : 0, std::move(one)));
    }
    return ids;
}

std::int64_t UploadImport::store_tiva(const gmon::TivaReport& report, std::uint64_t bytes_in,
                                      storage::NewSession spec) {
    spec.histograms = {report.shape};
    const auto stored = capture_.begin_import(spec);
    ImportPieces pieces(*stored);
    const ingest::Imported imported = ingest::emit_tiva(report, bytes_in, pieces);
    pieces.finish();
    storage::SessionCounters counters;
    storage::set_decoder_counters(counters, imported.stats);
    return stored->complete(counters);
}

std::int64_t UploadImport::import_capture(const std::filesystem::path& file,
                                          const ingest::ImportSpec& import,
                                          storage::NewSession spec) {
    spec.wire_options = ingest::wire_options_json(import.wire);
    const auto stored = capture_.begin_import(spec);
    ImportPieces pieces(*stored);
    const ingest::Imported imported =
        ingest::import_file(file, import, pieces, {},
                            [&](std::span<const std::uint8_t> bytes) { pieces.on_raw(bytes); });
    if (imported.stats.records() == 0)
        throw ServiceError(Failure::kNoRecords,
                           "no records found: check format, protocol and addr_bytes");
    pieces.finish();
    storage::SessionCounters counters;
    storage::set_decoder_counters(counters, imported.stats);
    return stored->complete(counters, imported.calling_context, pieces.tasks());
}

}  // namespace rackprof::daemon::service
