// What the benchmarks time with: wall seconds, CPU seconds (of this process or of its finished
// children: on a machine shared with other work, wall time says little about what one core can
// do), best-of-three runs of a shell command, and md5sum over a file as the same-run baseline.
#pragma once

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

namespace rackprof::bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

inline double cpu_seconds(int who) {
    rusage usage{};
    getrusage(who, &usage);
    return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
           static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

struct Timing {
    double wall = 1e9;
    double cpu = 1e9;
    // Keeps the faster of this and `t`, wall and CPU time each.
    void keep_best(const Timing& t) {
        wall = std::min(wall, t.wall);
        cpu = std::min(cpu, t.cpu);
    }
};

// Best of `runs` runs of a shell command, in wall and CPU time; nothing if it fails.
inline std::optional<Timing> command_time(const std::string& cmd, int runs = 3) {
    Timing best;
    for (int i = 0; i < runs; ++i) {
        const auto start = Clock::now();
        const double cpu_start = cpu_seconds(RUSAGE_CHILDREN);
        if (std::system(cmd.c_str()) != 0) return std::nullopt;
        best.keep_best({seconds_since(start), cpu_seconds(RUSAGE_CHILDREN) - cpu_start});
    }
    return best;
}

// md5sum over the same file: what "reading the file and doing a little work per byte" costs
// on this machine right now.
inline Timing md5sum_time(const std::filesystem::path& path, int runs = 3) {
    return command_time("md5sum " + path.string() + " > /dev/null", runs).value_or(Timing{});
}

}  // namespace rackprof::bench
