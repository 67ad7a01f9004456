#include "daemon/config/link_uri.h"

#include <algorithm>
#include <cctype>
#include <set>

namespace rackprof::daemon::config {

std::uint64_t LinkUri::number(const std::string& key, std::uint64_t fallback) const {
    const auto it = params.find(key);
    if (it == params.end()) return fallback;
    const std::string& v = it->second;
    if (v.empty() || v.size() > 12 ||
        !std::all_of(v.begin(), v.end(), [](unsigned char c) { return std::isdigit(c); })) {
        throw std::invalid_argument(key + " must be a whole number, not '" + v + "'");
    }
    return std::stoull(v);
}

namespace {

// Every number a link takes, with the range that makes sense for it: a rate of 0 would divide
// by zero, a huge one would make the simulator build pieces of gigabytes (both were persisted
// with the board, so every restart failed the same way).
struct NumberBounds {
    const char* scheme;
    const char* key;
    std::uint64_t min;
    std::uint64_t max;
    const char* unit;
};
constexpr NumberBounds kBounds[] = {
    {"serial", "baud", 50, 50'000'000, "baud"},  {"file", "rate", 1, 1'000'000'000, "bytes/s"},
    {"file", "chunk", 1, 1u << 20, "bytes"},     {"sim", "rate", 1, 10'000'000, "bytes/s"},
    {"sim", "seed", 0, 999'999'999'999, ""},     {"sim", "addr_bytes", 3, 4, ""},
    {"sim", "arc_cache", 0, 65'536, "entries"},  {"sim", "pc_cache", 0, 65'536, "entries"},
    {"gdb", "rate", 1, 10'000, "samples/s"},     {"gdb", "stacks", 0, 1, ""},
    {"gdb", "stack_bytes", 64, 16'384, "bytes"}, {"gdb", "verify", 0, 1, ""},
};

void check_bounds(const LinkUri& uri) {
    for (const auto& b : kBounds) {
        // gdb+serial takes gdb's parameters.
        const std::string scheme = uri.scheme == "gdb+serial" ? "gdb" : uri.scheme;
        if (scheme != b.scheme || !uri.params.count(b.key)) continue;
        const std::uint64_t v = uri.number(b.key, 0);
        if (v < b.min || v > b.max) {
            throw std::invalid_argument(std::string(b.key) + " must be " + std::to_string(b.min) +
                                        ".." + std::to_string(b.max) +
                                        (*b.unit ? std::string(" ") + b.unit : "") + ", not " +
                                        std::to_string(v));
        }
    }
}

// Paths are matched against the configured allow-list (link_policy.h): ".." could walk out of
// an allowed folder, and control characters would reach log lines.
void check_text(const std::string& text) {
    if (text.size() > 512) throw std::invalid_argument("a link URI is at most 512 characters");
    for (const unsigned char c : text) {
        if (c < 0x20 || c == 0x7f)
            throw std::invalid_argument("a link URI cannot contain control characters");
    }
}

void check_path(const std::string& path) {
    std::size_t start = 0;
    while (start <= path.size()) {
        const auto slash = path.find('/', start);
        const auto segment =
            path.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
        if (segment == "..") throw std::invalid_argument("link paths cannot contain '..'");
        if (slash == std::string::npos) break;
        start = slash + 1;
    }
}

// A host name (letters, digits, '-' and '.') or a bracketed IPv6 address: nothing else may
// reach the resolver, and a link policy's glob must see a host, never a port or a userinfo
// dressed as one ("127.0.0.1:1.evil.example", "127.0.0.1:22@10.0.0.1").
void check_tcp_host(const std::string& scheme, const std::string& host) {
    const auto name_char = [](unsigned char c) { return std::isalnum(c) || c == '-' || c == '.'; };
    const auto v6_char = [](unsigned char c) { return std::isxdigit(c) || c == ':' || c == '.'; };
    const bool name =
        !host.empty() && host.size() <= 253 && std::all_of(host.begin(), host.end(), name_char);
    const bool v6 = host.size() > 2 && host.front() == '[' && host.back() == ']' &&
                    std::all_of(host.begin() + 1, host.end() - 1, v6_char);
    if (!name && !v6) {
        throw std::invalid_argument("bad " + scheme + " host '" + host +
                                    "' (a host name, an IPv4 address or [IPv6])");
    }
}

}  // namespace

LinkUri parse_link_uri(const std::string& text) {
    check_text(text);
    LinkUri uri;
    const auto sep = text.find("://");
    if (sep == std::string::npos)
        throw std::invalid_argument("'" + text + "' is not a link URI (scheme://...)");
    uri.scheme = text.substr(0, sep);
    std::string rest = text.substr(sep + 3);
    if (const auto q = rest.find('?'); q != std::string::npos) {
        std::string query = rest.substr(q + 1);
        rest = rest.substr(0, q);
        std::size_t start = 0;
        while (start <= query.size()) {
            const auto amp = query.find('&', start);
            const std::string pair =
                query.substr(start, amp == std::string::npos ? std::string::npos : amp - start);
            if (!pair.empty()) {
                const auto eq = pair.find('=');
                if (eq == std::string::npos)
                    throw std::invalid_argument("query parameter '" + pair + "' needs a value");
                uri.params[pair.substr(0, eq)] = pair.substr(eq + 1);
            }
            if (amp == std::string::npos) break;
            start = amp + 1;
        }
    }
    static const std::map<std::string, std::set<std::string>> kParams = {
        {"serial", {"baud"}},
        {"tcp", {}},
        {"gdb", {"rate", "mode", "stacks", "stack_bytes", "verify"}},
        {"gdb+serial", {"rate", "mode", "stacks", "stack_bytes", "verify"}},
        {"file", {"pace", "rate", "chunk"}},
        {"sim", {"rate", "seed", "format", "addr_bytes", "arc_cache", "pc_cache"}}};
    const auto known = kParams.find(uri.scheme);
    if (known == kParams.end()) {
        throw std::invalid_argument("unknown link scheme '" + uri.scheme +
                                    "' (serial, tcp, gdb, gdb+serial, file or sim)");
    }
    for (const auto& [key, value] : uri.params) {
        if (!known->second.count(key))
            throw std::invalid_argument("unknown parameter '" + key + "' for " + uri.scheme +
                                        " links");
    }
    if (uri.scheme == "tcp" || uri.scheme == "gdb") {
        const auto colon = rest.rfind(':');
        if (colon == std::string::npos || colon == 0)
            throw std::invalid_argument(uri.scheme + " links need host:port");
        uri.host = rest.substr(0, colon);
        check_tcp_host(uri.scheme, uri.host);
        const std::string port = rest.substr(colon + 1);
        if (port.empty() || port.size() > 5 ||
            !std::all_of(port.begin(), port.end(),
                         [](unsigned char c) { return std::isdigit(c); }) ||
            std::stoul(port) == 0 || std::stoul(port) > 65535) {
            throw std::invalid_argument("bad " + uri.scheme + " port '" + port + "'");
        }
        uri.port = static_cast<std::uint16_t>(std::stoul(port));
    } else {
        uri.path = rest;
        if (uri.path.empty())
            throw std::invalid_argument(uri.scheme + " links need a " +
                                        (uri.scheme == "sim" ? "model" : "path"));
        if ((uri.scheme == "serial" || uri.scheme == "gdb+serial" || uri.scheme == "file") &&
            uri.path[0] != '/') {
            throw std::invalid_argument(uri.scheme + " paths must be absolute (" + uri.scheme +
                                        ":///dev/...)");
        }
        check_path(uri.path);
    }
    check_bounds(uri);
    if (uri.is_probe() && uri.params.count("mode") && uri.params.at("mode") != "halt") {
        throw std::invalid_argument(
            uri.params.at("mode") == "running"
                ? "mode=running (sampling without halting) needs a server that reads memory "
                  "while the core runs; this link samples by halting only (mode=halt)"
                : "mode must be halt, not '" + uri.params.at("mode") + "'");
    }
    if (uri.scheme == "file") {
        const std::string pace = uri.param("pace", "fast");
        if (pace != "fast" && pace != "realtime")
            throw std::invalid_argument("pace must be fast or realtime");
    }
    return uri;
}

}  // namespace rackprof::daemon::config
