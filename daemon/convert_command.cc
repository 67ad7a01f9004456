// `rackprof convert`: a capture (or a gmon.out) in, gmon.out and a profile report out.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <string_view>

#include "daemon/capture_reader.h"
#include "daemon/capture_session.h"
#include "daemon/command_line.h"
#include "daemon/commands.h"
#include "daemon/wire_decoder.h"
#include "gmon/gmon_reader.h"
#include "gmon/gmon_writer.h"
#include "gmon/profile.h"
#include "gmon/report.h"
#include "gmon/symbolizer.h"
#include "storage/session_store.h"

namespace rackprof::daemon {

namespace {

constexpr const char* kUsage = R"(usage: rackprof convert CAPTURE [options]
       rackprof convert --db FILE --session ID [--redecode] [options]

Decodes a capture (the thesis' legacy wire format, binary or hex-ASCII text, the rackprof
framed protocol, or SWO: ITM packets, raw or in TPIU frames), writes a gmon.out that GNU gprof reads, and prints the profile. CAPTURE may also be a gmon.out
(GNU format detected by its magic; BSD formats with --format gmon), to profile it directly.

A stored session (--db, --session) is profiled from its aggregates; --redecode decodes its
raw bytes again instead (with --protocol/--format/--addr-bytes overriding what was captured
with).

options:
  --elf FILE            the firmware's ELF: symbols, code range, byte order (recommended;
                        a stored session's own ELF is used when it was recorded)
  -o FILE               where to write gmon.out (default: gmon.out; for a gmon.out input: none)
  --protocol P          legacy | framed | itm (default: legacy)
  --format F            auto | bin | hex | gmon (default: auto; framed, itm: bin)
  --addr-bytes N        3 | 4: address width on the wire (default: 3 for legacy; framed: 4
                        until the target's HELLO says)
  --tpiu                itm: the bytes are TPIU formatter frames (OpenOCD -formatter 1)
  --tpiu-stream N       itm: the ITM's trace source ID in the TPIU frames (default: 1)
  --framed-port N       itm: the stimulus port carrying rackprof framed records
  --orbstat-port N      itm: the stimulus port carrying orbstat enter/exit words (often 30)
  --console-port N      itm: the stimulus port carrying console text (often 0); its lines
                        are printed to stderr as `console: LINE`
  --rate HZ             PC sampling rate of the target (default: 1000)
  --bin-bytes N         bytes per histogram bin, even (default: 2)
  --report R            text | json | none (default: text)
  --top N               JSON: at most N flat-profile rows
  --min-percent P       JSON: leave out flat-profile rows below P % time
)";

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

std::string summary_line(const protocol::DecoderStats& s) {
    std::string line = "decoded " + std::to_string(s.records()) + " records (" +
                       std::to_string(s.arcs) + " arcs, " + std::to_string(s.pc_samples) +
                       " PC samples) from " + std::to_string(s.bytes_in) + " bytes; " +
                       std::to_string(s.bytes_discarded) + " bytes discarded in " +
                       std::to_string(s.resyncs) + " resyncs";
    if (s.frames + s.frames_bad > 0) {
        line += "; frames: " + std::to_string(s.frames) + " good, " + std::to_string(s.frames_bad) +
                " bad, " + std::to_string(s.frames_lost) + " lost; " +
                std::to_string(s.target_dropped) + " records dropped on the target";
    }
    if (s.overflows + s.sleep_samples > 0) {
        line += "; " + std::to_string(s.overflows) + " ITM overflows (trace lost on the target), " +
                std::to_string(s.sleep_samples) + " sleep samples";
    }
    return line;
}

nlohmann::json stats_json(const protocol::DecoderStats& s) {
    return {{"bytes_in", s.bytes_in},
            {"bytes_discarded", s.bytes_discarded},
            {"resyncs", s.resyncs},
            {"arcs", s.arcs},
            {"pc_samples", s.pc_samples},
            {"frames", s.frames},
            {"frames_bad", s.frames_bad},
            {"frames_lost", s.frames_lost},
            {"target_dropped", s.target_dropped},
            {"overflows", s.overflows},
            {"sleep_samples", s.sleep_samples}};
}

nlohmann::json exceptions_json(const std::map<std::uint16_t, protocol::ExceptionStats>& e) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& [number, stats] : e) {
        out.push_back(
            {{"exception", number}, {"entries", stats.entries}, {"cycles", stats.cycles}});
    }
    return out;
}

