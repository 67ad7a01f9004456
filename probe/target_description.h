// A GDB target description (GDB manual, "Target Descriptions"): the architecture and the
// registers with GDB's numbers and sizes, read from the server's target.xml and the files it
// includes. A server's register numbers are its own; this is how a client learns that pc is
// 15 on a Cortex-M and 32 on RISC-V instead of assuming it (and QEMU answers 'p' only to a
// client that read it).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rackprof::probe {

struct TargetRegister {
    std::string name;
    unsigned number = 0;
    unsigned bits = 0;
};

struct TargetDescription {
    std::string architecture;               // "arm", "riscv:rv32", ...; "" when not said
    std::vector<TargetRegister> registers;  // in the order described

    const TargetRegister* find(std::string_view name) const;
    // Where register `number` starts in a 'g' reply (registers in number order), and nothing
    // when a register before it has no size.
    std::optional<std::size_t> g_offset(unsigned number) const;
};

// Parses `root` (target.xml's text) and every file it includes, which `fetch` reads by name
// (at most 32 files, nested 8 deep). Throws std::runtime_error for a description that is not one.
TargetDescription parse_target_description(
    const std::string& root, const std::function<std::string(const std::string&)>& fetch);

}  // namespace rackprof::probe
