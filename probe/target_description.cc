#include "probe/target_description.h"

#include <algorithm>
#include <map>
#include <stdexcept>

namespace rackprof::probe {

namespace {

// The value of `name="..."` (or '...') inside one tag's text; nothing when absent.
std::optional<std::string> attribute(std::string_view tag, std::string_view name) {
    for (std::size_t at = tag.find(name); at != std::string_view::npos;
         at = tag.find(name, at + 1)) {
        const bool starts =
            at > 0 && (tag[at - 1] == ' ' || tag[at - 1] == '\n' || tag[at - 1] == '\t');
        std::size_t eq = at + name.size();
        while (eq < tag.size() && tag[eq] == ' ') ++eq;
        if (!starts || eq >= tag.size() || tag[eq] != '=') continue;
        std::size_t quote = eq + 1;
        while (quote < tag.size() && tag[quote] == ' ') ++quote;
        if (quote >= tag.size() || (tag[quote] != '"' && tag[quote] != '\'')) return std::nullopt;
        const std::size_t end = tag.find(tag[quote], quote + 1);
        if (end == std::string_view::npos) return std::nullopt;
        return std::string(tag.substr(quote + 1, end - quote - 1));
    }
    return std::nullopt;
}

unsigned number_of(const std::string& text, const char* what) {
    std::size_t used = 0;
    unsigned long v = 0;
    try {
        v = std::stoul(text, &used, 10);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used != text.size() || v > 100000)
        throw std::runtime_error(std::string("a target description's ") + what +
                                 " is not a number: " + text);
    return static_cast<unsigned>(v);
}

struct Reader {
    const std::function<std::string(const std::string&)>& fetch;
    TargetDescription out;
    unsigned next_number = 0;
    int files = 0;

    void read(std::string_view xml, int depth) {
        if (++files > 32 || depth > 8)
            throw std::runtime_error("a target description including more than 32 files or 8 deep");
        for (std::size_t at = xml.find('<'); at != std::string_view::npos;
             at = xml.find('<', at + 1)) {
            if (xml.substr(at, 4) == "<!--") {
                at = xml.find("-->", at);
                if (at == std::string_view::npos) break;
                continue;
            }
            const std::size_t end = xml.find('>', at);
            if (end == std::string_view::npos)
                throw std::runtime_error("a target description cut short");
            const std::string_view tag = xml.substr(at, end - at + 1);
            if (tag.substr(0, 14) == "<architecture>") {
                const std::size_t close = xml.find('<', end);
                out.architecture = std::string(xml.substr(end + 1, close - end - 1));
            } else if (tag.substr(0, 11) == "<xi:include") {
                const auto href = attribute(tag, "href");
                if (!href) throw std::runtime_error("a target description's include names no file");
                read(fetch(*href), depth + 1);
            } else if (tag.substr(0, 5) == "<reg ") {
                reg(tag);
            }
            at = end;
        }
    }

    void reg(std::string_view tag) {
        const auto name = attribute(tag, "name");
        const auto bits = attribute(tag, "bitsize");
        if (!name || !bits)
            throw std::runtime_error("a target description's register without a name or size");
        TargetRegister r{*name, next_number, number_of(*bits, "bitsize")};
        if (const auto regnum = attribute(tag, "regnum")) r.number = number_of(*regnum, "regnum");
        next_number = r.number + 1;
        out.registers.push_back(std::move(r));
    }
};

}  // namespace

const TargetRegister* TargetDescription::find(std::string_view name) const {
    for (const auto& r : registers)
        if (r.name == name) return &r;
    return nullptr;
}

std::optional<std::size_t> TargetDescription::g_offset(unsigned number) const {
    std::map<unsigned, unsigned> bits;  // number -> size, in number order
    for (const auto& r : registers) bits[r.number] = r.bits;
    std::size_t offset = 0;
    for (unsigned n = 0; n < number; ++n) {
        const auto it = bits.find(n);
        if (it == bits.end() || it->second % 8) return std::nullopt;
        offset += it->second / 8;
    }
    if (!bits.count(number)) return std::nullopt;
    return offset;
}

TargetDescription parse_target_description(
    const std::string& root, const std::function<std::string(const std::string&)>& fetch) {
    Reader reader{fetch, {}, 0, 0};
    reader.read(root, 0);
    return reader.out;
}

}  // namespace rackprof::probe