// A console line as the target printed it, without its newline, control characters shown as '.'.
void print_console(const protocol::ConsoleText& line) {
    std::string_view text = line.text;
    if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    // The target's bytes, not ours: control characters would drive the terminal.
    std::string shown(text);
    for (char& c : shown) {
        if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7F) c = '.';
    }
    std::cerr << "console: " << shown << "\n";
}

using CodeRange = std::optional<std::pair<std::uint64_t, std::uint64_t>>;

nlohmann::json raw_json(const gmon::GmonData& data, std::uint64_t samples_outside) {
    nlohmann::json arcs = nlohmann::json::array();
    for (const auto& a : data.arcs) {
        arcs.push_back({{"from", gmon::hex_address(a.from_pc)},
                        {"self", gmon::hex_address(a.self_pc)},
                        {"count", a.count}});
    }
    nlohmann::json histograms = nlohmann::json::array();
    for (const auto& h : data.histograms) {
        histograms.push_back({{"low_pc", gmon::hex_address(h.low_pc)},
                              {"high_pc", gmon::hex_address(h.high_pc)},
                              {"bins", h.bins.size()},
                              {"prof_rate", h.prof_rate},
                              {"samples", h.total()}});
    }
    return {
        {"arcs", arcs}, {"histograms", histograms}, {"samples_outside_histogram", samples_outside}};
}

struct ConvertOptions {
    std::string protocol;  // legacy | framed | itm
    std::string format;    // auto | bin | hex | gmon
    std::string report;    // text | json | none
    int addr_bytes = 3;
    protocol::SwoOptions swo;  // itm
    std::uint32_t rate = 1000;
    std::uint32_t bin_bytes = 2;
    gmon::JsonReportOptions json;
    std::shared_ptr<const gmon::Symbolizer> elf;
};

// What a source yields: gmon data ready to write and profile, and what to say about it.
struct Converted {
    gmon::GmonData data;
    nlohmann::json summary;
    std::optional<std::filesystem::path> default_output;
    std::uint64_t samples_outside = 0;
};

gmon::TargetLayout layout_of(const ConvertOptions& o) {
    return o.elf ? o.elf->layout() : gmon::TargetLayout{};
}

std::optional<protocol::AddressRange> code_range_of(const ConvertOptions& o) {
    if (!o.elf || o.elf->code_high() > 0x100000000ull) return std::nullopt;
    return protocol::AddressRange{static_cast<std::uint32_t>(o.elf->code_low()),
                                  static_cast<std::uint32_t>(o.elf->code_high())};
}

