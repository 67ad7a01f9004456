// Writes a minimal ELF for a set of functions: a code section and a symbol table, nothing
// else. The simulator uses it so simulated captures can be symbolized by rackprof and by
// gprof alike, exactly as a real firmware image would be.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace rackprof::gmon {

struct SyntheticFunction {
    std::string name;
    std::uint32_t addr = 0;  // even; written with the Thumb bit, as an ARM toolchain does
    std::uint32_t size = 0;
    bool global = true;    // false: a static (STB_LOCAL) symbol
    bool function = true;  // false: a plain label (STT_NOTYPE), as assembler code has
};

// A 32-bit little-endian ARM executable whose .text spans [code_low, code_high), with an
// `_etext` label at code_high as GNU linker scripts define it.
// Throws ElfError on failure.
void write_synthetic_elf(const std::filesystem::path& path,
                         const std::vector<SyntheticFunction>& functions, std::uint32_t code_low,
                         std::uint32_t code_high);

}  // namespace rackprof::gmon
