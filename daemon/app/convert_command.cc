// `rackprof convert`: a capture (or a gmon.out) in, gmon.out and a profile report out.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>

#include "daemon/app/commands.h"
#include "daemon/app/decode_summary.h"
#include "daemon/app/profile_inputs.h"
#include "daemon/capture/capture_session.h"
#include "daemon/config/config.h"
#include "daemon/ingest/capture_import.h"
#include "daemon/ingest/import_formats.h"
#include "daemon/ingest/wire_settings.h"
#include "daemon/service/rack_service.h"
#include "daemon/service/selection.h"
#include "daemon/service/stored_session_input.h"
#include "gmon/calling_context_export.h"
#include "gmon/elf_fit.h"
#include "gmon/export.h"
#include "gmon/gmon_reader.h"
#include "gmon/gmon_writer.h"
#include "gmon/profile_pipeline.h"
#include "gmon/symbolizer.h"
#include "protocol/wire_format.h"
#include "storage/counters_json.h"
#include "storage/session_store.h"

namespace rackprof::daemon::app {

namespace {

constexpr const char* kConvertAbout = R"(rackprof convert CAPTURE [options]
rackprof convert --db FILE --session ID [--redecode] [options]
rackprof convert --db FILE --select SELECTION [--config FILE] [options]

Decodes a capture (the thesis' legacy wire format, binary or hex-ASCII text, the rackprof
framed protocol, or SWO: ITM packets, raw or in TPIU frames), writes a gmon.out that GNU gprof
reads, and prints the profile. CAPTURE may also be a gmon.out (GNU format detected by its
magic; BSD formats with --format gmon), to profile it directly.

A stored session (--db, --session) is profiled from its aggregates; --redecode decodes its
raw bytes again instead (with --protocol/--format/--addr-bytes overriding what was captured
with). --select merges the stored aggregates of several sessions of one build, named as the
API's /api/v1/profile names them: 'build_id=3f2a..&board=a,b&from=NS&to=NS&session=1,2'
(tag= needs --config FILE: tags are the configuration's).
)";

// The help's footer with the export formats as registered (gmon/export.h): a format added
// there is listed here with no more code. A capture file's records have receive time 0.
std::string about() {
    std::string out = kConvertAbout;
    out += "\nexport formats (--export):\n";
    for (const auto& f : gmon::export_formats()) {
        std::string name(f.name);
        name.resize(std::max<std::size_t>(name.size() + 2, 12), ' ');
        out += "  " + name + std::string(f.description) + "\n";
    }
    return out;
}

// Captures that mostly fail to decode against the given ELF are the wrong pairing.
constexpr double kWrongElfDiscardFraction = 0.5;

void print_progress(std::uint64_t done, std::uint64_t total) {
    static int last = -1;
    if (total == 0) return;
    const int percent = static_cast<int>(done * 100 / total);
    if (percent == last) return;
    last = percent;
    std::fprintf(stderr, "\rrackprof: decoding %3d%% (%llu of %llu MB)", percent,
                 static_cast<unsigned long long>(done >> 20),
                 static_cast<unsigned long long>(total >> 20));
    if (done >= total) std::fputs("\r\033[K", stderr);
}

using service::exceptions_json;

// Console lines on stderr, as `console: LINE`. They come by the thousand and stderr is
// unbuffered (three writes a line made convert with a console port 15x slower), so they are
// gathered and written in large pieces: when the buffer fills, before any other message and
// at the end, also when an error unwinds the conversion.
class ConsoleOutput {
  public:
    ConsoleOutput() = default;
    ConsoleOutput(const ConsoleOutput&) = delete;
    ConsoleOutput& operator=(const ConsoleOutput&) = delete;
    ~ConsoleOutput() { flush(); }

