// The `pprof` export: pprof's profile.proto, gzip-compressed, as `go tool pprof` reads it.
//
// Two sample types, samples/count then calls/count (samples is the default view):
//  - PC samples, with an ELF, on the stacks gprof's call graph implies (gmon/stacks.h): a
//    stack's samples spread over its leaf function's sampled PCs in proportion, each caller at
//    its busiest call site to the callee, valued [n, 0]. So pprof's flat is gprof's self time
//    and its cum gprof's self + children (-top -cum, -tree, -peek agree with the call graph);
//    a PC's total is its count where its function has one stack, else within rounding.
//    Without an ELF (no names, no call graph) every PC is a one-frame sample;
//  - every arc is a two-frame sample [callee entry, call site] (leaf first) valued [0, calls].
// A location is one address; its line names the function gprof's symbol table puts there
// (file and line where DWARF has them). The period is cpu/nanoseconds, 1e9/rate: what one sample stands for.
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
