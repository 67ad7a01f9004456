// Reads gmon.out: GNU tagged format, and both BSD layouts (old BSD with a 3-word header and
// 4.4BSD with version 0x51879, which the thesis host program wrote).
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <stdexcept>

#include "gmon/gmon_data.h"

namespace rackprof::gmon {

class GmonFormatError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

// layout: the target's address size and byte order (from its ELF); gmon.out does not say.
GmonData parse_gmon(std::span<const std::uint8_t> bytes, const TargetLayout& layout);
GmonData read_gmon_file(const std::filesystem::path& path, const TargetLayout& layout);

// Folds the file's histograms and arcs into an aggregate-equivalent view: arcs summed by
// (from, self); histograms with an identical range summed bin by bin.
GmonData merge_duplicates(GmonData data);

}  // namespace rackprof::gmon
