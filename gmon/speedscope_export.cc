#include "gmon/speedscope_export.h"

#include <map>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "gmon/calling_context_export.h"
#include "gmon/single_chunk.h"

namespace rackprof::gmon {

namespace {

nlohmann::json frame_json(const Profile& profile, std::size_t frame) {
    nlohmann::json out = {{"name", frame_name(profile, frame)}};
    if (frame == kUnknownFrame || frame >= profile.symbols.size()) return out;
    const ProfileSymbol& s = profile.symbols[frame];
    if (!s.file.empty()) out["file"] = s.file;
    if (s.line > 0) out["line"] = s.line;
    return out;
}

}  // namespace

std::string speedscope_document(const Profile& profile, const EstimatedStacks& stacks,
                                const std::string& name) {
    nlohmann::json frames = nlohmann::json::array();
    std::map<std::size_t, std::size_t> index_of;  // symbol -> index into frames
    nlohmann::json samples = nlohmann::json::array();
    nlohmann::json weights = nlohmann::json::array();
    // Samples are time: each is a sampling period, so speedscope shows milliseconds (whole
    // ones when the period is, as at the usual 1000 Hz).
    const std::uint32_t rate = profile.prof_rate ? profile.prof_rate : 1000;
    const auto weight = [rate](std::uint64_t n) -> nlohmann::json {
        if (1000 % rate == 0) return n * (1000 / rate);
        return static_cast<double>(n) * 1000.0 / rate;
    };
    for (const EstimatedStack& stack : stacks.stacks) {
        nlohmann::json indices = nlohmann::json::array();
        for (const std::size_t frame : stack.frames) {
            const auto [it, fresh] = index_of.try_emplace(frame, frames.size());
            if (fresh) frames.push_back(frame_json(profile, frame));
            indices.push_back(it->second);
        }
        samples.push_back(std::move(indices));
        weights.push_back(weight(stack.samples));
    }
    const nlohmann::json document = {
        {"$schema", "https://www.speedscope.app/file-format-schema.json"},
        {"exporter", "rackprof"},
        {"name", name},
        {"activeProfileIndex", 0},
        {"shared", {{"frames", std::move(frames)}}},
        {"profiles",
         {{{"type", "sampled"},
           {"name", name},
           {"unit", "milliseconds"},
           {"startValue", 0},
           {"endValue", weight(stacks.total_samples)},
           {"samples", std::move(samples)},
           {"weights", std::move(weights)}}}},
    };
    // Names come from the ELF: bytes that are not UTF-8 become U+FFFD, never an exception.
    return document.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

namespace {

// `measured`'s profiles first (the one shown), then `estimated`'s, over one frame table: each
// document's frame indices moved past the frames before them.
std::string both_profiles(const std::string& measured, const std::string& estimated) {
    using nlohmann::json;
    json out = json::parse(measured);
    const json estimate = json::parse(estimated);
    auto& frames = out["shared"]["frames"];
    const std::size_t offset = frames.size();
    for (const auto& f : estimate["shared"]["frames"]) frames.push_back(f);
    for (json p : estimate["profiles"]) {
        if (p.contains("samples")) {
            for (auto& stack : p["samples"])
                for (auto& frame : stack) frame = frame.get<std::size_t>() + offset;
        }
        if (p.contains("events")) {
            for (auto& e : p["events"]) e["frame"] = e["frame"].get<std::size_t>() + offset;
        }
        out["profiles"].push_back(std::move(p));
    }
    out["activeProfileIndex"] = 0;
    out["name"] = out.value("name", std::string()) + "; beside it gprof's estimate";
    return out.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace

ChunkStream open_speedscope(const std::shared_ptr<const ExportInput>& input) {
    if (!input->source.elf)
        throw std::invalid_argument("a speedscope profile needs the ELF (function names)");
    return single_chunk([input] {
        const Profile profile = profile_of(input->source, input->profile_options);
        const std::string name = input->source.elf->path().filename().string() + ": " +
                                 std::to_string(profile.total_samples) + " samples at " +
                                 std::to_string(profile.prof_rate) +
                                 " Hz, stacks estimated from gprof's call graph";
        std::string estimated = speedscope_document(profile, estimate_stacks(profile), name);
        // Where entry/exit events measured the calling contexts, those are the profile shown
        // (the exact one), gprof's estimate the second.
        if (!input->calling_context || input->calling_context->empty()) return estimated;
        std::string measured;
        const auto cct = open_cct_speedscope(input);
        while (auto chunk = cct()) measured += *chunk;
        return both_profiles(measured, estimated);
    });
}

}  // namespace rackprof::gmon