// Bins an aggregate over the code range (the ELF's, else the target's HELLO's, else the PCs
// seen) and checks it is plausible.
Converted from_aggregate(const gmon::Aggregate& aggregate, const protocol::DecoderStats& stats,
                         const ConvertOptions& o, const std::string& what,
                         const CodeRange& code_range) {
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
    const auto spec = gmon::histogram_spec(aggregate, code_range, o.bin_bytes, o.rate);
    auto binned = gmon::to_gmon_data(aggregate, spec, layout_of(o));
    Converted c;
    c.data = std::move(binned.data);
    c.samples_outside = binned.samples_outside;
    c.summary["decoder"] = stats_json(stats);
    c.default_output = "gmon.out";
    return c;
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

Converted from_gmon_file(const std::filesystem::path& input, const ConvertOptions& o) {
    Converted c;
    c.data = gmon::merge_duplicates(gmon::read_gmon_file(input, layout_of(o)));
    c.summary = {{"input", input.string()}, {"format", "gmon"}};
    std::cerr << "rackprof: read " << input.string() << ": " << c.data.histograms.size()
              << " histogram(s), " << c.data.arcs.size() << " arcs\n";
    return c;
}

// The code range: the ELF's, else the one a framed target announced.
CodeRange code_range_with(const ConvertOptions& o, const storage::TargetInfo& target) {
    storage::SessionInfo info;
    info.target = target;
    return session_code_range(info, o.elf.get());
}

storage::TargetInfo target_of(const std::optional<protocol::TargetHello>& hello) {
    if (!hello) return {};
    return {build_id_hex(hello->build_id), hello->text_lo, hello->text_hi};
}

Converted from_capture_file(const std::filesystem::path& input, const ConvertOptions& o) {
    WireSpec wire{o.protocol, o.format, o.addr_bytes, code_range_of(o), o.swo};
    if (o.protocol != "legacy") {
        if (o.format == "hex")
            throw UsageError("--protocol " + o.protocol + " is binary: no --format hex");
        wire.format = "bin";
    } else if (o.format == "auto") {
        wire.format = detect_encoding(input) == protocol::LegacyEncoding::kHex ? "hex" : "bin";
    }
    gmon::Aggregate aggregate;
    const bool tty = ::isatty(STDERR_FILENO) == 1;
    const auto decoded = decode_capture(
        input, wire, aggregate, tty ? ProgressCallback(print_progress) : nullptr, print_console);
    std::cerr << "rackprof: " << summary_line(decoded.stats) << "\n";
    const auto target = target_of(decoded.hello);
    warn_on_build_id_mismatch(o, target);
    Converted c =
        from_aggregate(aggregate, decoded.stats, o, input.string(), code_range_with(o, target));
    c.summary["input"] = input.string();
    c.summary["protocol"] = o.protocol;
    c.summary["format"] = wire.format;
    c.summary["addr_bytes"] = decoded.hello ? decoded.hello->addr_bytes : o.addr_bytes;
    if (decoded.hello) c.summary["target_build_id"] = target.build_id;
    if (o.protocol == "itm") c.summary["exceptions"] = exceptions_json(decoded.exceptions);
    return c;
}

// A session the daemon stored: its aggregates as captured, or its raw bytes decoded again.
Converted from_session(const std::filesystem::path& db, std::int64_t id, bool redecode,
                       ConvertOptions& o, const CommandLine& cl) {
    if (!std::filesystem::exists(db)) throw std::runtime_error("no such database: " + db.string());
    storage::SessionStore store(db, storage::Database::Mode::kReadOnly);
    const auto info = store.session(id);
    if (!info) throw std::runtime_error("no session " + std::to_string(id) + " in " + db.string());
    if (!o.elf && !info->spec.elf_path.empty() && std::filesystem::exists(info->spec.elf_path)) {
        o.elf = gmon::Symbolizer::load(info->spec.elf_path);
    }
    const std::string what = "session " + std::to_string(id);
    Converted c;
    if (redecode) {
        WireSpec wire{
            cl.has("--protocol") ? o.protocol : info->spec.protocol,
            o.format == "auto" ? info->spec.format : o.format,
            cl.has("--addr-bytes") ? o.addr_bytes : info->spec.addr_bytes, code_range_of(o),
            cl.has("--protocol") ? o.swo : swo_options_from_json(info->spec.wire_options)};
        const auto decoder = make_decoder(wire);
        gmon::Aggregate aggregate;
        CaptureSink sink(aggregate, print_console);
        store.for_each_chunk(
            id, [&](std::int64_t, std::span<const std::uint8_t> raw) { decoder->feed(raw, sink); });
        decoder->finish(sink);
        std::cerr << "rackprof: re-decoded " << what << ": " << summary_line(decoder->stats())
                  << "\n";
        c = from_aggregate(aggregate, decoder->stats(), o, what,
                           code_range_with(o, sink.hello ? target_of(sink.hello) : info->target));
        if (wire.protocol == "itm")
            c.summary["exceptions"] = exceptions_json(exceptions_of(*decoder));
    } else {
        const auto& k = info->counters;
        const protocol::DecoderStats stats = storage::decoder_counters(k);
        std::cerr << "rackprof: " << what << " (" << info->spec.board << ", " << info->state
                  << "): " << summary_line(stats) << "; " << k.gaps << " gaps, " << k.records_lost
                  << " records lost\n";
        c = from_aggregate(store.aggregate(id), stats, o, what, code_range_with(o, info->target));
    }
    c.summary["session"] = {{"id", id},
                            {"board", info->spec.board},
                            {"state", info->state},
                            {"gaps", info->counters.gaps},
                            {"records_lost", info->counters.records_lost}};
    c.summary["protocol"] = info->spec.protocol;
    c.summary["format"] = info->spec.format;
    c.summary["addr_bytes"] = info->spec.addr_bytes;
    if (!info->target.build_id.empty()) c.summary["target_build_id"] = info->target.build_id;
    if (info->spec.protocol == "itm" && !c.summary.contains("exceptions")) {
        std::map<std::uint16_t, protocol::ExceptionStats> stored;
        for (const auto& e : info->exceptions) stored[e.number] = {e.entries, e.cycles};
        c.summary["exceptions"] = exceptions_json(stored);
    }
    return c;
}

// The itm options; each is an error with another protocol (it would silently do nothing).
protocol::SwoOptions swo_options(const CommandLine& cl, const std::string& wire_protocol) {
    protocol::SwoOptions swo;
    for (const char* flag :
         {"--tpiu", "--tpiu-stream", "--framed-port", "--orbstat-port", "--console-port"}) {
        if (cl.has(flag) && wire_protocol != "itm")
            throw UsageError(std::string(flag) + " is for --protocol itm only");
    }
    auto port = [&](const char* flag) -> std::optional<std::uint16_t> {
        if (!cl.has(flag)) return std::nullopt;
        const auto n = cl.get_uint(flag, 0);
        if (n > 255) throw UsageError(std::string(flag) + " must be an ITM stimulus port, 0..255");
        return static_cast<std::uint16_t>(n);
    };
    swo.tpiu = cl.has("--tpiu");
    const auto stream = cl.get_uint("--tpiu-stream", 1);
    if (stream < 1 || stream > 111) throw UsageError("--tpiu-stream must be 1..111");
    swo.tpiu_stream = static_cast<std::uint8_t>(stream);
    swo.framed_port = port("--framed-port");
    swo.orbstat_port = port("--orbstat-port");
    swo.console_port = port("--console-port");
    try {
        protocol::validate(swo);
    } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("--protocol itm: ") + e.what());
    }
    return swo;
}

