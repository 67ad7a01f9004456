// Link URIs: serial:///dev/ttyUSB0?baud=1500000, tcp://host:port, file:///path?pace=fast,
// sim://MODEL?rate=20000&seed=1, gdb://host:port?rate=1000 (a debug probe's GDB server),
// gdb+serial:///dev/ttyACM0?rate=1000 (a GDB server on a serial port: Black Magic Probe).
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>

namespace rackprof::daemon::config {

struct LinkUri {
    std::string scheme;  // serial | tcp | gdb | gdb+serial | file | sim
    std::string path;    // serial, gdb+serial, file: the path; sim: the model
    std::string host;    // tcp, gdb
    std::uint16_t port = 0;
    std::map<std::string, std::string> params;

    std::string param(const std::string& key, const std::string& fallback) const {
        const auto it = params.find(key);
        return it == params.end() ? fallback : it->second;
    }
    std::uint64_t number(const std::string& key, std::uint64_t fallback) const;
    // A debug probe's GDB server, over TCP (gdb) or a serial port (gdb+serial).
    bool is_probe() const { return scheme == "gdb" || scheme == "gdb+serial"; }
};

// Throws std::invalid_argument with a message saying what is wrong.
LinkUri parse_link_uri(const std::string& text);

}  // namespace rackprof::daemon::config
