// speedscope's file format (https://www.speedscope.app/file-format-schema.json): the
// profile's estimated stacks (gmon/stacks.h) as one sampled profile, frames shared, with the
// source file and line of each function where the ELF's DWARF gives them.
#pragma once

#include <memory>
#include <string>

#include "gmon/export.h"
#include "gmon/stacks.h"

namespace rackprof::gmon {

// `name` names the profile (speedscope shows it); weights are samples (unit "none"), summing
// to the stacks' total.
std::string speedscope_document(const Profile& profile, const EstimatedStacks& stacks,
                                const std::string& name);

// The export "speedscope"; throws std::invalid_argument without an ELF (no function names).
ChunkStream open_speedscope(const std::shared_ptr<const ExportInput>& input);

}  // namespace rackprof::gmon
