#include "gmon/folded_export.h"

#include <map>
#include <stdexcept>

#include "gmon/single_chunk.h"

namespace rackprof::gmon {

namespace {

// ';' separates frames and a line ends the stack: neither may stand in a name.
std::string folded_frame(std::string_view name) {
    std::string out(name);
    for (char& c : out) {
        if (c == ';' || c == '\n' || c == '\r') c = '_';
    }
    return out;
}

}  // namespace

std::string folded_stacks(const Profile& profile, const EstimatedStacks& stacks) {
    std::map<std::string, std::uint64_t> lines;
    for (const EstimatedStack& stack : stacks.stacks) {
        std::string line;
        for (const std::size_t frame : stack.frames) {
            if (!line.empty()) line += ';';
            line += folded_frame(frame_name(profile, frame));
        }
        lines[line] += stack.samples;
    }
    std::string out;
    for (const auto& [line, samples] : lines) out += line + " " + std::to_string(samples) + "\n";
    return out;
}

ChunkStream open_folded(const std::shared_ptr<const ExportInput>& input) {
    if (!input->source.elf)
        throw std::invalid_argument("folded stacks need the ELF (function names)");
    return single_chunk([input] {
        const Profile profile = profile_of(input->source, input->profile_options);
        return folded_stacks(profile, estimate_stacks(profile));
    });
}

}  // namespace rackprof::gmon
