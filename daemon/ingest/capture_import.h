// The one import path: the bytes of a capture (any registered wire format) or of a gmon.out
// become records, counters, the target's HELLO, and — for a gmon.out — the exact histogram
// shapes and profiling rate. `rackprof convert`, the HTTP import, the benchmarks and the
// re-decoding of stored sessions all come through here, so they decode alike.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "daemon/ingest/calling_context_feed.h"
#include "daemon/ingest/wire_settings.h"
#include "gmon/aggregate.h"
#include "gmon/gmon_data.h"
#include "gmon/gmon_reader.h"
#include "gmon/tiva_report.h"
#include "protocol/decoder_stats.h"
#include "protocol/legacy_format.h"
#include "protocol/record_sink.h"
#include "protocol/stream_event.h"

namespace rackprof::storage {
class SessionStore;
}

namespace rackprof::daemon::ingest {

using protocol::WireSpec;

// What the bytes are. kAuto: a GNU gmon.out by its magic, a Tiva binned PC report by its lines
// (gmon/tiva_report.h), else a capture.
enum class InputKind { kAuto, kCapture, kGmon, kTiva };

struct ImportSpec {
    InputKind kind = InputKind::kAuto;
    // A capture's wire; format "auto" is detected (hex-ASCII text or binary) where the
    // protocol has a text encoding, else "bin".
    WireSpec wire;
    gmon::TargetLayout layout;  // a gmon.out's address size and byte order (from its ELF)
    // A Tiva report's sampler constants, and which of its reports (0-based, file order) to
    // read; none: all of them summed.
    gmon::TivaShape tiva;
    std::optional<std::size_t> tiva_report;
};

// What an import yields beside its records.
struct Imported {
    InputKind kind = InputKind::kCapture;
    std::string format;  // bin | hex | gmon | tiva: what the bytes turned out to be
    protocol::DecoderStats stats;
    std::optional<protocol::TargetHello> hello;                    // the last one (framed captures)
    std::map<std::uint16_t, protocol::ExceptionStats> exceptions;  // itm: exception trace
    // Enter/exit events decoded (framed ENTER/EXIT items, itm orbstat words) and the places
    // where some may be missing (EventsLost markers).
    std::uint64_t function_events = 0;
    std::uint64_t events_lost = 0;
    // A gmon.out's (a Tiva report's) histograms exactly (ranges, bin counts, rate): profiles and
    // exports bin its samples into these again, so nothing moves and its times stay its own.
    std::vector<gmon::HistogramSpec> histograms;
    // Measured from function entry/exit events (itm orbstat words, framed events); null when
    // the capture had none.
    std::shared_ptr<const gmon::CallingContextTree> calling_context;
    // A Tiva file: what its reader found (every report, lines skipped and unread), whichever
    // report or sum was emitted.
    std::optional<gmon::TivaReport> tiva;
};

using ProgressCallback = std::function<void(std::uint64_t done, std::uint64_t total)>;
using PieceCallback = std::function<void(std::span<const std::uint8_t> bytes)>;
using ConsoleCallback = std::function<void(const protocol::ConsoleText& line)>;

// Records go to `sink` as they are decoded (and events: HELLO, console lines). Throws
// std::runtime_error (gmon::GmonFormatError for a bad gmon.out) or std::invalid_argument for
// a wire it cannot decode.
Imported import_bytes(std::span<const std::uint8_t> bytes, const ImportSpec& spec,
                      protocol::RecordSink& sink);
// The same from a file, read in chunks (a capture is never whole in memory, nor a gmon.out:
// see GmonFile), with progress;
// `piece` sees each chunk of a capture's bytes right after its records went to `sink` (what
// storing the raw bytes beside their records needs; a gmon.out has none). Throws
// std::runtime_error naming the file on I/O errors.
Imported import_file(const std::filesystem::path& path, const ImportSpec& spec,
                     protocol::RecordSink& sink, const ProgressCallback& progress = {},
                     const PieceCallback& piece = {});
// A stored session's raw bytes decoded again with `wire`.
Imported redecode_session(storage::SessionStore& store, std::int64_t session, const WireSpec& wire,
                          protocol::RecordSink& sink);

// A gmon.out whole: its arcs and samples (wide counts, 64-bit addresses) and its shapes.
struct GmonImport {
    gmon::Aggregate aggregate;
    Imported info;
};
GmonImport import_gmon(std::span<const std::uint8_t> bytes, const gmon::TargetLayout& layout);

// A gmon.out file mapped read-only and indexed: its histograms' shapes are known first (a
// stored session needs them before its records), then its arcs and PC samples go to a sink in
// pieces, each bin read where it lies and pages let go behind the reader, so memory stays at
// about a piece whatever the histogram's size (a 64 MiB file of 2-byte bins is 32 M bins).
class GmonFile {
  public:
    // A regular file (import_file reads a pipe whole instead). Throws gmon::GmonFormatError
    // (naming the file) or std::runtime_error for I/O errors.
    GmonFile(const std::filesystem::path& path, const gmon::TargetLayout& layout);
    ~GmonFile();
    GmonFile(const GmonFile&) = delete;
    GmonFile& operator=(const GmonFile&) = delete;

