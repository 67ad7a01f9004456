// What `rackprof convert` reads, for the other commands that compare profiles: a capture file
// or a gmon.out decoded exactly as convert decodes it (the same options: --protocol, --format,
// --addr-bytes, --rate, --elf, …), or with --db a selection of stored sessions merged.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "daemon/app/cli.h"
#include "gmon/export.h"

namespace rackprof::daemon::app {

// The decoding options convert declares, and diff and check-sync with it.
struct ProfileInputArgs {
    std::optional<std::string> elf;
    std::optional<std::string> map;  // a linker map instead of the ELF (gmon/linker_map.h)
    std::optional<std::string> protocol;  // else legacy
    std::string format = "auto";
    std::optional<int> addr_bytes;  // else the protocol's default
    std::optional<std::uint32_t> rate;       // else 1000 (a Tiva report: 100)
    std::optional<std::uint32_t> bin_bytes;  // else 2 (a Tiva report: 64)
    std::optional<std::size_t> tiva_report;  // 1-based; else a Tiva file's reports summed
    std::optional<std::string> db;
    std::optional<std::string> config;
    bool tpiu = false;
    std::optional<unsigned> tpiu_stream;
    std::optional<unsigned> framed_port;
    std::optional<unsigned> orbstat_port;
    std::optional<unsigned> console_port;
    bool force = false;
};

// Declares them on `app` (convert, diff, check-sync).
void add_profile_input_options(CLI::App& app, ProfileInputArgs& args);

// `argument`: a file, or (with --db, when no such file exists and it holds '=') a selection.
// Throws UsageError for bad options, std::runtime_error when it cannot be read; the input has
// an ELF (else UsageError: functions could not be named).
std::shared_ptr<gmon::ExportInput> profile_input_of(const std::string& argument,
                                                    const ProfileInputArgs& args);

}  // namespace rackprof::daemon::app
