// A firmware image's architecture as its build attributes record it (.ARM.attributes'
// Tag_CPU_arch and profile; .riscv.attributes' Tag_RISCV_arch), in the names the framed
// protocol's HELLO uses: "armv6-m", "armv7-m", "armv7e-m", "armv8-m.base", "armv8-m.main",
// "rv32imac", "rv32imc", ...
#pragma once

#include <string>
#include <string_view>

namespace rackprof::gmon {

// `attributes`: the section's contents; `machine`: the ELF's e_machine. "" when the section is
// missing, malformed or names no architecture this knows (then the machine alone says "arm"
// or "riscv" where it can: see machine_family).
std::string arch_of_attributes(int machine, std::string_view attributes);

// "arm" (EM_ARM), "riscv" (EM_RISCV), "x86-64", or "" for other machines.
const char* machine_family(int machine);

}  // namespace rackprof::gmon
