// A small, strict command-line reader for the rackprof subcommands: --name VALUE, --name=VALUE,
// -o VALUE, flags, and positionals. Unknown options are errors, so typos never pass silently.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace rackprof::daemon {

class UsageError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

class CommandLine {
  public:
    // `valued`: options that take a value; `flags`: options that do not.
    CommandLine(const std::vector<std::string>& args, const std::set<std::string>& valued,
                const std::set<std::string>& flags);

    bool has(const std::string& name) const { return values_.count(name) > 0; }
    std::string get(const std::string& name, const std::string& fallback) const;
    std::optional<std::string> get(const std::string& name) const;
    std::uint64_t get_uint(const std::string& name, std::uint64_t fallback) const;
    double get_rate(const std::string& name) const;  // a probability in [0, 1]
    std::string choice(const std::string& name, const std::string& fallback,
                       const std::set<std::string>& allowed) const;
    // Every value a repeatable option was given, in order (get() gives the last).
    std::vector<std::string> get_all(const std::string& name) const;
    const std::vector<std::string>& positionals() const { return positionals_; }

  private:
    std::map<std::string, std::string> values_;
    std::map<std::string, std::vector<std::string>> all_values_;
    std::vector<std::string> positionals_;
};

// "200M", "64k", "1G", "1000": bytes.
std::uint64_t parse_size(const std::string& text);

}  // namespace rackprof::daemon
