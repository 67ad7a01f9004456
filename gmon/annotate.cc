#include "gmon/annotate.h"

#include <elfutils/libdw.h>

#include <dwarf.h>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <stdexcept>
#include <system_error>

#include "gmon/function_code.h"
#include "gmon/function_index.h"
#include "gmon/report.h"
#include "gmon/sampling_stats.h"

namespace rackprof::gmon {

namespace {

constexpr std::uintmax_t kMaxSourceBytes = std::uintmax_t{16} << 20;
constexpr int kMaxLinesShown = 4000;  // of one function's entry file

std::filesystem::path real_path(const std::filesystem::path& p) {
    std::error_code ec;
    auto real = std::filesystem::canonical(p, ec);
    return ec ? std::filesystem::path() : real;
}

bool inside(const std::filesystem::path& root, const std::filesystem::path& path) {
    const auto [r, p] = std::mismatch(root.begin(), root.end(), path.begin(), path.end());
    return r == root.end();
}

}  // namespace

SourceRoots::SourceRoots(std::vector<std::filesystem::path> roots) {
    for (const auto& root : roots) {
        if (auto real = real_path(root); !real.empty()) roots_.push_back(std::move(real));
    }
}

SourceRoots SourceRoots::of_elf(const Symbolizer& elf) {
    std::vector<std::filesystem::path> dirs;
    Dwarf* dwarf = elf.dwarf();
    Dwarf_CU* cu = nullptr;
    Dwarf_Die cudie, subdie;
    Dwarf_Half version = 0;
    std::uint8_t unit_type = 0;
    while (dwarf && dwarf_get_units(dwarf, cu, &cu, &version, &unit_type, &cudie, &subdie) == 0) {
        Dwarf_Attribute attr;
        const char* dir = dwarf_formstring(dwarf_attr(&cudie, DW_AT_comp_dir, &attr));
        if (dir && std::find(dirs.begin(), dirs.end(), dir) == dirs.end()) dirs.emplace_back(dir);
    }
    return SourceRoots(std::move(dirs));
}

std::optional<std::vector<std::string>> SourceRoots::read(const std::string& file) const {
    for (const auto& root : roots_) {
        const std::filesystem::path given(file);
        const auto real = real_path(given.is_absolute() ? given : root / given);
        if (real.empty() || !inside(root, real)) continue;
        std::error_code ec;
        if (!std::filesystem::is_regular_file(real, ec) ||
            std::filesystem::file_size(real, ec) > kMaxSourceBytes || ec)
            continue;
        std::ifstream in(real);
        if (!in) continue;
        std::vector<std::string> lines;
        for (std::string line; std::getline(in, line);) {
            if (!line.empty() && line.back() == '\r') line.pop_back();
            lines.push_back(std::move(line));
        }
        return lines;
    }
    return std::nullopt;
}

namespace {

struct Counts {
    std::map<std::uint64_t, std::uint64_t> samples;  // by PC
    std::map<std::uint64_t, std::uint64_t> calls;    // by call site
};

// The functions to annotate: the named ones, or the busiest.
std::vector<const ProfileSymbol*> chosen(const FunctionIndex& index, const Counts& all,
                                         const Symbolizer& elf, const AnnotateOptions& options) {
    std::vector<const ProfileSymbol*> out;
    if (!options.function.empty()) {
        for (const ProfileSymbol& s : index.symbols())
            if (s.name == options.function) out.push_back(&s);
        if (out.empty())
            throw std::invalid_argument("no function '" + options.function + "' in " +
                                        elf.path().filename().string());
        return out;
    }
    std::map<const ProfileSymbol*, std::pair<std::uint64_t, std::uint64_t>> busy;
    for (const auto& [pc, n] : all.samples)
        if (const auto* s = index.holding(pc)) busy[s].first += n;
    for (const auto& [site, n] : all.calls)
        if (const auto* s = index.holding(site)) busy[s].second += n;
    std::vector<std::pair<std::pair<std::uint64_t, std::uint64_t>, const ProfileSymbol*>> ranked;
    for (const auto& [s, n] : busy) ranked.emplace_back(n, s);
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const auto& l, const auto& r) { return l.first > r.first; });
    const std::size_t limit = options.max_functions ? options.max_functions : ranked.size();
    for (std::size_t i = 0; i < ranked.size() && i < limit; ++i) out.push_back(ranked[i].second);
    return out;
}

// The samples and calls of [low, high) given to the instruction holding each address; without
// instructions (no code bytes), each address is one.
void count_instructions(AnnotatedFunction& f, const Counts& counts) {
    auto holder = [&](std::uint64_t addr) -> AnnotatedInstruction* {
        auto it = std::upper_bound(
            f.instructions.begin(), f.instructions.end(), addr,
            [](std::uint64_t a, const AnnotatedInstruction& i) { return a < i.addr; });
        if (it == f.instructions.begin()) return nullptr;
        --it;
        return addr < it->addr + it->size ? &*it : nullptr;
    };
    for (const auto& [pc, n] : counts.samples) {
        if (auto* i = holder(pc)) i->samples += n;
    }
    for (const auto& [site, n] : counts.calls) {
        if (auto* i = holder(site)) i->calls += n;
    }
}

