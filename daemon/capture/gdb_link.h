// A board behind a debug probe's GDB server: gdb://host:port?rate=HZ[&stacks=1] (OpenOCD
// :3333, pyOCD, the J-Link GDB Server :2331, probe-rs, QEMU's gdbstub). No firmware change: a
// thread of its own halts the target `rate` times a second, reads its pc (with stacks=1 also
// its registers and `stack_bytes` of stack, unwound with the ELF's CFI) and lets it run again.
// It writes what it saw as the framed protocol (v4): a HELLO with the build-id read from the
// target's memory, PC or STACK items, and HALTED items saying how long the target was held
// stopped. The board's session decodes, stores, profiles and exports that stream as any
// framed board's: its raw bytes are that stream.
#pragma once

#include <boost/asio/io_context.hpp>

#include <memory>

#include "daemon/capture/links.h"

namespace rackprof::daemon::capture {

// `elf`: the board's firmware (may be empty): its build-id is checked against the target's
// memory, and with stacks=1 its CFI unwinds each sample's stack.
std::unique_ptr<Link> make_gdb_link(boost::asio::io_context& io, const config::LinkUri& uri,
                                    const std::filesystem::path& elf);

}  // namespace rackprof::daemon::capture
