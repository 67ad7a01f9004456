#include "daemon/config/link_policy.h"

#include <fnmatch.h>

#include <stdexcept>

#include "daemon/config/link_uri.h"

namespace rackprof::daemon::config {

namespace {

// What a pattern is matched against: parse_link_uri has refused "..", control characters
// and unknown schemes, so this string names exactly what the link opens.
std::string canonical(const LinkUri& uri) {
    if (uri.scheme == "tcp" || uri.scheme == "gdb")
        return uri.scheme + "://" + uri.host + ":" + std::to_string(uri.port);
    return uri.scheme + "://" + uri.path;
}

std::string listed(const std::vector<std::string>& patterns) {
    if (patterns.empty()) return "none (server.api_links is empty)";
    std::string out;
    for (const auto& p : patterns) out += (out.empty() ? "" : ", ") + p;
    return out;
}

}  // namespace

bool LinkPolicy::allows(const std::string& link) const {
    try {
        check(link);
        return true;
    } catch (const std::invalid_argument&) {
        return false;
    }
}

void LinkPolicy::check(const std::string& link) const {
    const std::string form = canonical(parse_link_uri(link));
    for (const auto& pattern : patterns) {
        if (::fnmatch(pattern.c_str(), form.c_str(), 0) == 0) return;
    }
    throw std::invalid_argument(
        "'" + form + "' is not allowed over the API (server.api_links allows: " + listed(patterns) +
        ")");
}

std::vector<std::string> default_api_links() {
    return {"serial:///dev/rackprof/*", "serial:///dev/ttyUSB*",
            "serial:///dev/ttyACM*",    "tcp://127.0.0.1:*",
            "tcp://\\[::1\\]:*",        "gdb://127.0.0.1:*",
            "gdb://\\[::1\\]:*",        "sim://*"};
}

}  // namespace rackprof::daemon::config
