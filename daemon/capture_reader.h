// Reads a capture file through a decoder into an aggregate, in chunks, with a progress line
// on a terminal. Shared by `convert` and the benchmarks, so both measure the same path.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "gmon/aggregate.h"
#include "protocol/decoder_stats.h"
#include "protocol/legacy_format.h"

namespace rackprof::daemon {

// Looks at the start of a capture: hex-ASCII text or binary wire bytes.
protocol::LegacyEncoding detect_encoding(const std::filesystem::path& path);

// True when the file starts with the GNU gmon.out magic.
bool is_gnu_gmon(const std::filesystem::path& path);

using ProgressCallback = std::function<void(std::uint64_t done, std::uint64_t total)>;

// Decodes the whole file. Throws std::runtime_error naming the file on I/O errors.
protocol::DecoderStats decode_capture(const std::filesystem::path& path,
                                      const protocol::LegacyOptions& options,
                                      gmon::Aggregate& aggregate,
                                      const ProgressCallback& progress = {});

}  // namespace rackprof::daemon
