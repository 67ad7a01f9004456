#include "gmon/export.h"

#include <array>
#include <stdexcept>

#include "gmon/callgrind_export.h"
#include "gmon/calling_context_export.h"
#include "gmon/dot_export.h"
#include "gmon/folded_export.h"
#include "gmon/gmon_writer.h"
#include "gmon/pprof_export.h"
#include "gmon/speedscope_export.h"
#include "gmon/task_views.h"
#include "protocol/named_table.h"

namespace rackprof::gmon {

namespace {

using Input = std::shared_ptr<const ExportInput>;

// A stream of one chunk made when first pulled.
ChunkStream once(std::function<std::string()> make) {
    return [make = std::move(make), done = false]() mutable -> std::optional<std::string> {
        if (done) return std::nullopt;
        done = true;
        return make();
    };
}

ChunkStream open_gmon(const Input& input) {
    return once([input] { return serialize_gmon_string(gmon_data_of(input->source).data); });
}

std::string arcs_text(const GmonData& data) {
    std::string out = "Call arcs (from -> self: count):\n";
    for (const auto& a : data.arcs) {
        out += "  " + hex_address(a.from_pc) + " -> " + hex_address(a.self_pc) + ": " +
               std::to_string(a.count) + "\n";
    }
    return out;
}

ChunkStream open_text(const Input& input) {
    return once([input] {
        const auto data = gmon_data_of(input->source).data;
        if (!input->source.elf) return arcs_text(data);  // addresses only: the arcs
        return render_gprof_text(profile_of(input->source, data, input->profile_options));
    });
}

// gprof -b's text, the flat profile followed by each row's 95 % interval (sampling error).
ChunkStream open_text_intervals(const Input& input) {
    if (!input->source.elf)
        throw ExportNeedsElf("text-intervals needs the firmware's ELF to name functions");
    return once([input] {
        return render_gprof_text(profile_of(input->source, input->profile_options),
                                 TextReportOptions{true});
    });
}

// gprof -l -b's text: the same report with a symbol per source line.
ChunkStream open_text_lines(const Input& input) {
    if (!input->source.elf)
        throw ExportNeedsElf("text-lines needs the firmware's ELF to find source lines");
    return once([input] {
        ProfileOptions options = input->profile_options;
        options.lines = true;
        return render_gprof_text(profile_of(input->source, options));
    });
}

ChunkStream open_json(const Input& input) {
    // The summary names the board as stored (an import's query may hold any bytes): bytes
    // that are not UTF-8 become U+FFFD rather than an exception mid-export.
    return once([input] {
        std::string text;
        JsonStream out(text, 2, 0, JsonStream::ErrorHandler::replace);
        write_report_json(out, *input);
        return text + "\n";
    });
}

// The aggregate in the thesis' validation columns.
ChunkStream open_csv(const Input& input) {
    return once([input] {
        const auto& aggregate = *input->source.aggregate;
        std::string out = "kind,from,self,pc,count\n";
        for (const auto& a : aggregate.arcs()) {
            out += "arc," + hex_address(a.from_pc) + "," + hex_address(a.self_pc) + ",," +
                   std::to_string(a.count) + "\n";
        }
        for (const auto& p : aggregate.pc_samples())
            out += "pc,,," + hex_address(p.pc) + "," + std::to_string(p.count) + "\n";
        return out;
    });
}

// Chunks made page by page: pages are pulled until one makes a non-empty chunk (an empty page
// is not the end; only no page is).
template <class NextPage, class ChunkOf>
ChunkStream paged_chunks(NextPage next_page, ChunkOf chunk_of) {
    return [next_page = std::move(next_page),
            chunk_of = std::move(chunk_of)]() mutable -> std::optional<std::string> {
        for (;;) {
            auto page = next_page();
            if (!page) return std::nullopt;
            std::string chunk = chunk_of(std::move(*page));
            if (!chunk.empty()) return chunk;
        }
    };
}

// One NDJSON line per record.
std::string ndjson_of(const std::vector<RecordBatch>& page) {
    std::string out;
    for (const auto& batch : page) {
        const std::string t = std::to_string(batch.received_ns);
        for (const auto& r : batch.records) {
            out += "{\"t\":" + t;
            if (r.kind == protocol::RecordKind::kArc) {
                out += ",\"kind\":\"arc\",\"from\":\"" + hex_address(r.from_pc) + "\",\"self\":\"" +
                       hex_address(r.self_pc) + "\"";
            } else {
                out += ",\"kind\":\"pc\",\"pc\":\"" + hex_address(r.self_pc) + "\"";
            }
            out += ",\"count\":" + std::to_string(r.count) + "}\n";
        }
    }
    return out;
}

// Every record with its receive time, a page of batches per chunk.
ChunkStream open_ndjson(const Input& input) {
    if (!input->records) throw std::invalid_argument("this source has no records to export");
    return paged_chunks([input] { return input->records(); }, ndjson_of);
}

// The bytes as received.
ChunkStream open_raw(const Input& input) {
    if (!input->raw) throw std::invalid_argument("this source has no raw bytes to export");
    return paged_chunks([input] { return input->raw(); }, [](std::string page) { return page; });
}

ChunkStream open_pprof(const Input& input) {
    // A probe's sampled stacks are the stacks themselves: pprof carries them whole, where the
    // estimate from a call graph would have no arcs to go by.
    if (input->calling_context && input->calling_context->unit() == ContextUnit::kSamples)
        return open_cct_pprof(input);
    return once([input] { return pprof_profile(*input); });
}

ChunkStream open_callgrind(const Input& input) {
    if (!input->source.elf)
        throw ExportNeedsElf("callgrind needs the firmware's ELF to name functions");
    return once([input] { return callgrind_profile(*input); });
}

const std::array<ExportFormat, 21> kFormats = {{
    {"gmon", "application/octet-stream", ".gmon.out", "gmon.out (GNU format) for gprof", false,
     open_gmon},
    {"text", "text/plain; charset=utf-8", ".txt",
     "the flat profile and call graph exactly as gprof -b prints them", false, open_text},
    {"text-intervals", "text/plain; charset=utf-8", ".intervals.txt",
     "text, the flat profile followed by each row's 95 % Wilson interval (sampling error)", false,
     open_text_intervals},
    {"text-lines", "text/plain; charset=utf-8", ".lines.txt",
     "text by source line, exactly as gprof -l -b prints it", false, open_text_lines},
    {"json", "application/json", ".json", "the JSON report (schema rackprof.report/1)", false,
     open_json},
    {"csv", "text/csv", ".csv", "the aggregate: kind,from,self,pc,count", false, open_csv},
    {"ndjson", "application/x-ndjson", ".ndjson", "every record with its receive time", true,
     open_ndjson},
    {"raw", "application/octet-stream", ".raw", "the wire bytes as received", true, open_raw},
    {"pprof", "application/octet-stream", ".pb.gz",
     "pprof's profile.proto, gzipped (go tool pprof): PC samples on gprof's call stacks, and call "
     "arcs; a probe's sampled stacks as they were unwound",
     false, open_pprof},
    {"callgrind", "text/plain; charset=utf-8", ".callgrind.out",
     "KCachegrind, callgrind_annotate: self samples, gprof's time along each arc", false,
     open_callgrind},
    {"folded", "text/plain; charset=utf-8", ".folded.txt",
     "folded stacks (flamegraph.pl, Pyroscope) estimated from the call graph", false, open_folded},
    {"speedscope", "application/json", ".speedscope.json",
     "speedscope: the measured calling contexts where entry/exit events exist, beside gprof's "
     "estimated stacks (with source lines)",
     false, open_speedscope},
    {"dot", "text/vnd.graphviz", ".dot",
     "gprof2dot's call graph in DOT (functions >= 0.5 %, arcs >= 0.1 %)", false, open_dot},
    {"svg", "image/svg+xml", ".svg", "the dot call graph laid out by Graphviz", false, open_svg},
    {"cct-folded", "text/plain; charset=utf-8", ".cct.folded.txt",
     "folded stacks of the calling-context tree: cycles from entry/exit events, or a probe's "
     "sampled stacks",
     false, open_cct_folded},
    {"cct-speedscope", "application/json", ".cct.speedscope.json",
     "speedscope's evented profiles of the measured calling-context tree, in cycles", false,
     open_cct_speedscope},
    {"cct-pprof", "application/octet-stream", ".cct.pb.gz",
     "pprof's profile.proto of the measured calling-context tree: cycles and calls per path", false,
     open_cct_pprof},
    {"cct-json", "application/json", ".cct.json",
     "the measured calling-context tree and each arc's measured vs gprof-estimated time", false,
     open_cct_json},
    {"tasks", "text/plain; charset=utf-8", ".tasks.txt",
     "an RTOS's tasks (share of samples with its interval, cycles) and the interrupt table "
     "(count, total, mean, max, p99 cycles), decoded from the raw bytes",
     false, open_tasks_text, true},
    {"tasks-json", "application/json", ".tasks.json",
     "tasks as JSON, with the interrupt table under \"interrupts\" (the API's /tasks and "
     "/interrupts)",
     false, open_tasks_json, true},
    {"trace", "application/json", ".trace.json",
     "the Trace Event format (Perfetto UI, chrome://tracing, speedscope): a track per task with "
     "its calls as slices, one for interrupts, one for the running task",
     false, open_trace, true},
}};

// The report's "raw" object: what gmon.out holds, by address.
void write_raw_json(JsonStream& out, const GmonData& data, std::uint64_t samples_outside) {
    out.begin_object().key("arcs").begin_array();
    for (const auto& a : data.arcs) {
        out.begin_object()
            .field("count", a.count)
            .field("from", hex_address(a.from_pc))
            .field("self", hex_address(a.self_pc))
            .end_object();
    }
    out.end_array().key("histograms").begin_array();
    for (const auto& h : data.histograms) {
        out.begin_object()
            .field("bins", h.bins.size())
            .field("high_pc", hex_address(h.high_pc))
            .field("low_pc", hex_address(h.low_pc))
            .field("prof_rate", h.prof_rate)
            .field("samples", h.total())
            .end_object();
    }
    out.end_array().field("samples_outside_histogram", samples_outside).end_object();
}

}  // namespace

std::span<const ExportFormat> export_formats() {
    return kFormats;
}

const ExportFormat* find_export_format(std::string_view name) {
    return protocol::find_named(export_formats(), name);
}

std::string export_format_names() {
    return protocol::join_names(export_formats());
}

ChunkStream open_export(std::string_view format, const std::shared_ptr<const ExportInput>& input) {
    const auto* f = find_export_format(format);
    if (!f)
        throw std::invalid_argument("unknown export format '" + std::string(format) + "' (" +
                                    export_format_names() + ")");
    return f->open(input);
}

void export_to(std::string_view format, const std::shared_ptr<const ExportInput>& input,
               const std::function<void(std::string_view chunk)>& out) {
    auto stream = open_export(format, input);
    while (auto chunk = stream()) out(*chunk);
}

// Members in nlohmann's key order (sorted), as nlohmann's dump() would print the document.
void write_report_json(JsonStream& out, const ExportInput& input) {
    const auto binned = gmon_data_of(input.source);
    out.begin_object();
    // Only where a tree was measured: reports of sources without one have no such member.
    if (input.calling_context && !input.calling_context->empty()) {
        write_calling_context_json(out.key("calling_context"), *input.calling_context,
                                   ContextFrameNames(input.source.elf.get()));
    }
    out.key("profile");
    if (input.source.elf) {
        write_profile_json(out, profile_of(input.source, binned.data, input.profile_options),
                           input.json_options);
    } else {
        out.value(nullptr);
    }
    write_raw_json(out.key("raw"), binned.data, binned.samples_outside);
    out.field("schema", "rackprof.report/1").field("source", input.summary).end_object();
}

}  // namespace rackprof::gmon