ConvertOptions parse_options(const CommandLine& cl) {
    ConvertOptions o;
    o.protocol = cl.choice("--protocol", "legacy", {"legacy", "framed", "itm"});
    o.format = cl.choice("--format", "auto", {"auto", "bin", "hex", "gmon"});
    o.report = cl.choice("--report", "text", {"text", "json", "none"});
    o.addr_bytes = static_cast<int>(cl.get_uint("--addr-bytes", o.protocol == "legacy" ? 3 : 4));
    o.swo = swo_options(cl, o.protocol);
    if (o.addr_bytes != 3 && o.addr_bytes != 4) throw UsageError("--addr-bytes must be 3 or 4");
    o.rate = static_cast<std::uint32_t>(cl.get_uint("--rate", 1000));
    if (o.rate == 0) throw UsageError("--rate must be above 0");
    o.bin_bytes = static_cast<std::uint32_t>(cl.get_uint("--bin-bytes", 2));
    if (o.bin_bytes == 0 || o.bin_bytes % 2)
        throw UsageError("--bin-bytes must be a positive even number");
    o.json.top = cl.get_uint("--top", 0);
    if (const auto p = cl.get("--min-percent")) {
        try {
            o.json.min_percent = std::stod(*p);
        } catch (const std::exception&) {
            throw UsageError("--min-percent needs a number");
        }
    }
    return o;
}

