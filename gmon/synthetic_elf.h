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
};

// A 32-bit little-endian ARM executable whose .text spans [code_low, code_high).
// Throws ElfError on failure.
void write_synthetic_elf(const std::filesystem::path& path, const std::vector<SyntheticFunction>& functions,
                         std::uint32_t code_low, std::uint32_t code_high);

}  // namespace rackprof::gmon
