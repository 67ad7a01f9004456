// What `rackprof convert` reads, for the other commands that compare profiles: a capture file
// or a gmon.out decoded exactly as convert decodes it (the same options: --protocol, --format,
// --addr-bytes, --rate, --elf, …), or with --db a selection of stored sessions merged.
#pragma once

#include <memory>
#include <string>

#include "daemon/app/command_line.h"
#include "gmon/export.h"

namespace rackprof::daemon {

// The options convert's decoding takes that take a value, and those that do not.
extern const std::set<std::string> kProfileInputValued;
extern const std::set<std::string> kProfileInputFlags;

// `argument`: a file, or (with --db, when no such file exists and it holds '=') a selection.
// Throws UsageError for bad options, std::runtime_error when it cannot be read; the input has
// an ELF (else UsageError: functions could not be named).
std::shared_ptr<gmon::ExportInput> profile_input_of(const std::string& argument,
                                                    const CommandLine& cl);

}  // namespace rackprof::daemon
