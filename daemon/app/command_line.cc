#include "daemon/app/command_line.h"

#include <cctype>

namespace rackprof::daemon {

CommandLine::CommandLine(const std::vector<std::string>& args, const std::set<std::string>& valued,
                         const std::set<std::string>& flags) {
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& arg = args[i];
        if (arg.size() < 2 || arg[0] != '-' || arg == "--") {
            if (arg == "--") {
                positionals_.insert(positionals_.end(), args.begin() + static_cast<long>(i) + 1,
                                    args.end());
                break;
            }
            positionals_.push_back(arg);
            continue;
        }
        std::string name = arg;
        std::optional<std::string> value;
        if (const auto eq = arg.find('='); eq != std::string::npos && arg.rfind("--", 0) == 0) {
            name = arg.substr(0, eq);
            value = arg.substr(eq + 1);
        }
        if (flags.count(name)) {
            if (value) throw UsageError(name + " takes no value");
            values_[name] = "";
        } else if (valued.count(name)) {
            if (!value) {
                if (i + 1 >= args.size()) throw UsageError(name + " needs a value");
                value = args[++i];
            }
            values_[name] = *value;
            all_values_[name].push_back(*value);
        } else {
            throw UsageError("unknown option " + name);
        }
    }
}

std::string CommandLine::get(const std::string& name, const std::string& fallback) const {
    auto it = values_.find(name);
    return it == values_.end() ? fallback : it->second;
}

std::vector<std::string> CommandLine::get_all(const std::string& name) const {
    const auto it = all_values_.find(name);
    return it == all_values_.end() ? std::vector<std::string>{} : it->second;
}

std::optional<std::string> CommandLine::get(const std::string& name) const {
    auto it = values_.find(name);
    if (it == values_.end()) return std::nullopt;
    return it->second;
}

std::uint64_t CommandLine::get_uint(const std::string& name, std::uint64_t fallback) const {
    const auto value = get(name);
    if (!value) return fallback;
    try {
        return parse_size(*value);
    } catch (const UsageError&) {
        throw UsageError(name + " needs a whole number, not '" + *value + "'");
    }
}

double CommandLine::get_rate(const std::string& name) const {
    const auto value = get(name);
    if (!value) return 0.0;
    std::size_t used = 0;
    double rate = -1;
    try {
        rate = std::stod(*value, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used != value->size() || !(rate >= 0.0 && rate <= 1.0)) {
        throw UsageError(name + " needs a probability between 0 and 1, not '" + *value + "'");
    }
    return rate;
}

std::string CommandLine::choice(const std::string& name, const std::string& fallback,
                                const std::set<std::string>& allowed) const {
    const std::string value = get(name, fallback);
    if (!allowed.count(value)) {
        std::string list;
        for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
        throw UsageError(name + " must be one of " + list + ", not '" + value + "'");
    }
    return value;
}

std::uint64_t parse_size(const std::string& text) {
    std::size_t digits = 0;
    while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
    if (digits == 0 || digits > 18) throw UsageError("not a number: '" + text + "'");
    std::uint64_t value = std::stoull(text.substr(0, digits));
    const std::string suffix = text.substr(digits);
    if (suffix.empty()) return value;
    if (suffix == "k" || suffix == "K") return value << 10;
    if (suffix == "M") return value << 20;
    if (suffix == "G") return value << 30;
    throw UsageError("unknown size suffix in '" + text + "' (use k, M or G)");
}

}  // namespace rackprof::daemon
