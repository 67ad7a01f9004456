// Links: where a board's bytes come from. Every link runs on the capture io_context and
// reports through two callbacks: data as it arrives, and closure with a reason (after which
// the board decides whether to reconnect).
#pragma once

#include <boost/asio/io_context.hpp>

#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "daemon/config/link_uri.h"

namespace rackprof::daemon::capture {

struct LinkClosed {
    std::string reason;
    bool final = false;  // nothing more will come (a replayed file ended): do not reconnect
};

class Link {
  public:
    using DataHandler = std::function<void(std::span<const std::uint8_t>)>;
    using ClosedHandler = std::function<void(const LinkClosed&)>;

    virtual ~Link() = default;
    // Starts reading. Failure to open is reported through on_closed, never thrown.
    virtual void open(DataHandler on_data, ClosedHandler on_closed) = 0;
    // Stops reading and releases the device; no callback runs afterwards.
    virtual void close() = 0;
    // A source that can wait (a file) reads on only while `has_room` says the bytes will be
    // kept; live links cannot hold the target back and ignore it (a full queue is counted
    // loss there).
    virtual void set_backpressure(std::function<bool()> has_room) { (void)has_room; }
};

// Throws std::invalid_argument for a URI this build cannot serve. `elf`: the board's firmware,
// for links that read the target through its debugger (gdb://: its build-id, its CFI).
std::unique_ptr<Link> make_link(boost::asio::io_context& io, const config::LinkUri& uri,
                                const std::filesystem::path& elf = {});

// Opens a serial device raw (8N1, no flow control, no line discipline) at any baud rate,
// exclusively. Returns the descriptor; throws std::system_error naming the device.
int open_serial_device(const std::string& path, std::uint32_t baud);

}  // namespace rackprof::daemon::capture
