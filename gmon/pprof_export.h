// The `pprof` export: pprof's profile.proto, gzip-compressed, as `go tool pprof` reads it.
//
// Two sample types, samples/count then calls/count (samples is the default view):
//  - every PC sample address is a one-frame sample valued [n, 0];
//  - every arc is a two-frame sample [callee entry, call site] (leaf first) valued [0, calls].
// A location is one address, so pprof's raw samples give back the aggregate exactly, and its
// line names the function gprof's symbol table puts there (file and line where DWARF has
// them). The period is cpu/nanoseconds, 1e9/rate: what one sample stands for.
// A session's board and id are labels on every sample; a selection's merged aggregate cannot
// tell boards apart, so its sessions, boards and build-id are comments instead.
#pragma once

#include <string>
#include <string_view>

#include "gmon/export.h"

namespace rackprof::gmon {

// The serialized, gzip-compressed profile. Without an ELF the locations are addresses only
// (pprof can symbolize them given the binary).
std::string pprof_profile(const ExportInput& input);

// gzip (RFC 1952) of `bytes`, and back; gunzip throws std::runtime_error on bad input.
std::string gzip(std::string_view bytes);
std::string gunzip(std::string_view bytes);

}  // namespace rackprof::gmon
