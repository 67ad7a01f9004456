// `rackprof convert`: a capture (or a gmon.out) in, gmon.out and a profile report out.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <optional>

#include "daemon/capture_reader.h"
#include "daemon/command_line.h"
#include "daemon/commands.h"
#include "gmon/gmon_reader.h"
#include "gmon/gmon_writer.h"
#include "gmon/profile.h"
#include "gmon/report.h"
#include "gmon/symbolizer.h"

namespace rackprof::daemon {

namespace {

constexpr const char* kUsage = R"(usage: rackprof convert CAPTURE [options]

Decodes a capture of the thesis' legacy wire format (binary or hex-ASCII text), writes a
gmon.out that GNU gprof reads, and prints the profile. CAPTURE may also be a gmon.out
(GNU format detected by its magic; BSD formats with --format gmon), to profile it directly.

options:
  --elf FILE            the firmware's ELF: symbols, code range, byte order (recommended)
  -o FILE               where to write gmon.out (default: gmon.out; for a gmon.out input: none)
  --format F            auto | bin | hex | gmon (default: auto)
  --addr-bytes N        3 | 4: address width on the wire (default: 3)
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
    return "decoded " + std::to_string(s.records()) + " records (" + std::to_string(s.arcs) +
           " arcs, " + std::to_string(s.pc_samples) + " PC samples) from " +
           std::to_string(s.bytes_in) + " bytes; " + std::to_string(s.bytes_discarded) +
           " bytes discarded in " + std::to_string(s.resyncs) + " resyncs";
}

nlohmann::json stats_json(const protocol::DecoderStats& s) {
    return {{"bytes_in", s.bytes_in},
            {"bytes_discarded", s.bytes_discarded},
            {"resyncs", s.resyncs},
            {"arcs", s.arcs},
            {"pc_samples", s.pc_samples}};
}

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

}  // namespace

