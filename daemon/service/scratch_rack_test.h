// For the service's unit tests: a scratch folder, and a real capture service with no boards
// over an empty database in it.
#pragma once

#include <doctest/doctest.h>
#include <spdlog/sinks/null_sink.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "daemon/capture/capture_service.h"
#include "protocol/record.h"
#include "storage/counters.h"

namespace rackprof::daemon::service {

struct ScratchDir {
    std::filesystem::path path;
    ScratchDir() {
        std::string name = (std::filesystem::temp_directory_path() / "rack-XXXXXX").string();
        REQUIRE(mkdtemp(name.data()) != nullptr);
        path = name;
    }
    ~ScratchDir() {
        std::error_code ignored;
        std::filesystem::remove_all(path, ignored);
    }
    ScratchDir(const ScratchDir&) = delete;
    ScratchDir& operator=(const ScratchDir&) = delete;
};

struct ScratchRack {
    ScratchDir dir;
    config::DaemonConfig config = config_in(dir.path);
    capture::CaptureService capture{
        config,
        std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::null_sink_mt>())};
    ~ScratchRack() { capture.shutdown(); }

    // A completed session of `records` on `board`, stored as an import is; its id.
    std::int64_t store(const std::string& board, std::vector<protocol::Record> records,
                       const std::string& elf_path = "") {
        storage::NewSession spec;
        spec.board = board;
        spec.link = "import";
        spec.elf_path = elf_path;
        spec.started_ns = 1'000'000;  // its records are received then
        storage::SessionCounters counters;
        for (const auto& r : records) {
            if (r.kind == protocol::RecordKind::kArc) ++counters.arcs;
            if (r.kind == protocol::RecordKind::kPcSample) ++counters.pc_samples;
        }
        auto stored = capture.begin_import(spec);
        stored->append({}, std::move(records), counters);
        return stored->complete(counters);
    }

    static config::DaemonConfig config_in(const std::filesystem::path& dir) {
        config::DaemonConfig c;
        c.storage_path = dir / "rack.db";
        return c;
    }
};

}  // namespace rackprof::daemon::service