// The function's lines: its entry file's from the first to the last holding code (with text
// where the roots let it be read), then other files' lines that hold samples or calls.
void gather_lines(AnnotatedFunction& f, const SourceRoots& roots,
                  std::map<std::string, std::optional<std::vector<std::string>>>& files) {
    std::map<std::pair<std::string, int>, AnnotatedLine> by_line;
    int first = 0, last = 0;
    for (const AnnotatedInstruction& i : f.instructions) {
        if (i.line <= 0) continue;
        AnnotatedLine& l = by_line[{i.file, i.line}];
        l.file = i.file;
        l.line = i.line;
        l.samples += i.samples;
        l.calls += i.calls;
        if (i.file == f.file) {
            first = first ? std::min(first, i.line) : i.line;
            last = std::max(last, i.line);
        }
    }
    last = std::min(last, first + kMaxLinesShown);
    auto text_of = [&](const std::string& file) -> const std::optional<std::vector<std::string>>& {
        auto it = files.find(file);
        if (it == files.end()) it = files.emplace(file, roots.read(file)).first;
        return it->second;
    };
    const auto& entry_text = text_of(f.file);
    f.source_shown = entry_text.has_value();
    for (int n = first; first && n <= last; ++n) {
        AnnotatedLine l = by_line.count({f.file, n}) ? by_line[{f.file, n}] : AnnotatedLine{};
        l.file = f.file;
        l.line = n;
        if (entry_text && n <= static_cast<int>(entry_text->size())) l.text = (*entry_text)[n - 1];
        f.lines.push_back(std::move(l));
    }
    for (auto& [key, l] : by_line) {
        if (key.first == f.file || (l.samples == 0 && l.calls == 0)) continue;
        const auto& text = text_of(key.first);
        if (text && l.line <= static_cast<int>(text->size())) l.text = (*text)[l.line - 1];
        f.lines.push_back(std::move(l));
    }
}

AnnotatedFunction annotate_one(
    const ProfileSymbol& s, const Symbolizer& elf, const Counts& all, const SourceRoots& roots,
    std::map<std::string, std::optional<std::vector<std::string>>>& files) {
    AnnotatedFunction f;
    f.name = s.name;
    f.addr = s.addr;
    f.end = s.end_addr + 1;
    const std::uint64_t decoded_end =
        f.end - f.addr > kMaxAnnotatedBytes ? f.addr + kMaxAnnotatedBytes : f.end;
    f.truncated = decoded_end < f.end;
    if (const auto entry = elf.source_of(s.addr)) f.file = entry->file;
    Counts counts;
    for (auto it = all.samples.lower_bound(f.addr); it != all.samples.end() && it->first < f.end;
         ++it)
        counts.samples.insert(*it);
    for (auto it = all.calls.lower_bound(f.addr); it != all.calls.end() && it->first < f.end; ++it)
        counts.calls.insert(*it);
    for (const Instruction& i : function_instructions(elf, f.addr, decoded_end))
        f.instructions.push_back({i.addr, i.size, i.text, {}, 0, 0, 0});
    if (f.instructions.empty()) {  // no code bytes: each sampled or calling address is one
        std::map<std::uint64_t, int> seen;
        for (const auto& [pc, n] : counts.samples) seen[pc];
        for (const auto& [site, n] : counts.calls) seen[site];
        for (const auto& [addr, unused] : seen)
            f.instructions.push_back({addr, 1, "", {}, 0, 0, 0});
    }
    count_instructions(f, counts);
    for (AnnotatedInstruction& i : f.instructions) {
        if (const auto where = elf.source_of(i.addr)) {
            i.file = where->file;
            i.line = where->line;
        }
        f.samples += i.samples;
        f.calls += i.calls;
    }
    gather_lines(f, roots, files);
    return f;
}

}  // namespace

Annotation annotate(const Aggregate& aggregate, const Symbolizer& elf, const SourceRoots& roots,
                    const AnnotateOptions& options) {
    const FunctionIndex index(elf);
    Annotation out;
    out.total_samples = aggregate.total_samples();
    out.disassembler = disassembler_version();
    Counts all;
    for (const PcCount& pc : aggregate.pc_samples())
        all.samples[elf.arm() ? pc.pc & ~std::uint64_t{1} : pc.pc] += pc.count;
    for (const ArcCount& arc : aggregate.arcs())
        all.calls[call_site_of(elf, arc.from_pc)] += arc.count;
    std::map<std::string, std::optional<std::vector<std::string>>> files;
    for (const ProfileSymbol* s : chosen(index, all, elf, options)) {
        out.functions.push_back(annotate_one(*s, elf, all, roots, files));
        if (!options.instructions) out.functions.back().instructions.clear();
    }
    return out;
}

