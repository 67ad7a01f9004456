// A board behind a debug probe's GDB server: gdb://host:port?rate=HZ (OpenOCD :3333, pyOCD,
// the J-Link GDB Server :2331, probe-rs, QEMU's gdbstub). No firmware change: a thread of its
// own halts the target `rate` times a second, reads its pc and lets it run again, and hands
// each sample on as the framed protocol's PC item, so the board's session decodes, stores,
// profiles and exports them as any framed board's (its raw bytes are that framed stream).
#pragma once

#include <boost/asio/io_context.hpp>

#include <memory>

#include "daemon/capture/links.h"

namespace rackprof::daemon::capture {

std::unique_ptr<Link> make_gdb_link(boost::asio::io_context& io, const config::LinkUri& uri);

}  // namespace rackprof::daemon::capture
