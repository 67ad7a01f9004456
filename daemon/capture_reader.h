// Reads a capture file through a decoder into an aggregate, in chunks, with a progress line
// on a terminal. Shared by `convert` and the benchmarks, so both measure the same path.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "daemon/wire_decoder.h"
#include "gmon/aggregate.h"
#include "protocol/decoder_stats.h"
#include "protocol/legacy_format.h"
#include "protocol/stream_event.h"

namespace rackprof::daemon {

// Looks at the start of a capture: hex-ASCII text or binary wire bytes.
protocol::LegacyEncoding detect_encoding(const std::filesystem::path& path);

// True when the file starts with the GNU gmon.out magic.
bool is_gnu_gmon(const std::filesystem::path& path);

using ProgressCallback = std::function<void(std::uint64_t done, std::uint64_t total)>;

using ConsoleCallback = std::function<void(const protocol::ConsoleText& line)>;

struct DecodedCapture {
    protocol::DecoderStats stats;
    std::optional<protocol::TargetHello> hello;                    // the last one (framed captures)
    std::map<std::uint16_t, protocol::ExceptionStats> exceptions;  // itm: exception trace
};

// Decodes the whole file; console lines (itm) go to `console` as they are decoded. Throws
// std::runtime_error naming the file on I/O errors.
DecodedCapture decode_capture(const std::filesystem::path& path, const WireSpec& wire,
                              gmon::Aggregate& aggregate, const ProgressCallback& progress = {},
                              const ConsoleCallback& console = {});

// Records into an aggregate, keeping the last HELLO and passing console lines on: what
// `convert` needs from a stream.
class CaptureSink : public gmon::AggregateSink {
  public:
    explicit CaptureSink(gmon::Aggregate& aggregate, ConsoleCallback console = {})
        : gmon::AggregateSink(aggregate), console_(std::move(console)) {}
    void on_event(const protocol::StreamEvent& event) override {
        if (const auto* h = std::get_if<protocol::TargetHello>(&event)) hello = *h;
        if (const auto* c = std::get_if<protocol::ConsoleText>(&event); c && console_) console_(*c);
    }
    std::optional<protocol::TargetHello> hello;

  private:
    ConsoleCallback console_;
};

}  // namespace rackprof::daemon
