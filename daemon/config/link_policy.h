// Which links a board created over HTTP may use. A board's link decides what the daemon opens
// and reads (a serial device, a TCP peer, a file) and serves back as raw bytes, so the HTTP API
// may only name links the operator allowed in the configuration (`server.api_links`); boards in
// the configuration file itself are the operator's and are not checked.
#pragma once

#include <string>
#include <vector>

namespace rackprof::daemon::config {

// Glob patterns (`*`, `?`, `[...]`, as fnmatch) over a link's canonical form: `scheme://path`
// or `tcp://host:port`, without the query. A link must match one of them.
struct LinkPolicy {
    std::vector<std::string> patterns;

    // Throws std::invalid_argument naming the allowed patterns when `link` is not allowed (or
    // does not parse).
    void check(const std::string& link) const;
    bool allows(const std::string& link) const;
};

// USB serial adapters (udev's /dev/rackprof names and the kernel's), TCP on loopback and the
// simulator: nothing that reads an arbitrary file or reaches another host.
std::vector<std::string> default_api_links();

}  // namespace rackprof::daemon::config
