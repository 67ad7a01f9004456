// Where inside a function: its samples per source line and per instruction, each with its 95 %
// interval, and the calls made from each line and instruction (where arcs start), as pprof's
// `list` and `disasm` and `gprof -A` show them. Counts are the aggregate's own (a PC sample
// belongs to the instruction holding it), not the histogram's shares of bins. Source text is
// read only from the roots a SourceRoots names, never from anywhere else.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gmon/aggregate.h"
#include "gmon/symbolizer.h"

namespace rackprof::gmon {

// The folders whose files may be shown as source (config `[sources] roots`). A file is read
// only when its real path (symbolic links resolved) lies inside a root's real path.
class SourceRoots {
  public:
    SourceRoots() = default;
    explicit SourceRoots(std::vector<std::filesystem::path> roots);
    // The ELF's compilation directories (DW_AT_comp_dir) that exist: the default.
    static SourceRoots of_elf(const Symbolizer& elf);
    const std::vector<std::filesystem::path>& roots() const { return roots_; }
    // The file's lines (without line ends), or nothing: outside every root, missing,
    // unreadable, or over 16 MiB.
    std::optional<std::vector<std::string>> read(const std::string& file) const;

  private:
    std::vector<std::filesystem::path> roots_;  // real paths
};

struct AnnotatedInstruction {
    std::uint64_t addr = 0;
    std::uint32_t size = 0;
    std::string text;
    std::string file;
    int line = 0;
    std::uint64_t samples = 0;
    std::uint64_t calls = 0;  // calls made by this instruction (arcs whose call site it is)
};

struct AnnotatedLine {
    std::string file;
    int line = 0;
    std::optional<std::string> text;  // the source line, where the file could be read
    std::uint64_t samples = 0;
    std::uint64_t calls = 0;
};

struct AnnotatedFunction {
    std::string name;
    std::uint64_t addr = 0;
    std::uint64_t end = 0;  // one past the last byte
    std::string file;       // of its entry
    std::uint64_t samples = 0;
    std::uint64_t calls = 0;
    // The entry file's lines from the first to the last that holds code (with their text), then
    // lines of other files (inlined code) that hold samples or calls.
    std::vector<AnnotatedLine> lines;
    std::vector<AnnotatedInstruction> instructions;  // with AnnotateOptions::instructions
    bool source_shown = false;                       // the entry file was read
    // Longer than kMaxAnnotatedBytes: only its first 256 KiB are decoded (an ELF may claim a
    // function of gigabytes).
    bool truncated = false;
};

struct Annotation {
    std::uint64_t total_samples = 0;  // every PC sample of the aggregate
    std::vector<AnnotatedFunction> functions;
    std::string disassembler;  // "capstone 4.0"
};

inline constexpr std::uint64_t kMaxAnnotatedBytes = std::uint64_t{256} << 10;

struct AnnotateOptions {
    std::string function;  // gprof's name (several statics may share it); empty: every function
                           // with samples or calls, busiest first
    bool instructions = false;
    std::size_t max_functions = 50;  // for the whole program; 0: every function
};

// Throws std::invalid_argument naming the function when none of that name exists.
Annotation annotate(const Aggregate& aggregate, const Symbolizer& elf, const SourceRoots& roots,
                    const AnnotateOptions& options);

// pprof's `list` layout (and, with instructions, each line's instructions under it): per line,
// samples, share of all samples, its 95 % interval, calls made, the line and its text.
std::string annotation_text(const Annotation& annotation);
nlohmann::json annotation_json(const Annotation& annotation);

}  // namespace rackprof::gmon