int run_convert(const std::vector<std::string>& args) {
    const CommandLine cl(args,
                         {"--elf", "-o", "--format", "--addr-bytes", "--rate", "--bin-bytes",
                          "--report", "--top", "--min-percent"},
                         {"--help", "-h"});
    if (cl.has("--help") || cl.has("-h")) {
        std::cout << kUsage;
        return 0;
    }
    if (cl.positionals().size() != 1)
        throw UsageError("convert needs exactly one CAPTURE file\n" + std::string(kUsage));
    const std::filesystem::path input = cl.positionals()[0];
    std::string format = cl.choice("--format", "auto", {"auto", "bin", "hex", "gmon"});
    const std::string report = cl.choice("--report", "text", {"text", "json", "none"});
    const int addr_bytes = static_cast<int>(cl.get_uint("--addr-bytes", 3));
    if (addr_bytes != 3 && addr_bytes != 4) throw UsageError("--addr-bytes must be 3 or 4");
    const auto rate = static_cast<std::uint32_t>(cl.get_uint("--rate", 1000));
    if (rate == 0) throw UsageError("--rate must be above 0");
    const auto bin_bytes = static_cast<std::uint32_t>(cl.get_uint("--bin-bytes", 2));
    if (bin_bytes == 0 || bin_bytes % 2)
        throw UsageError("--bin-bytes must be a positive even number");
    gmon::JsonReportOptions json_options;
    json_options.top = cl.get_uint("--top", 0);
    if (const auto p = cl.get("--min-percent")) json_options.min_percent = std::stod(*p);

    if (!std::filesystem::exists(input))
        throw std::runtime_error("no such file: " + input.string());
    std::shared_ptr<const gmon::Symbolizer> elf;
    if (const auto elf_path = cl.get("--elf")) elf = gmon::Symbolizer::load(*elf_path);
    const gmon::TargetLayout layout = elf ? elf->layout() : gmon::TargetLayout{};

    if (format == "auto" && is_gnu_gmon(input)) format = "gmon";
    gmon::GmonData data;
    nlohmann::json summary = {{"input", input.string()}};
    std::optional<std::filesystem::path> output;
    std::uint64_t samples_outside = 0;

    if (format == "gmon") {
        data = gmon::merge_duplicates(gmon::read_gmon_file(input, layout));
        if (cl.has("-o")) output = cl.get("-o", "");
        summary["format"] = "gmon";
        std::cerr << "rackprof: read " << input.string() << ": " << data.histograms.size()
                  << " histogram(s), " << data.arcs.size() << " arcs\n";
    } else {
        protocol::LegacyOptions options;
        options.addr_bytes = addr_bytes;
        options.encoding = format == "hex"   ? protocol::LegacyEncoding::kHex
                           : format == "bin" ? protocol::LegacyEncoding::kBinary
                                             : detect_encoding(input);
        if (elf && elf->code_high() <= 0x100000000ull) {
            options.code_range =
                protocol::AddressRange{static_cast<std::uint32_t>(elf->code_low()),
                                       static_cast<std::uint32_t>(elf->code_high())};
        }
        gmon::Aggregate aggregate;
        const bool tty = ::isatty(STDERR_FILENO) == 1;
        const auto stats = decode_capture(input, options, aggregate,
                                          tty ? ProgressCallback(print_progress) : nullptr);
        std::cerr << "rackprof: " << summary_line(stats) << "\n";
        summary["format"] = options.encoding == protocol::LegacyEncoding::kHex ? "hex" : "bin";
        summary["addr_bytes"] = addr_bytes;
        summary["decoder"] = stats_json(stats);

        if (stats.records() == 0) {
            if (elf) {
                throw std::runtime_error(
                    "no records in " + input.string() + " fit the code range of " +
                    elf->path().string() + " (" + gmon::hex_address(elf->code_low()) + "-" +
                    gmon::hex_address(elf->code_high()) +
                    "): wrong ELF for this capture, or wrong --format or --addr-bytes?");
            }
            throw std::runtime_error("no records found in " + input.string() +
                                     ": is it a legacy capture? check --format and --addr-bytes");
        }
        if (elf && stats.bytes_discarded >
                       kWrongElfDiscardFraction * static_cast<double>(stats.bytes_in)) {
            throw std::runtime_error(
                std::to_string(stats.bytes_discarded) + " of " + std::to_string(stats.bytes_in) +
                " bytes did not decode to records inside " + elf->path().string() +
                "'s code range: wrong ELF for this capture, or wrong --addr-bytes?");
        }
        gmon::HistogramSpec spec;
        if (elf) {
            spec.low_pc = elf->code_low() / bin_bytes * bin_bytes;
            spec.high_pc = elf->code_high();
            spec.bin_bytes = bin_bytes;
            spec.prof_rate = rate;
        } else {
            spec = gmon::observed_range(aggregate, bin_bytes, rate);
        }
        auto binned = gmon::to_gmon_data(aggregate, spec, layout);
        data = std::move(binned.data);
        samples_outside = binned.samples_outside;
        output = cl.get("-o", "gmon.out");
    }

    if (output) {
        gmon::write_file_atomically(*output, gmon::serialize_gmon(data));
        std::cerr << "rackprof: wrote " << output->string() << "\n";
        summary["gmon_out"] = output->string();
    }

    std::optional<gmon::Profile> profile;
    if (elf) {
        gmon::ProfileOptions options;
        if (format == "gmon" && cl.has("--rate")) options.prof_rate_override = rate;
        profile = gmon::compute_profile(data, *elf, options);
        summary["elf"] = elf->path().string();
        summary["build_id"] = elf->build_id();
    } else if (report != "none") {
        std::cerr
            << "rackprof: no --elf given: the report lists addresses only; give the firmware's ELF "
               "for function names\n";
    }

    if (report == "json") {
        nlohmann::json out = {{"schema", "rackprof.report/1"},
                              {"source", summary},
                              {"raw", raw_json(data, samples_outside)}};
        out["profile"] =
            profile ? gmon::profile_json(*profile, json_options) : nlohmann::json(nullptr);
        std::cout << out.dump(2) << "\n";
    } else if (report == "text") {
        if (profile) {
            std::cout << gmon::render_gprof_text(*profile);
        } else {
            std::cout << "Call arcs (from -> self: count):\n";
            for (const auto& a : data.arcs) {
                std::cout << "  " << gmon::hex_address(a.from_pc) << " -> "
                          << gmon::hex_address(a.self_pc) << ": " << a.count << "\n";
            }
        }
    }
    return 0;
}

}  // namespace rackprof::daemon
