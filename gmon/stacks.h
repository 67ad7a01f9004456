// Call stacks estimated from a gprof profile. gprof records arcs (caller -> callee counts), not
// stacks, so stacks are made the way gprof's call graph charges time: from the roots
// (spontaneous functions, and whatever share of a function no caller is charged for) down the
// arcs, each function's time (self + children) split among its callers in proportion to their
// calls, using the self and children time the Profile's call graph already carries on each arc.
// A cycle (gprof's <cycle N as a whole>) is entered, never looped: its time goes to its members'
// self time and its arcs out as gprof's cycle entry says, each reached from the entry member by
// the shortest chain of calls inside the cycle.
//
// Every sample of the profile lands in exactly one stack, as integers: samples gprof's call
// graph leaves out (the share of a function called from an excluded one) are stacks of their
// own, samples no reported function holds are the stack [unknown], and paths cut by the bounds keep
// their samples in the frame where they were cut.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "gmon/profile.h"

namespace rackprof::gmon {

struct StackOptions {
    std::size_t max_depth = 256;  // frames; deeper calls are kept in the deepest frame
    // A path carrying less than this fraction of the total samples is not followed further:
    // its samples are kept in its caller's frame (bounds the expansion of wide graphs).
    double min_fraction = 1e-5;
    // A walk that would visit more frames than this is walked again with a ten times larger
    // min_fraction, until it fits (a graph whose paths multiply cannot run away).
    std::size_t max_frames = 2'000'000;
};

// A frame that stands for samples gprof credits to no function it reports: outside or between
// the symbols, or in the functions gprof excludes (mcount and the like).
inline constexpr std::size_t kUnknownFrame = kNone;

struct EstimatedStack {
    std::vector<std::size_t> frames;  // indices into Profile::symbols, root first
    std::uint64_t samples = 0;        // never 0
};

struct EstimatedStacks {
    std::vector<EstimatedStack> stacks;  // ordered by frame names; each frame list once
    std::uint64_t total_samples = 0;     // the profile's; the sum of the stacks' samples
    // Samples of paths the bounds cut, kept as self samples of the frame where they were cut
    // (estimated, before rounding to integers).
    double cut_samples = 0;
    double min_fraction = 0;  // the one the walk used (see StackOptions::max_frames)
};

// Throws nothing for a profile without samples: there are no stacks then.
EstimatedStacks estimate_stacks(const Profile& profile, const StackOptions& options = {});

// The frame's function name; "[unknown]" for kUnknownFrame.
std::string_view frame_name(const Profile& profile, std::size_t frame);

}  // namespace rackprof::gmon
