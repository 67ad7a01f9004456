// Writes gmon.out in the GNU tagged format that gprof reads, in the target's byte order and
// address size. Wide counts are never clamped: a bin above 65535 is split across several
// histogram records with the same range (gprof sums them), an arc above 2^32-1 across
// several arc records (gprof sums those too), up to kMaxGmonFileBytes in all.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "gmon/gmon_data.h"

namespace rackprof::gmon {

// The largest file written (1 GiB): counts so wide that their repeated records would pass it
// are refused with std::length_error rather than written for ever.
inline constexpr double kMaxGmonFileBytes = 1 << 30;
std::vector<std::uint8_t> serialize_gmon(const GmonData& data);
// The same bytes as a string: an HTTP body, without copying them over.
std::string serialize_gmon_string(const GmonData& data);

// Writes next to `path` and renames into place, so a failure never leaves a partial file. A
// device, FIFO or socket already at `path` (-o /dev/null) is written in place instead, never
// replaced by a regular file. Throws std::runtime_error naming the path on failure.
void write_file_atomically(const std::filesystem::path& path,
                           const std::vector<std::uint8_t>& bytes);

}  // namespace rackprof::gmon
