#include "gmon/linker_map.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>

namespace rackprof::gmon {
namespace {

constexpr int kEmArm = 40;
constexpr int kEmRiscv = 243;
constexpr std::string_view kGnuMarker = "Linker script and memory map";
constexpr std::string_view kTiSections = "SECTION ALLOCATION MAP";
constexpr std::string_view kTiSymbols = "GLOBAL SYMBOLS: SORTED BY Symbol Address";

std::vector<std::string_view> tokens_of(std::string_view line) {
    std::vector<std::string_view> out;
    std::size_t i = 0;
    while (i < line.size()) {
        while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
        const std::size_t start = i;
        while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
        if (i > start) out.push_back(line.substr(start, i - start));
    }
    return out;
}

// "0x0000abcd" (GNU) or "0000abcd" (TI).
std::optional<std::uint64_t> hex_of(std::string_view text, bool prefixed) {
    if (prefixed) {
        if (!text.starts_with("0x")) return std::nullopt;
        text.remove_prefix(2);
    }
    std::uint64_t value = 0;
    if (text.empty() || text.size() > 16) return std::nullopt;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
    if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return value;
}

// One code input section and the global symbols the map lists in it.
struct MapSection {
    std::string function;  // from ".text.NAME" / ".text:NAME"; empty for a plain .text
    std::uint64_t addr = 0;
    std::uint64_t size = 0;
    std::vector<std::pair<std::uint64_t, std::string>> symbols;
};

template <typename F>
void for_each_line(std::string_view text, F&& f) {
    for (std::size_t start = 0; start < text.size();) {
        const auto end = std::min(text.find('\n', start), text.size());
        f(text.substr(start, end - start));
        start = end + 1;
    }
}

// ".text.startup.main" -> "main"; ".text" -> "".
std::string gnu_function_of(std::string_view section) {
    section.remove_prefix(std::string_view(".text").size());
    if (section.empty()) return {};
    section.remove_prefix(1);
    for (std::string_view part : {"startup.", "unlikely.", "hot.", "exit.", "sorted."}) {
        if (section.starts_with(part)) section.remove_prefix(part.size());
    }
    return std::string(section);
}

bool gnu_code(std::string_view section) {
    return section == ".text" || section.starts_with(".text.");
}

// The symbols of the sections: each to the next symbol in its section or the section's end;
// a function section without a symbol line, a static function of its name.
void map_symbols_of(const std::vector<MapSection>& sections, bool thumb, LinkerMap& map) {
    map.code_low = UINT64_MAX;
    for (const MapSection& s : sections) {
        if (s.size == 0) continue;
        map.code_low = std::min(map.code_low, s.addr);
        map.code_high = std::max(map.code_high, s.addr + s.size);
        auto symbols = s.symbols;
        // A symbol line the map puts under a section it is not in is not that section's.
        std::erase_if(symbols, [&](const auto& sym) {
            return sym.first < s.addr || sym.first - s.addr >= s.size;
        });
        const bool local = symbols.empty();
        if (local && !s.function.empty()) symbols.emplace_back(s.addr, s.function);
        std::sort(symbols.begin(), symbols.end());
        for (std::size_t i = 0; i < symbols.size(); ++i) {
            ElfSymbol e;
            e.name = symbols[i].second;
            e.addr = symbols[i].first;
            const std::uint64_t end =
                i + 1 < symbols.size() ? symbols[i + 1].first : s.addr + s.size;
            e.size = end > e.addr ? end - e.addr : 0;
            e.thumb = thumb;
            e.local = local;
            e.global = !local;
            e.function = true;
            e.defined = true;
            e.section_class = 't';
            map.symbols.push_back(std::move(e));
        }
    }
    if (map.code_high == 0) map.code_low = 0;
    std::stable_sort(map.symbols.begin(), map.symbols.end(),
                     [](const ElfSymbol& a, const ElfSymbol& b) { return a.addr < b.addr; });
}

LinkerMap parse_gnu_map(std::string_view text) {
    LinkerMap map;
    map.flavor = "GNU ld";
    text.remove_prefix(text.find(kGnuMarker));
    std::vector<MapSection> sections;
    std::string pending;   // a section name whose numbers are on the next line
    bool in_code = false;  // the current input section is code
    for_each_line(text, [&](std::string_view line) {
        const auto t = tokens_of(line);
        if (t.empty()) return;
        if (t[0].starts_with("OUTPUT(") && t.size() == 2) {
            if (t[1].find("littlearm") != std::string_view::npos ||
                t[1].find("bigarm") != std::string_view::npos)
                map.machine = kEmArm;
            if (t[1].find("riscv") != std::string_view::npos) map.machine = kEmRiscv;
            return;
        }
        if (line[0] == '.') {  // an output section
            in_code = false;
            if (t[0] == ".text" && t.size() >= 3 && hex_of(t[1], true) && hex_of(t[2], true)) {
                map.text_addr = *hex_of(t[1], true);
                map.text_size = *hex_of(t[2], true);
            }
            return;
        }
        const bool input = line.size() > 1 && line[0] == ' ' && line[1] == '.';
        if (input && t.size() == 1) {
            pending = std::string(t[0]);
            in_code = false;
            return;
        }
        std::string name = input ? std::string(t[0]) : pending;
        const std::size_t at = input ? 1 : 0;
        if (!name.empty() && t.size() >= at + 2 && hex_of(t[at], true) && hex_of(t[at + 1], true) &&
            (input || line[0] == ' ')) {
            pending.clear();
            in_code = gnu_code(name);
            if (in_code)
                sections.push_back(
                    {gnu_function_of(name), *hex_of(t[at], true), *hex_of(t[at + 1], true), {}});
            return;
        }
        if (t[0].starts_with("*") || input) {
            in_code = false;  // *fill*, a pattern, another section
            return;
        }
        if (in_code && t.size() == 2 && hex_of(t[0], true) &&
            t[1].find('=') == std::string_view::npos && t[1] != "PROVIDE")
            sections.back().symbols.emplace_back(*hex_of(t[0], true), std::string(t[1]));
    });
    const bool thumb = map.machine == kEmArm;
    for (MapSection& s : sections) {
        for (auto& [addr, name] : s.symbols) addr &= thumb ? ~std::uint64_t{1} : ~std::uint64_t{0};
    }
    map_symbols_of(sections, thumb, map);
    return map;
}

LinkerMap parse_ti_map(std::string_view text) {
    LinkerMap map;
    map.flavor = "TI";
    if (text.find("ARM") != std::string_view::npos) map.machine = kEmArm;
    std::vector<MapSection> sections;
    enum class Part { kHead, kSections, kSymbols } part = Part::kHead;
    bool in_text = false;  // under the .text output section
    std::vector<std::pair<std::uint64_t, std::string>> globals;
    for_each_line(text, [&](std::string_view line) {
        if (line.starts_with(kTiSections)) part = Part::kSections;
        if (line.starts_with("GLOBAL SYMBOLS")) {
            part = line.starts_with(kTiSymbols) ? Part::kSymbols : Part::kHead;
            return;
        }
        const auto t = tokens_of(line);
        if (t.empty() || part == Part::kHead) return;
        if (part == Part::kSymbols) {
            if (t.size() == 2 && hex_of(t[0], false))
                globals.emplace_back(*hex_of(t[0], false), t[1]);
            return;
        }
        if (line[0] != ' ' && line[0] != '\t') {  // an output section: name page origin length
            in_text = t[0] == ".text";
            if (in_text && t.size() >= 4 && hex_of(t[2], false) && hex_of(t[3], false)) {
                map.text_addr = *hex_of(t[2], false);
                map.text_size = *hex_of(t[3], false);
            }
            return;
        }
        const auto open = line.rfind('(');
        const auto close = line.rfind(')');
        if (!in_text || t.size() < 3 || open == std::string_view::npos || close < open) return;
        const auto addr = hex_of(t[0], false), size = hex_of(t[1], false);
        const std::string_view section = line.substr(open + 1, close - open - 1);
        if (!addr || !size || !section.starts_with(".text")) return;
        const auto colon = section.find(':');
        sections.push_back({colon == std::string_view::npos
                                ? std::string()
                                : std::string(section.substr(colon + 1)),
                            *addr,
                            *size,
                            {}});
    });
    std::sort(sections.begin(), sections.end(),
              [](const MapSection& a, const MapSection& b) { return a.addr < b.addr; });
    const bool thumb = map.machine == kEmArm;
    for (const auto& [raw, name] : globals) {
        if (thumb && (raw & 1) == 0) continue;  // data, or a label: Thumb code is odd
        const std::uint64_t addr = thumb ? raw & ~std::uint64_t{1} : raw;
        auto it =
            std::upper_bound(sections.begin(), sections.end(), addr,
                             [](std::uint64_t a, const MapSection& s) { return a < s.addr; });
        if (it == sections.begin()) continue;
        --it;
        if (addr < it->addr + it->size) it->symbols.emplace_back(addr, name);
    }
    map_symbols_of(sections, thumb, map);
    return map;
}

}  // namespace

bool looks_like_linker_map(std::string_view head) {
    for (std::string_view marker :
         {kGnuMarker, std::string_view("Archive member included to satisfy reference"),
          std::string_view("Discarded input sections"), std::string_view("Memory Configuration"),
          kTiSections, std::string_view("OUTPUT FILE NAME:"),
          std::string_view("MEMORY CONFIGURATION")}) {
        if (head.find(marker) != std::string_view::npos) return true;
    }
    return false;
}

LinkerMap parse_linker_map(std::string_view text) {
    LinkerMap map;
    if (text.find(kGnuMarker) != std::string_view::npos) {
        map = parse_gnu_map(text);
    } else if (text.find(kTiSections) != std::string_view::npos ||
               text.find(kTiSymbols) != std::string_view::npos) {
        map = parse_ti_map(text);
    } else {
        throw LinkerMapError(
            "not a linker map: neither GNU ld's 'Linker script and memory map' nor TI's "
            "'SECTION ALLOCATION MAP'");
    }
    if (map.symbols.empty())
        throw LinkerMapError("the " + map.flavor + " linker map names no code symbol (.text)");
    if (map.text_size == 0) {  // no .text output section: the code range stands for it
        map.text_addr = map.code_low;
        map.text_size = map.code_high - map.code_low;
    }
    return map;
}

}  // namespace rackprof::gmon
