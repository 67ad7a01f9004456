// A GDB stop reply (GDB manual, "Stop Reply Packets"): why the target stopped, with the
// registers and thread the server chose to send along.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace rackprof::probe {

struct StopReply {
    enum class Kind {
        kStopped,     // 'S AA' or 'T AA ...': halted by a signal (5 SIGTRAP, 2 SIGINT, ...)
        kExited,      // 'W AA': the process exited with status AA
        kTerminated,  // 'X AA': killed by signal AA
    };
    Kind kind = Kind::kStopped;
    int signal = 0;  // the signal, or the exit status for kExited
    // 'T' replies: register number -> its bytes (target order), as the server sent them.
    std::map<unsigned, std::string> registers;
    std::string thread;  // 'thread:' value, "" when not sent
    // Everything else ('swbreak', 'watch', 'core', ...) as sent.
    std::map<std::string, std::string> other;
};

// Nothing when `payload` is not a stop reply ('O' console output and 'E' errors are not).
std::optional<StopReply> parse_stop_reply(std::string_view payload);

}  // namespace rackprof::probe
