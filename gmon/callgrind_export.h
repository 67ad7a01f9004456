// The `callgrind` export: KCachegrind's and callgrind_annotate's format (Callgrind Format
// Specification, version 1) of gprof's profile.
//
// One event, Samples (PC samples; the header's desc says how long one is). Each function is a
// `fn=` block whose cost is its flat-profile self samples; each arc it makes is a `cfn=` /
// `calls=` pair whose cost is the inclusive time gprof propagates along that arc (the callee's
// self and descendants' time charged to this caller, as in the call graph's child lines), so
// callgrind_annotate --inclusive=yes prints gprof's propagated totals. Costs are whole
// samples: fractions (a histogram bin shared by two functions, a callee's time split among
// callers) are rounded to the nearest. Self-recursive calls and calls within a cycle are left
// out: gprof charges no time along them. Samples gprof credits to no function are a block of
// their own, so the file's total is the profile's.
//
// Positions are source lines (DWARF): a function's self cost is spread over its lines as its
// PC samples fall on them, and each call is put at the line of its call instruction, so
// callgrind_annotate with the source (--auto=yes) prints per-line costs. The spreading keeps
// each function's whole: the lines' costs add up to its self cost, the call sites' to the arc's.
#pragma once

#include <string>

#include "gmon/export.h"

namespace rackprof::gmon {

// Throws ExportNeedsElf without an ELF: functions cannot be named.
std::string callgrind_profile(const ExportInput& input);

}  // namespace rackprof::gmon