void print_report(const Converted& c, const ConvertOptions& o,
                  const std::optional<gmon::Profile>& profile) {
    if (o.report == "json") {
        nlohmann::json out = {{"schema", "rackprof.report/1"},
                              {"source", c.summary},
                              {"raw", raw_json(c.data, c.samples_outside)}};
        out["profile"] = profile ? gmon::profile_json(*profile, o.json) : nlohmann::json(nullptr);
        std::cout << out.dump(2) << "\n";
    } else if (o.report == "text") {
        if (profile) {
            std::cout << gmon::render_gprof_text(*profile);
            return;
        }
        std::cout << "Call arcs (from -> self: count):\n";
        for (const auto& a : c.data.arcs) {
            std::cout << "  " << gmon::hex_address(a.from_pc) << " -> "
                      << gmon::hex_address(a.self_pc) << ": " << a.count << "\n";
        }
    }
}

}  // namespace

int run_convert(const std::vector<std::string>& args) {
    const CommandLine cl(args,
                         {"--elf", "-o", "--protocol", "--format", "--addr-bytes", "--rate",
                          "--bin-bytes", "--report", "--top", "--min-percent", "--db", "--session",
                          "--tpiu-stream", "--framed-port", "--orbstat-port", "--console-port"},
                         {"--help", "-h", "--redecode", "--tpiu"});
    if (cl.has("--help") || cl.has("-h")) {
        std::cout << kUsage;
        return 0;
    }
    ConvertOptions o = parse_options(cl);
    if (const auto elf_path = cl.get("--elf")) o.elf = gmon::Symbolizer::load(*elf_path);

    Converted c;
    if (cl.has("--db") || cl.has("--session")) {
        if (!cl.has("--db") || !cl.has("--session") || !cl.positionals().empty()) {
            throw UsageError("a stored session needs --db FILE and --session ID, and no CAPTURE");
        }
        c = from_session(cl.get("--db", ""), static_cast<std::int64_t>(cl.get_uint("--session", 0)),
                         cl.has("--redecode"), o, cl);
    } else {
        if (cl.positionals().size() != 1)
            throw UsageError("convert needs exactly one CAPTURE file\n" + std::string(kUsage));
        const std::filesystem::path input = cl.positionals()[0];
        if (!std::filesystem::exists(input))
            throw std::runtime_error("no such file: " + input.string());
        if (o.format == "gmon" || (o.format == "auto" && is_gnu_gmon(input))) {
            c = from_gmon_file(input, o);
        } else {
            c = from_capture_file(input, o);
        }
    }

    const auto output =
        cl.has("-o") ? std::optional<std::filesystem::path>(cl.get("-o", "")) : c.default_output;
    if (output) {
        gmon::write_file_atomically(*output, gmon::serialize_gmon(c.data));
        std::cerr << "rackprof: wrote " << output->string() << "\n";
        c.summary["gmon_out"] = output->string();
    }

    std::optional<gmon::Profile> profile;
    if (o.elf) {
        gmon::ProfileOptions options;
        if (o.format == "gmon" && cl.has("--rate")) options.prof_rate_override = o.rate;
        profile = gmon::compute_profile(c.data, *o.elf, options);
        c.summary["elf"] = o.elf->path().string();
        c.summary["build_id"] = o.elf->build_id();
    } else if (o.report != "none") {
        std::cerr
            << "rackprof: no --elf given: the report lists addresses only; give the firmware's ELF "
               "for function names\n";
    }
    print_report(c, o, profile);
    return 0;
}

}  // namespace rackprof::daemon
