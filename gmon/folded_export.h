// Brendan Gregg's folded stacks (`root;child;leaf 123` per line), what flamegraph.pl and
// Pyroscope's ingest read: the profile's estimated stacks (gmon/stacks.h), in samples.
#pragma once

#include <memory>
#include <string>

#include "gmon/export.h"
#include "gmon/stacks.h"

namespace rackprof::gmon {

// One line per distinct stack of names (stacks of same-named functions are summed), sorted;
// the counts sum to the stacks' total samples.
std::string folded_stacks(const Profile& profile, const EstimatedStacks& stacks);

// The export "folded"; throws std::invalid_argument without an ELF (no function names).
ChunkStream open_folded(const std::shared_ptr<const ExportInput>& input);

}  // namespace rackprof::gmon