namespace {

struct Cells {
    std::string samples, share, interval, calls;
};

Cells cells(std::uint64_t samples, std::uint64_t calls, std::uint64_t total) {
    Cells c{".", ".", "", "."};
    char buf[64];
    if (samples) {
        c.samples = std::to_string(samples);
        std::snprintf(buf, sizeof buf, "%.2f%%", share_percent(samples, total));
        c.share = buf;
        const auto [lo, hi] = wilson_interval(samples, total);
        std::snprintf(buf, sizeof buf, "[%.2f, %.2f]", 100 * lo, 100 * hi);
        c.interval = buf;
    }
    if (calls) c.calls = std::to_string(calls);
    return c;
}

void row(std::string& out, const Cells& c, const std::string& where, const std::string& text) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%9s %8s %16s %9s  %s", c.samples.c_str(), c.share.c_str(),
                  c.interval.c_str(), c.calls.c_str(), where.c_str());
    out += buf;
    out += text;
    out += '\n';
}

std::string line_label(const AnnotatedLine& l, const std::string& entry_file) {
    std::string label = std::to_string(l.line) + ":  ";
    if (l.file != entry_file) label = source_file_name(l.file) + ":" + label;
    return label;
}

void print_function(std::string& out, const AnnotatedFunction& f, std::uint64_t total) {
    out += "ROUTINE ======================== " + f.name + " in " +
           (f.file.empty() ? std::string("(no source lines)") : f.file) + "\n";
    const Cells whole = cells(f.samples, f.calls, total);
    out += "  " + std::to_string(f.samples) + " samples (" + whole.share + " " + whole.interval +
           "), " + std::to_string(f.calls) + " calls made" +
           (f.source_shown || f.file.empty() ? "" : "; source not under a source root") +
           (f.truncated ? "; only its first 256 KiB decoded" : "") + "\n";
    row(out, {"samples", "% total", "95 % interval", "calls"}, "line", "");
    std::map<std::pair<std::string, int>, std::vector<const AnnotatedInstruction*>> by_line;
    std::vector<const AnnotatedInstruction*> lineless;
    for (const AnnotatedInstruction& i : f.instructions) {
        if (i.line > 0) {
            by_line[{i.file, i.line}].push_back(&i);
        } else {
            lineless.push_back(&i);
        }
    }
    auto instruction_rows = [&](const std::vector<const AnnotatedInstruction*>& list) {
        for (const AnnotatedInstruction* i : list) {
            char addr[32];
            std::snprintf(addr, sizeof addr,
                          "    %8llx:  ", static_cast<unsigned long long>(i->addr));
            row(out, cells(i->samples, i->calls, total), addr, i->text);
        }
    };
    for (const AnnotatedLine& l : f.lines) {
        row(out, cells(l.samples, l.calls, total), line_label(l, f.file), l.text.value_or(""));
        if (auto it = by_line.find({l.file, l.line}); it != by_line.end())
            instruction_rows(it->second);
    }
    if (!lineless.empty()) {
        out += "  (no source line)\n";
        instruction_rows(lineless);
    }
}

}  // namespace

std::string annotation_text(const Annotation& annotation) {
    std::string out = "Total: " + std::to_string(annotation.total_samples) + " samples\n";
    for (const AnnotatedFunction& f : annotation.functions)
        print_function(out, f, annotation.total_samples);
    return out;
}

namespace {

nlohmann::json counted(std::uint64_t samples, std::uint64_t calls, std::uint64_t total) {
    const auto [lo, hi] = wilson_interval(samples, total);
    return {{"samples", samples},
            {"share", share_percent(samples, total)},
            {"interval", {100 * lo, 100 * hi}},
            {"calls", calls}};
}

}  // namespace

nlohmann::json annotation_json(const Annotation& annotation) {
    nlohmann::json functions = nlohmann::json::array();
    const std::uint64_t total = annotation.total_samples;
    for (const AnnotatedFunction& f : annotation.functions) {
        nlohmann::json fj = counted(f.samples, f.calls, total);
        fj["name"] = f.name;
        fj["address"] = hex_address(f.addr);
        fj["end"] = hex_address(f.end);
        fj["file"] = f.file;
        fj["source_shown"] = f.source_shown;
        fj["truncated"] = f.truncated;
        fj["lines"] = nlohmann::json::array();
        for (const AnnotatedLine& l : f.lines) {
            nlohmann::json lj = counted(l.samples, l.calls, total);
            lj["file"] = l.file;
            lj["line"] = l.line;
            lj["text"] = l.text ? nlohmann::json(*l.text) : nlohmann::json(nullptr);
            fj["lines"].push_back(std::move(lj));
        }
        fj["instructions"] = nlohmann::json::array();
        for (const AnnotatedInstruction& i : f.instructions) {
            nlohmann::json ij = counted(i.samples, i.calls, total);
            ij["address"] = hex_address(i.addr);
            ij["size"] = i.size;
            ij["text"] = i.text;
            ij["file"] = i.file;
            ij["line"] = i.line;
            fj["instructions"].push_back(std::move(ij));
        }
        functions.push_back(std::move(fj));
    }
    return {{"total_samples", total},
            {"disassembler", annotation.disassembler},
            {"functions", std::move(functions)}};
}

}  // namespace rackprof::gmon
