// The one export seam: every file format rackprof writes (gmon.out, gprof's text, the JSON
// report, the aggregate as CSV, records as NDJSON, raw wire bytes) is an entry here, and
// `rackprof convert --export`, the HTTP API and the dashboard's downloads all go through
// open_export. A format is a pull stream of chunks, so a large export is never whole in
// memory and a slow HTTP client only slows its own stream. New formats plug in here.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gmon/calling_context.h"
#include "gmon/profile_pipeline.h"
#include "gmon/report.h"
#include "protocol/record.h"
#include "protocol/wire_format.h"

namespace rackprof::gmon {

// Records as received, a batch at a time with its receive time (Unix ns).
struct RecordBatch {
    std::int64_t received_ns = 0;
    std::vector<protocol::Record> records;
};
// Pages pulled from wherever the data is kept; nothing at the end.
using RawPages = std::function<std::optional<std::string>()>;
using RecordPages = std::function<std::optional<std::vector<RecordBatch>>()>;

struct ExportInput {
    ProfileSource source;
    nlohmann::json summary = nlohmann::json::object();  // the JSON report's "source"
    RawPages raw;  // empty: there are no raw bytes (an imported gmon.out)
    // How `raw` decodes, for the views that decode it again (tasks, the timeline).
    std::optional<protocol::WireSpec> wire;
    RecordPages records;  // empty: there are no records
    ProfileOptions profile_options;
    JsonReportOptions json_options;
    // Measured from function entry/exit events (null or empty: none were captured); the cct-*
    // formats and the report's "calling_context" use it.
    std::shared_ptr<const CallingContextTree> calling_context;
};

// Thrown when a format that names functions is opened on an input without an ELF (the API
// answers 422 no_elf).
class ExportNeedsElf : public std::invalid_argument {
  public:
    using std::invalid_argument::invalid_argument;
};

// The next chunk of an export; nothing at the end.
using ChunkStream = std::function<std::optional<std::string>()>;

struct ExportFormat {
    std::string_view name;          // as in --export NAME and /export/NAME
    std::string_view content_type;  // for HTTP
    std::string_view file_suffix;   // appended to a download's base name
    std::string_view description;
    bool paged = false;  // many chunks from storage (else one, made whole)
    ChunkStream (*open)(const std::shared_ptr<const ExportInput>& input) = nullptr;
    // Decodes one session's raw bytes again (ExportInput::raw and wire): no merged selection
    // has them.
    bool one_session = false;
    // What a merged selection can export: neither pages of one session's data nor its raw
    // bytes decoded again.
    bool for_selections() const { return !paged && !one_session; }
};

// Every registered format, in the order help texts list them.
std::span<const ExportFormat> export_formats();
const ExportFormat* find_export_format(std::string_view name);
// "gmon, text, json, csv, ndjson, raw, pprof or callgrind".
std::string export_format_names();

// Throws std::invalid_argument for an unknown format; a format that needs what the input
// lacks (records, raw bytes; an ELF: ExportNeedsElf) throws when opened.
ChunkStream open_export(std::string_view format, const std::shared_ptr<const ExportInput>& input);
// Pushes every chunk of an export to `out`.
void export_to(std::string_view format, const std::shared_ptr<const ExportInput>& input,
               const std::function<void(std::string_view chunk)>& out);

// The JSON report (schema rackprof.report/1), whole: what --report json prints.
void write_report_json(JsonStream& out, const ExportInput& input);

}  // namespace rackprof::gmon