    // The line as the target printed it, without its newline, control characters shown as '.'.
    void line(const protocol::ConsoleText& line) {
        std::string_view text = line.text;
        if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
        if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
        buffer_ += "console: ";
        // The target's bytes, not ours: control characters would drive the terminal.
        for (const char c : text) {
            const bool control = (static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7F;
            buffer_ += control ? '.' : c;
        }
        buffer_ += '\n';
        if (buffer_.size() >= kFlushBytes) flush();
    }

    void flush() {
        if (buffer_.empty()) return;
        std::cerr.write(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
        buffer_.clear();
    }

  private:
    static constexpr std::size_t kFlushBytes = 64 * 1024;
    std::string buffer_;
};

// The whole conversion: an ExportInput (profile source, summary, records and raw pages),
// whatever the input was.
struct ConvertOptions {
    std::string protocol;  // a registered wire format
    std::string format;    // auto | bin | hex | gmon
    std::string report;    // text | json | none
    int addr_bytes = 3;
    protocol::SwoOptions swo;  // itm
    std::uint32_t rate = 1000;
    std::uint32_t bin_bytes = 2;
    gmon::TivaShape tiva;                    // the sampler's constants
    std::optional<std::size_t> tiva_report;  // 0-based; none: all summed
    gmon::JsonReportOptions json;
    std::shared_ptr<const gmon::Symbolizer> elf;
    bool elf_missing_reported = false;  // a stored session's ELF is gone: said once, not twice
};

struct Converted {
    std::shared_ptr<gmon::ExportInput> input = std::make_shared<gmon::ExportInput>();
    std::optional<std::filesystem::path> default_output;
};

gmon::TargetLayout layout_of(const ConvertOptions& o) {
    return o.elf ? o.elf->layout() : gmon::TargetLayout{};
}

// Whether `file` parses as a gmon.out (the BSD layouts carry no magic number).
bool reads_as_gmon(const std::filesystem::path& file, const gmon::TargetLayout& layout) {
    try {
        const gmon::GmonData data = gmon::read_gmon_file(file, layout);
        return !data.histograms.empty() || !data.arcs.empty();
    } catch (const std::exception&) {
        return false;
    }
}

// Checks that the records are plausible: a capture that mostly fails to decode against the
// given ELF is the wrong pairing, and one that yields nothing says what to check.
void check_decoded(const protocol::DecoderStats& stats, const ConvertOptions& o,
                   const std::string& what) {
    // Framed records are checked by CRC, not by the ELF's code range: a framed stream that
    // yields nothing is damage (or not framed at all), never the wrong ELF.
    const bool framed = stats.frames + stats.frames_bad > 0;
    if (stats.records() == 0) {
        if (framed) {
            throw std::runtime_error("no records in " + what + ": " +
                                     std::to_string(stats.frames_bad) + " bad frames, " +
                                     std::to_string(stats.frames) +
                                     " good ones without records: is it a framed capture?");
        }
        if (o.elf) {
            throw std::runtime_error(
                "no records in " + what + " fit the code range of " + o.elf->path().string() +
                " (" + gmon::hex_address(o.elf->code_low()) + "-" +
                gmon::hex_address(o.elf->code_high()) +
                "): wrong ELF for this capture, or check --protocol, --format and --addr-bytes");
        }
        throw std::runtime_error("no records found in " + what +
                                 ": check --protocol, --format and --addr-bytes");
    }
    if (o.elf && !framed &&
        stats.bytes_discarded > kWrongElfDiscardFraction * static_cast<double>(stats.bytes_in)) {
        throw std::runtime_error(
            std::to_string(stats.bytes_discarded) + " of " + std::to_string(stats.bytes_in) +
            " bytes did not decode to records inside " + o.elf->path().string() +
            "'s code range: wrong ELF for this capture, or check --protocol and --addr-bytes");
    }
    if (!o.elf &&
        stats.bytes_discarded > kWrongElfDiscardFraction * static_cast<double>(stats.bytes_in)) {
        std::cerr << "rackprof: warning: most bytes of " << what
                  << " decoded to nothing: check --protocol, --format and --addr-bytes\n";
    }
}

// Unless the target named this very ELF by its build-id, the capture is checked against the
// ELF's code (gmon/elf_fit.h): call targets at function entries, PC samples on instructions.
// A capture that does not fit is refused with the evidence, or with --force profiled anyway.
void check_fit(const gmon::ExportInput& in, const ConvertOptions& o, bool force) {
    if (!o.elf || !in.source.aggregate) return;
    // The target said what core it is: code of another family is refused before anything else.
    storage::TargetInfo said;
    if (const auto arch = in.summary.find("target_arch");
        arch != in.summary.end() && arch->is_string())
        said.arch = arch->get<std::string>();
    if (const std::string conflict = ingest::arch_conflict(said, *o.elf); !conflict.empty()) {
        if (!force)
            throw std::runtime_error(conflict +
                                     ": wrong ELF for this capture (--force profiles it anyway)");
        std::cerr << "rackprof: warning: " << conflict << " (profiled anyway: --force)\n";
    }
    const auto named = in.summary.find("target_build_id");
    if (named != in.summary.end() && named->is_string() && !named->get<std::string>().empty() &&
        named->get<std::string>() == o.elf->build_id())
        return;
    const gmon::ElfFit fit = gmon::check_elf_fit(*in.source.aggregate, *o.elf);
    if (!fit.suspicious()) return;
    const std::string evidence =
        fit.evidence(o.elf->path().filename().string()) + ": wrong ELF for this capture?";
    if (!force) throw std::runtime_error(evidence + " (--force profiles it anyway)");
    std::cerr << "rackprof: warning: " << evidence << " (profiled anyway: --force)\n";
}

// A capture of a framed target names its firmware: say so when the ELF given is another one.
void warn_on_build_id_mismatch(const ConvertOptions& o, const storage::TargetInfo& target) {
    if (o.elf && !target.build_id.empty() && !o.elf->build_id().empty() &&
        o.elf->build_id() != target.build_id) {
        std::cerr << "rackprof: warning: " << o.elf->path().string() << " has build-id "
                  << o.elf->build_id() << ", but the target runs " << target.build_id
                  << ": symbols may be wrong\n";
    }
}

// The pipeline's source for decoded data: the aggregate binned at --rate/--bin-bytes.
gmon::ProfileSource source_of(gmon::Aggregate aggregate, const ConvertOptions& o,
                              const storage::TargetInfo& target) {
    gmon::ProfileSource source;
    source.aggregate = std::make_shared<const gmon::Aggregate>(std::move(aggregate));
    source.elf = o.elf;
    source.announced_range = ingest::announced_range(target);
    source.prof_rate = o.rate;
    source.bin_bytes = o.bin_bytes;
    return source;
}

// A capture file read again, a page of records at a time (a file has no receive times: 0).
gmon::RecordPages file_record_pages(const std::filesystem::path& input,
                                    const protocol::WireSpec& wire) {
    struct Reader {
        std::ifstream file;
        std::unique_ptr<protocol::StreamDecoder> decoder;
        ingest::RecordCollector collected;
        bool done = false;
    };
    auto reader = std::make_shared<Reader>();
    reader->file.open(input, std::ios::binary);
    reader->decoder = protocol::make_decoder(wire);
    return [reader]() -> std::optional<std::vector<gmon::RecordBatch>> {
        if (reader->done) return std::nullopt;
        std::vector<char> buffer(1 << 20);
        reader->file.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
        const auto n = static_cast<std::size_t>(reader->file.gcount());
        reader->collected.records.clear();
        reader->decoder->feed(std::span(reinterpret_cast<const std::uint8_t*>(buffer.data()), n),
                              reader->collected);
        if (n == 0) {
            reader->decoder->finish(reader->collected);
            reader->done = true;
        }
        return std::vector<gmon::RecordBatch>{{0, std::move(reader->collected.records)}};
    };
}

gmon::RawPages file_raw_pages(const std::filesystem::path& input) {
    auto file = std::make_shared<std::ifstream>(input, std::ios::binary);
    return [file]() -> std::optional<std::string> {
        std::string page(1 << 20, '\0');
        file->read(page.data(), static_cast<std::streamsize>(page.size()));
        page.resize(static_cast<std::size_t>(file->gcount()));
        if (page.empty()) return std::nullopt;
        return page;
    };
}

// Enter/exit events (framed ENTER/EXIT, orbstat): how many were decoded and where some may be
// missing, on stderr and in the summary. Captures without any say nothing.
void report_events(const ingest::Imported& imported, nlohmann::json& summary) {
    if (imported.function_events == 0 && imported.events_lost == 0) return;
    std::cerr << "rackprof: " << imported.function_events << " enter/exit events";
    if (imported.events_lost > 0)
        std::cerr << ", " << imported.events_lost << " place(s) where some were lost";
    std::cerr << "\n";
    summary["function_events"] = imported.function_events;
    summary["events_lost"] = imported.events_lost;
}

// What a Tiva file held and which of it is profiled, on stderr and in the summary: convert
// writes one profile, so a file of several reports is their sum unless --tiva-report names one.
void report_tiva(const gmon::TivaReport& all, std::optional<std::size_t> which,
                 nlohmann::json& summary) {
    std::cerr << "rackprof: a Tiva report file of " << all.reports << " report(s): ";
    if (which)
        std::cerr << "report " << *which + 1 << " profiled (--tiva-report)";
    else if (all.reports > 1)
        std::cerr << "summed (one profile; --tiva-report N profiles one, and the daemon's import "
                     "makes a session of each)";
    else
        std::cerr << "profiled";
    std::cerr << "; " << all.lines_skipped << " other line(s) skipped, " << all.lines_unread
              << " bin line(s) unreadable, " << all.bins_missing << " bin(s) missing, "
              << all.samples_outside << " sample(s) outside the bins\n";
    summary["tiva"] = {{"reports", all.reports},
                       {"profiled", which ? nlohmann::json(*which + 1) : nlohmann::json("sum")},
                       {"lines_skipped", all.lines_skipped},
                       {"lines_unread", all.lines_unread},
                       {"bins_missing", all.bins_missing},
                       {"samples_outside", all.samples_outside}};
}

Converted from_file(const std::filesystem::path& input, const ConvertOptions& o) {
    const ingest::ImportFormat* format = ingest::find_import_format(o.format);
    if (!format) throw UsageError("--format: must be " + ingest::import_format_names(false));
    ingest::ImportSpec spec;
    spec.kind = format->kind;
    spec.wire = protocol::WireSpec{o.protocol, std::string(format->wire_encoding), o.addr_bytes,
                                   ingest::decode_range_of(o.elf.get()), o.swo};
    if (!protocol::wire_format(o.protocol).traits.text_encoding) {
        if (o.format == "hex")
            throw UsageError("--protocol " + o.protocol + " is binary: no --format hex");
        if (o.format == "auto") spec.wire.format = "bin";
    }
    spec.layout = layout_of(o);
    spec.tiva = o.tiva;
    spec.tiva_report = o.tiva_report;
    gmon::Aggregate aggregate;
    ConsoleOutput console;
    ingest::AggregateImportSink sink(aggregate,
                                     [&](const protocol::ConsoleText& l) { console.line(l); });
    const bool tty = ::isatty(STDERR_FILENO) == 1;
    const auto progress = [&](std::uint64_t done, std::uint64_t total) {
        console.flush();  // the lines before it stay before it
        print_progress(done, total);
    };
    const auto imported =
        ingest::import_file(input, spec, sink, tty ? ingest::ProgressCallback(progress) : nullptr);
    console.flush();
    Converted c;
    auto& in = *c.input;
    if (imported.kind == ingest::InputKind::kGmon || imported.kind == ingest::InputKind::kTiva) {
        std::cerr << "rackprof: read " << input.string() << ": " << imported.histograms.size()
                  << " histogram(s), " << imported.stats.pc_samples << " samples, "
                  << aggregate.distinct_arcs() << " arcs\n";
        in.source = source_of(std::move(aggregate), o, {});
        in.source.histograms = imported.histograms;  // its own ranges and rate, exactly
        in.summary = {{"input", input.string()}, {"format", imported.format}};
        if (imported.tiva) report_tiva(*imported.tiva, o.tiva_report, in.summary);
        return c;
    }
    std::cerr << "rackprof: " << summary_line(imported.stats, aggregate) << "\n";
    report_events(imported, in.summary);
    const auto target =
        imported.hello ? ingest::target_info_of(*imported.hello) : storage::TargetInfo{};
    warn_on_build_id_mismatch(o, target);
    try {
        check_decoded(imported.stats, o, input.string());
    } catch (const std::runtime_error& e) {
        if (o.format != "auto" || !reads_as_gmon(input, layout_of(o))) throw;
        // A BSD gmon.out has no magic to detect it by; say what it is instead of blaming the ELF.
        throw std::runtime_error(std::string(e.what()) + "\n" + input.string() +
                                 " reads as a BSD gmon.out: give --format gmon to profile it");
    }
    in.source = source_of(std::move(aggregate), o, target);
    in.summary["decoder"] = storage::decoder_stats_json(imported.stats);
    in.summary["input"] = input.string();
    in.summary["protocol"] = o.protocol;
    in.summary["format"] = imported.format;
    in.summary["addr_bytes"] = imported.hello ? imported.hello->addr_bytes : o.addr_bytes;
    if (imported.hello) in.summary["target_build_id"] = target.build_id;
    if (!target.arch.empty()) in.summary["target_arch"] = target.arch;
    if (protocol::wire_format(o.protocol).traits.swo)
        in.summary["exceptions"] = exceptions_json(imported.exceptions);
    in.calling_context = imported.calling_context;
    protocol::WireSpec wire = spec.wire;
    wire.format = imported.format;
    in.records = file_record_pages(input, wire);
    in.raw = file_raw_pages(input);
    in.wire = wire;
    c.default_output = "gmon.out";
    return c;
}

// The ELF a stored session names. Older databases stored it relative to the daemon's
// working directory (the embedded default: var/firmware/x.elf beside var/rackprof.db), so a
// relative path is also tried against the database's folder and the one above it.
std::optional<std::filesystem::path> stored_elf(const std::filesystem::path& stored,
                                                const std::filesystem::path& db) {
    std::vector<std::filesystem::path> candidates = {stored};
    if (stored.is_relative()) {
        const auto db_dir = std::filesystem::absolute(db).parent_path();
        candidates.push_back(db_dir / stored);
        candidates.push_back(db_dir.parent_path() / stored);
    }
    for (const auto& path : candidates) {
        std::error_code ec;
        if (std::filesystem::is_regular_file(path, ec)) return path;
    }
    return std::nullopt;
}

// Sessions the daemon stored, merged: the one merge the API's fleet profile uses.
Converted from_selection(const std::filesystem::path& db, const std::string& text,
                         const ConvertOptions& o, const std::optional<std::string>& config) {
    if (!std::filesystem::exists(db)) throw std::runtime_error("no such database: " + db.string());
    try {
        const service::Selection selection =
            service::parse_selection(service::parse_query_string(text));
        std::map<std::string, std::vector<std::string>> boards_by_tag;
        if (!selection.tags.empty()) {
            if (!config)
                throw UsageError(
                    "--select with tag= needs --config FILE (tags are the "
                    "configuration's)");
            for (const auto& b : config::load_config(*config).boards) {
                for (const auto& tag : b.tags) boards_by_tag[tag].push_back(b.name);
            }
        }
        auto store =
            std::make_shared<storage::SessionStore>(db, storage::Database::Mode::kReadOnly);
        Converted c;
        const auto sessions = service::select_sessions(selection, store->sessions(), boards_by_tag);
        // task=: each session decoded again, its tasks' records and trees.
        std::map<std::int64_t, service::TaskSlice> slices;
        for (const auto& s : selection.tasks.empty() ? decltype(sessions){} : sessions)
            slices[s.id] = service::task_slice(*store, s, selection.tasks);
        c.input = service::merged_input(
            sessions,
            [&](std::int64_t id) -> std::shared_ptr<const gmon::Aggregate> {
                if (!selection.tasks.empty()) return slices.at(id).aggregate;
                return std::make_shared<const gmon::Aggregate>(store->aggregate(id));
            },
            [&](const std::string& path) {
                return gmon::Symbolizer::load(stored_elf(path, db).value_or(path));
            },
            selection.by_name);
        if (o.elf) c.input->source.elf = o.elf;
        if (!selection.tasks.empty()) {
            c.input->summary["tasks"] = selection.tasks;
            auto tree = std::make_shared<gmon::CallingContextTree>();
            for (const auto& [id, slice] : slices) tree->merge(*slice.tree);
            if (!tree->empty() && !selection.by_name) c.input->calling_context = std::move(tree);
        }
        const auto& summary = c.input->summary;
        std::cerr << "rackprof: merged " << summary["sessions"].size() << " session(s) of "
                  << summary["boards"].size() << " board(s), build "
                  << (summary["build_id"].is_string() ? summary["build_id"].get<std::string>()
                                                      : std::string("unknown"))
                  << "\n";
        c.default_output = "gmon.out";
        return c;
    } catch (const service::ServiceError& e) {
        if (e.failure() == service::Failure::kBadRequest) throw UsageError(e.what());
        throw std::runtime_error(e.what());
    }
}

// A stored session's raw bytes decoded again, with the options' wire settings over its own.
void redecode_into(gmon::ExportInput& in, storage::SessionStore& store,
                   const storage::SessionInfo& info, std::int64_t id, const std::string& what,
                   const ConvertOptions& o, const ProfileInputArgs& args) {
    protocol::WireSpec wire = ingest::wire_spec_of(info.spec);
    if (args.protocol) {
        wire.protocol = o.protocol;
        wire.swo = o.swo;
    }
    if (o.format != "auto") wire.format = o.format;
    if (args.addr_bytes) wire.addr_bytes = o.addr_bytes;
    wire.code_range = ingest::decode_range_of(o.elf.get());
    gmon::Aggregate aggregate;
    ConsoleOutput console;
    ingest::AggregateImportSink sink(aggregate,
                                     [&](const protocol::ConsoleText& l) { console.line(l); });
    const auto imported = ingest::redecode_session(store, id, wire, sink);
    console.flush();
    std::cerr << "rackprof: re-decoded " << what << ": " << summary_line(imported.stats, aggregate)
              << "\n";
    report_events(imported, in.summary);
    check_decoded(imported.stats, o, what);
    in.source = source_of(std::move(aggregate), o,
                          imported.hello ? ingest::target_info_of(*imported.hello) : info.target);
    in.summary["decoder"] = storage::decoder_stats_json(imported.stats);
    if (protocol::wire_format(wire.protocol).traits.swo)
        in.summary["exceptions"] = exceptions_json(imported.exceptions);
    in.calling_context = imported.calling_context;
}

// A stored session's aggregates as captured: the daemon's export input of it, at --rate and
// --bin-bytes (an imported gmon.out's own histograms keep theirs).
std::shared_ptr<gmon::ExportInput> stored_input(std::shared_ptr<storage::SessionStore> store,
                                                const storage::SessionInfo& info,
                                                const std::string& what, const ConvertOptions& o) {
    const auto& k = info.counters;
    const protocol::DecoderStats stats = storage::decoder_counters(k);
    auto aggregate = std::make_shared<const gmon::Aggregate>(store->aggregate(info.id));
    std::cerr << "rackprof: " << what << " (" << info.spec.board << ", " << info.state
              << "): " << summary_line(stats, *aggregate) << "; " << k.gaps << " gaps, "
              << k.records_lost << " records lost\n";
    check_decoded(stats, o, what);
    std::shared_ptr<const gmon::CallingContextTree> calling_context;
    if (auto tree = store->calling_context(info.id); !tree.empty())
        calling_context = std::make_shared<const gmon::CallingContextTree>(std::move(tree));
    auto input = service::stored_session_input(
        info, {std::move(aggregate), o.elf, std::move(calling_context)}, [store] { return store; });
    input->source.prof_rate = o.rate;
    input->source.bin_bytes = o.bin_bytes;
    return input;
}

// A session the daemon stored: its aggregates as captured, or its raw bytes decoded again.
Converted from_session(const std::filesystem::path& db, std::int64_t id, bool redecode,
                       ConvertOptions& o, const ProfileInputArgs& args) {
    if (!std::filesystem::exists(db)) throw std::runtime_error("no such database: " + db.string());
    auto store = std::make_shared<storage::SessionStore>(db, storage::Database::Mode::kReadOnly);
    const auto info = store->session(id);
    if (!info) throw std::runtime_error("no session " + std::to_string(id) + " in " + db.string());
    if (!o.elf && !info->spec.elf_path.empty()) {
        if (const auto found = stored_elf(info->spec.elf_path, db)) {
            o.elf = gmon::Symbolizer::load(*found);
        } else {
            std::cerr << "rackprof: warning: session " << id << " was captured with the ELF "
                      << info->spec.elf_path
                      << ", which is not there from here; give --elf FILE for function names\n";
            o.elf_missing_reported = true;
        }
    }
    const std::string what = "session " + std::to_string(id);
    if (redecode && info->raw_pruned) {
        throw std::runtime_error(what + " cannot be re-decoded: its " +
                                 storage::raw_pruned_reason(*info->raw_pruned) +
                                 "; its aggregates are kept (convert it without --redecode)");
    }
    Converted c;
    if (redecode) {
        // The stored session's input, its source and decoder counters decoded again.
        c.input = service::stored_session_input(*info, {nullptr, o.elf, nullptr},
                                                [store] { return store; });
        redecode_into(*c.input, *store, *info, id, what, o, args);
    } else {
        c.input = stored_input(store, *info, what, o);
    }
    c.default_output = "gmon.out";
    return c;
}

// The itm options; each is an error with another protocol (it would silently do nothing).
// Their ranges were checked as they were parsed.
protocol::SwoOptions swo_options(const ProfileInputArgs& args, const std::string& wire_protocol) {
    protocol::SwoOptions swo;
    const auto& format = protocol::wire_format(wire_protocol);
    for (const auto& [given, flag, key] :
         {std::tuple{args.tpiu, "--tpiu", "tpiu"},
          std::tuple{args.tpiu_stream.has_value(), "--tpiu-stream", "tpiu_stream"},
          std::tuple{args.framed_port.has_value(), "--framed-port", "framed_port"},
          std::tuple{args.orbstat_port.has_value(), "--orbstat-port", "orbstat_port"},
          std::tuple{args.console_port.has_value(), "--console-port", "console_port"}}) {
        if (given && !protocol::accepts_key(format, key)) {
            std::string names = protocol::protocols_with_key(key);
            std::erase(names, '"');
            throw UsageError(std::string(flag) + " is for --protocol " + names + " only");
        }
    }
    const auto port = [](const std::optional<unsigned>& n) -> std::optional<std::uint16_t> {
        if (!n) return std::nullopt;
        return static_cast<std::uint16_t>(*n);
    };
    swo.tpiu = args.tpiu;
    swo.tpiu_stream = static_cast<std::uint8_t>(args.tpiu_stream.value_or(1));
    swo.framed_port = port(args.framed_port);
    swo.orbstat_port = port(args.orbstat_port);
    swo.console_port = port(args.console_port);
    try {
        protocol::validate(swo);
    } catch (const std::invalid_argument& e) {
        throw UsageError("--protocol " + wire_protocol + ": " + e.what());
    }
    return swo;
}

std::vector<std::string> protocol_names() {
    std::vector<std::string> names;
    for (const auto& f : protocol::wire_formats()) names.emplace_back(f.name);
    return names;
}

std::vector<std::string> export_names() {
    std::vector<std::string> names;
    for (const auto& f : gmon::export_formats()) names.emplace_back(f.name);
    return names;
}

// How the input is decoded; the values' ranges were checked as they were parsed.
ConvertOptions decode_options(const ProfileInputArgs& args) {
    ConvertOptions o;
    o.protocol = args.protocol.value_or("legacy");
    o.format = args.format;
    o.addr_bytes = args.addr_bytes.value_or(protocol::wire_format(o.protocol).default_addr_bytes);
    o.swo = swo_options(args, o.protocol);
    o.rate = args.rate.value_or(1000);
    o.bin_bytes = args.bin_bytes.value_or(2);
    o.tiva.rate = args.rate.value_or(gmon::kTivaRate);
    o.tiva.bin_bytes = args.bin_bytes.value_or(gmon::kTivaBinBytes);
    if (args.tiva_report) o.tiva_report = *args.tiva_report - 1;
    if (args.elf) o.elf = gmon::Symbolizer::load(*args.elf);
    if (args.map) {
        o.elf = gmon::Symbolizer::load_map(*args.map);
        std::cerr << "rackprof: symbols from the " << o.elf->map_flavor() << " " << *args.map
                  << ": " << o.elf->symbols().size()
                  << " functions, no source lines (sizes where its sections give them)\n";
    }
    return o;
}

// A positive even number of bytes.
CLI::Validator even_bytes() {
    return CLI::Validator(
        [](std::string& value) {
            const bool even = value.find_first_not_of("0123456789") == std::string::npos &&
                              !value.empty() && value.size() < 19 && std::stoull(value) > 0 &&
                              std::stoull(value) % 2 == 0;
            return even ? std::string() : "must be a positive even number";
        },
        "EVEN");
}

// convert's own options, beside the decoding's.
struct ConvertArgs {
    ProfileInputArgs input;
    std::optional<std::string> capture;
    std::optional<std::string> output;  // -o
    std::optional<std::string> report;  // else text, or none with --export
    std::uint64_t top = 0;
    double min_percent = 0;
    std::optional<std::uint64_t> session;
    std::optional<std::string> select;
    bool redecode = false;
    bool intervals = false;
    bool lines = false;
    std::optional<std::string> export_format;
};

// The input named by --select, --db --session or CAPTURE.
Converted convert_input(const ConvertArgs& args, ConvertOptions& o) {
    const auto& in = args.input;
    if (args.select) {
        if (!in.db || args.session || args.capture)
            throw UsageError("--select needs --db FILE, and no --session or CAPTURE");
        return from_selection(*in.db, *args.select, o, in.config);
    }
    if (in.db || args.session) {
        if (!in.db || !args.session || args.capture)
            throw UsageError("a stored session needs --db FILE and --session ID, and no CAPTURE");
        return from_session(*in.db, static_cast<std::int64_t>(*args.session), args.redecode, o, in);
    }
    if (!args.capture) throw UsageError("convert needs exactly one CAPTURE file");
    const std::filesystem::path input = *args.capture;
    if (!std::filesystem::exists(input))
        throw std::runtime_error("no such file: " + input.string());
    return from_file(input, o);
}

// Writes one export to a file (atomically), or to standard output for "-".
void write_export(const std::string& format, std::shared_ptr<const gmon::ExportInput> input,
                  const std::filesystem::path& path) {
    if (path == "-") {
        gmon::export_to(format, std::move(input), [](std::string_view chunk) {
            std::cout.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
        });
        std::cout.flush();
        return;
    }
    std::vector<std::uint8_t> bytes;
    gmon::export_to(format, std::move(input), [&](std::string_view chunk) {
        bytes.insert(bytes.end(), chunk.begin(), chunk.end());
    });
    gmon::write_file_atomically(path, bytes);
    std::cerr << "rackprof: wrote " << path.string() << "\n";
}

int run_convert(const ConvertArgs& args) {
    ConvertOptions o = decode_options(args.input);
    o.report = args.report.value_or(args.export_format ? "none" : "text");
    o.json.top = args.top;
    o.json.min_percent = args.min_percent;
    if (args.export_format && !args.output)
        throw UsageError("--export " + *args.export_format +
                         " needs -o FILE (- for standard output)");
    Converted c = convert_input(args, o);
    auto& in = *c.input;
    check_fit(in, o, args.input.force);
    // A gmon.out read with --rate is profiled at that rate; its bytes stay as they were.
    if (in.source.histograms && args.input.rate) in.profile_options.prof_rate_override = o.rate;
    in.json_options = o.json;
    if (o.elf) {
        in.summary["elf"] = o.elf->path().string();
        in.summary["build_id"] = o.elf->build_id();
        if (!o.elf->map_flavor().empty()) in.summary["symbols_from"] = o.elf->map_flavor();
    } else if (o.report != "none" && !o.elf_missing_reported) {
        std::cerr
            << "rackprof: no --elf given: the report lists addresses only; give the firmware's ELF "
               "for function names\n";
    }

    if (args.export_format) {
        write_export(*args.export_format, c.input, *args.output);
    } else if (const auto output = args.output ? std::optional<std::filesystem::path>(*args.output)
                                               : c.default_output) {
        write_export("gmon", c.input, *output);
        in.summary["gmon_out"] = output->string();
    }
    if (o.report == "text" && c.input->calling_context && !c.input->calling_context->empty()) {
        // Entry/exit events measured where the time went: that view first, gprof's estimate
        // (its report, as gprof prints it) after it.
        std::cout << gmon::measured_arcs_text(*c.input->calling_context,
                                              gmon::ContextFrameNames(c.input->source.elf.get()));
    }
    if (o.report != "none") {
        std::string report = o.report;
        if (o.report == "text" && in.source.elf && args.lines) report = "text-lines";
        if (o.report == "text" && in.source.elf && args.intervals) report = "text-intervals";
        gmon::export_to(report, c.input, [](std::string_view chunk) {
            std::cout.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
        });
    }
    return 0;
}

// The itm options of the profile inputs.
void add_swo_options(CLI::App& app, ProfileInputArgs& args) {
    const auto port = in_range(0, 255, "an ITM stimulus port");
    app.add_flag("--tpiu", args.tpiu,
                 "itm: the bytes are TPIU formatter frames (OpenOCD -formatter 1)");
    add_count(app, "--tpiu-stream", args.tpiu_stream,
              "itm: the ITM's trace source ID in the TPIU frames (default: 1)")
        ->check(in_range(1, 111))
        ->type_name("N");
    add_count(app, "--framed-port", args.framed_port,
              "itm: the stimulus port carrying rackprof framed records")
        ->check(port)
        ->type_name("N");
    add_count(app, "--orbstat-port", args.orbstat_port,
              "itm: the stimulus port carrying orbstat enter/exit words (often 30)")
        ->check(port)
        ->type_name("N");
    add_count(app, "--console-port", args.console_port,
              "itm: the stimulus port carrying console text (often 0); its lines\n"
              "are printed to stderr as `console: LINE`")
        ->check(port)
        ->type_name("N");
}

}  // namespace

void add_profile_input_options(CLI::App& app, ProfileInputArgs& args) {
    app.add_option("--elf", args.elf,
                   "the firmware's ELF: symbols, code range, byte order (recommended;\n"
                   "a stored session's own ELF is used when it was recorded)")
        ->type_name("FILE");
    app.add_option("--map", args.map,
                   "a linker map (GNU ld -Map, TI ARM linker) for symbols when no ELF is at\n"
                   "hand: function names and addresses, no source lines")
        ->type_name("FILE")
        ->excludes("--elf");
    app.add_option("--protocol", args.protocol, "the wire format (default: legacy)")
        ->type_name("P")
        ->check(CLI::IsMember(protocol_names()));
    app.add_option("--format", args.format,
                   "auto | bin | hex | gmon | tiva (default: auto; framed, itm: bin);\n"
                   "tiva: a Tiva-style binned PC report (512 bins of 64 bytes, 100 Hz:\n"
                   "'DONE COLLECTING (N)' and CSV lines TimeStamp,42,0,BIN,COUNT,0,0\n"
                   "or as printf prints them, 06601211,0042,+0000042,+0000016,+0000000,+0000000),\n"
                   "detected by auto too")
        ->type_name("F")
        ->check(CLI::IsMember({"auto", "bin", "hex", "gmon", "tiva"}));
    add_count(app, "--addr-bytes", args.addr_bytes,
              "address width on the wire (default: 3 for legacy; framed: 4\n"
              "until the target's HELLO says)")
        ->check(in_range(3, 4))
        ->type_name("N");
    add_swo_options(app, args);
    add_count(app, "--rate", args.rate,
              "PC sampling rate of the target (default: 1000; a Tiva report: 100)")
        ->check(at_least(1))
        ->type_name("HZ");
    add_count(app, "--bin-bytes", args.bin_bytes,
              "bytes per histogram bin, even (default: 2; a Tiva report: 64)")
        ->check(even_bytes())
        ->type_name("N");
    add_count(app, "--tiva-report", args.tiva_report,
              "a Tiva file's report N (1 = the first) alone (default: all summed)")
        ->check(at_least(1))
        ->type_name("N");
    app.add_option("--db", args.db, "the daemon's database: stored sessions and selections")
        ->type_name("FILE");
    app.add_option("--config", args.config, "the daemon's configuration, for selections by tag=")
        ->type_name("FILE");
    app.add_flag("--force", args.force,
                 "profile even when the capture does not fit the ELF's code (call\n"
                 "targets not at function entries, PC samples on data): wrong ELF?");
}

std::shared_ptr<gmon::ExportInput> profile_input_of(const std::string& argument,
                                                    const ProfileInputArgs& args) {
    ConvertOptions o = decode_options(args);
    std::error_code ec;
    const bool is_file = std::filesystem::exists(argument, ec);
    Converted c;
    if (args.db && !is_file && argument.find('=') != std::string::npos) {
        c = from_selection(*args.db, argument, o, args.config);
    } else {
        if (!is_file) {
            throw std::runtime_error("no such file: " + argument +
                                     (args.db ? "" : " (a selection needs --db FILE)"));
        }
        c = from_file(argument, o);
    }
    check_fit(*c.input, o, args.force);
    if (!c.input->source.elf)
        throw UsageError(argument + ": no ELF to name its functions (give --elf FILE)");
    if (o.elf) {
        c.input->summary["elf"] = o.elf->path().string();
        c.input->summary["build_id"] = o.elf->build_id();
    }
    return c.input;
}

CommandRun add_convert_command(CLI::App& root) {
    auto args = std::make_shared<ConvertArgs>();
    CLI::App& app = add_command(root, "convert",
                                "decode a capture into gmon.out and print the profile", about());
    app.add_option("CAPTURE", args->capture, "a capture file or a gmon.out");
    add_profile_input_options(app, args->input);
    app.add_option("-o", args->output,
                   "where to write gmon.out (default: gmon.out; for a gmon.out input: none)")
        ->type_name("FILE");
    app.add_option("--report", args->report,
                   "text | json | tasks | none (default: text; none with --export);\n"
                   "tasks: an RTOS's tasks and the interrupt table")
        ->type_name("R")
        ->check(CLI::IsMember({"text", "json", "tasks", "none"}));
    CLI::Option* intervals =
        app.add_flag("--intervals", args->intervals,
                     "text: after the flat profile, each row's 95 % Wilson score interval\n"
                     "of its share and self seconds (sampling error); the gprof layout\n"
                     "above it is unchanged");
    app.add_flag("--lines", args->lines,
                 "text: by source line, as gprof -l -b prints it (the ELF's DWARF\n"
                 "line tables)")
        ->excludes(intervals);
    app.add_option("--export", args->export_format,
                   "write FORMAT to -o FILE (- for standard output) instead of gmon.out\n"
                   "(the formats are listed below)")
        ->type_name("FORMAT")
        ->check(CLI::IsMember(export_names()).description(""));  // listed below
    add_count(app, "--top", args->top, "JSON: at most N flat-profile rows and call-graph entries")
        ->type_name("N");
    app.add_option("--min-percent", args->min_percent,
                   "JSON: leave out flat-profile rows below P % time")
        ->type_name("P");
    add_count(app, "--session", args->session, "a stored session (with --db)")->type_name("ID");
    app.add_option("--select", args->select,
                   "sessions of one build merged (with --db), as the API names them")
        ->type_name("SELECTION");
    app.add_flag("--redecode", args->redecode,
                 "a stored session's raw bytes decoded again, not its aggregates");
    return [args] { return run_convert(*args); };
}

}  // namespace rackprof::daemon::app
