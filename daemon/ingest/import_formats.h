// The file formats an import takes, keyed by the name a user gives (`convert --format`, the
// API's `?format=`), as protocol/wire_format.h is for wire decoders: one table says what each
// name reads as, so the command line and the daemon cannot disagree.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "daemon/ingest/capture_import.h"

namespace rackprof::daemon::ingest {

struct ImportFormat {
    std::string_view name;
    InputKind kind;
    // The capture encoding the name implies: "bin", "hex", or "auto" (detected where the wire
    // protocol has a text encoding).
    std::string_view wire_encoding;
    bool uploadable;  // the API takes it (detection by content is the command line's alone)
};

// Every import format, the default ("auto" on the command line) first.
std::span<const ImportFormat> import_formats();
// The format of this name, or nullptr.
const ImportFormat* find_import_format(std::string_view name);
// "bin, hex, gmon or tiva": the names an error message offers.
std::string import_format_names(bool uploadable_only);

}  // namespace rackprof::daemon::ingest
