#include "daemon/ingest/import_formats.h"

#include <array>

namespace rackprof::daemon::ingest {

namespace {

// A histogram file's "wire" is never decoded; "auto" lets a stored session re-detect nothing.
constexpr std::array kFormats = {
    ImportFormat{"auto", InputKind::kAuto, "auto", false},
    ImportFormat{"bin", InputKind::kCapture, "bin", true},
    ImportFormat{"hex", InputKind::kCapture, "hex", true},
    ImportFormat{"gmon", InputKind::kGmon, "auto", true},
    ImportFormat{"tiva", InputKind::kTiva, "auto", true},
};

}  // namespace

std::span<const ImportFormat> import_formats() {
    return kFormats;
}

const ImportFormat* find_import_format(std::string_view name) {
    for (const auto& f : kFormats) {
        if (f.name == name) return &f;
    }
    return nullptr;
}

std::string import_format_names(bool uploadable_only) {
    std::string names;
    std::size_t left = 0;
    for (const auto& f : kFormats) left += !uploadable_only || f.uploadable;
    for (const auto& f : kFormats) {
        if (uploadable_only && !f.uploadable) continue;
        --left;
        if (!names.empty()) names += left == 0 ? " or " : ", ";
        names += f.name;
    }
    return names;
}

}  // namespace rackprof::daemon::ingest