    const std::vector<gmon::HistogramSpec>& histograms() const { return shapes_; }
    // Arcs (by address), then PC samples (by address): the records an import of the whole
    // file gave, in the same order. An AggregateSink gets them as wide counts.
    Imported emit(protocol::RecordSink& sink);

  private:
    void release(std::size_t from, std::size_t to);
    void unmap();

    std::filesystem::path path_;
    std::span<const std::uint8_t> bytes_;  // mapped (empty for an empty file)
    bool mapped_ = false;
    gmon::GmonIndex index_;
    std::vector<gmon::HistogramSpec> shapes_;
};

// A Tiva report's bins as PC-sample records (each non-zero bin at the address binning puts
// back into it, with its count) and what it was: kind kTiva, its one histogram's shape.
Imported emit_tiva(const gmon::TivaReport& report, std::uint64_t bytes_in,
                   protocol::RecordSink& sink);
// Reads a whole Tiva report file (at most 64 MiB: a report of 512 bins a minute is 12 KiB).
// Throws gmon::TivaFormatError naming the file, std::runtime_error for I/O errors.
gmon::TivaReport read_tiva_file(const std::filesystem::path& path,
                                const gmon::TivaShape& shape = {});
// What `which` picks of a file's reports: one of them, or none (all summed). Throws
// gmon::TivaFormatError when the file has no such report.
gmon::TivaReport pick_tiva_report(const gmon::TivaReport& all, std::optional<std::size_t> which);

// A HELLO's build-id as the ELF notes spell it: lower-case hex.
std::string build_id_hex(const std::vector<std::uint8_t>& build_id);

// Looks at the start of a capture: hex-ASCII text or binary wire bytes.
protocol::LegacyEncoding detect_encoding(std::span<const std::uint8_t> head);
// True when the bytes start with the GNU gmon.out magic.
bool is_gnu_gmon(std::span<const std::uint8_t> head);

// Records into an aggregate, passing console lines on: what an offline profile needs.
class AggregateImportSink : public gmon::AggregateSink {
  public:
    explicit AggregateImportSink(gmon::Aggregate& aggregate, ConsoleCallback console = {})
        : gmon::AggregateSink(aggregate), console_(std::move(console)) {}
    void on_event(const protocol::StreamEvent& event) override {
        if (const auto* c = std::get_if<protocol::ConsoleText>(&event); c && console_) console_(*c);
    }

  private:
    ConsoleCallback console_;
};

// Records kept in order (what a stored import needs).
using protocol::RecordCollector;

}  // namespace rackprof::daemon::ingest
