#include "gmon/callgrind_export.h"

#include <cmath>
#include <sstream>

namespace rackprof::gmon {

namespace {

// Names and paths on one line whatever they hold.
std::string one_line(std::string s) {
    for (char& c : s) {
        if (c == '\n' || c == '\r') c = ' ';
    }
    return s;
}

std::string file_of(const ProfileSymbol& s) {
    return s.file.empty() ? "???" : one_line(s.file);  // callgrind's name for "unknown"
}

std::uint64_t whole(double samples) {
    return samples > 0 ? static_cast<std::uint64_t>(std::llround(samples)) : 0;
}

// The arcs a caller's block lists: those gprof charges time along.
bool listed(const Profile& p, const ProfileArc& a) {
    if (a.parent == a.child || a.count == 0) return false;
    const std::size_t cycle = p.nodes[a.parent].cycle;
    return cycle == 0 || cycle != p.nodes[a.child].cycle;
}

void header(std::ostringstream& out, const ExportInput& input, const Profile& p) {
    out << "# callgrind format\nversion: 1\ncreator: rackprof\n";
    out << "cmd: " << one_line(input.source.elf->path().string()) << "\n";
    const double ms = p.prof_rate ? 1000.0 / p.prof_rate : 0;
    out << "desc: Samples: PC samples at " << p.prof_rate << " Hz (one is " << ms << " ms)\n";
    out << "desc: Calls: costs are gprof's propagated time along each arc, in whole samples\n";
    for (const auto& [key, item] : input.summary.items()) {
        // A stored session's summary is an object: its id stands for it.
        const nlohmann::json& value = item.is_object() && item.contains("id") ? item["id"] : item;
        if (value.is_string() && !value.get<std::string>().empty())
            out << "desc: " << key << ": " << one_line(value.get<std::string>()) << "\n";
        else if (value.is_number() || value.is_array())
            out << "desc: " << key << ": " << one_line(value.dump()) << "\n";
    }
    out << "positions: line\nevents: Samples\n";
}

}  // namespace

std::string callgrind_profile(const ExportInput& input) {
    if (!input.source.elf)
        throw ExportNeedsElf("callgrind needs the firmware's ELF to name functions");
    const Profile p = profile_of(input.source, input.profile_options);
    std::ostringstream out;
    header(out, input, p);
    std::ostringstream body;
    std::uint64_t total = 0;
    for (std::size_t s = 0; s < p.symbols.size(); ++s) {
        const ProfileSymbol& sym = p.symbols[s];
        const ProfileNode& n = p.nodes[s];
        if (n.self_time == 0 && n.parents.empty() && n.children.empty()) continue;
        body << "\nfl=" << file_of(sym) << "\nfn=" << one_line(sym.name) << "\n";
        const std::uint64_t self = whole(n.self_time);
        total += self;
        body << sym.line << " " << self << "\n";
        for (const std::size_t ai : n.children) {
            const ProfileArc& a = p.arcs[ai];
            if (!listed(p, a)) continue;
            const ProfileSymbol& callee = p.symbols[a.child];
            body << "cfl=" << file_of(callee) << "\ncfn=" << one_line(callee.name) << "\n";
            body << "calls=" << a.count << " " << callee.line << "\n";
            body << sym.line << " " << whole(a.time + a.child_time) << "\n";
        }
    }
    // Histogram samples gprof credited to no function (outside every symbol's range).
    double credited = 0;
    for (const ProfileNode& n : p.nodes) credited += n.self_time;
    if (const std::uint64_t outside = whole(p.total_time - credited); outside > 0) {
        body << "\nfl=???\nfn=(outside every function)\n0 " << outside << "\n";
        total += outside;
    }
    out << "summary: " << total << "\n" << body.str();
    return out.str();
}

}  // namespace rackprof::gmon
