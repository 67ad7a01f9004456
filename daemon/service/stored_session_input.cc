#include "daemon/service/stored_session_input.h"

#include "daemon/ingest/wire_settings.h"
#include "protocol/wire_format.h"
#include "storage/counters.h"
#include "storage/counters_json.h"

namespace rackprof::daemon::service {

nlohmann::json exceptions_json(const std::map<std::uint16_t, protocol::ExceptionStats>& counts) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& [number, stats] : counts) {
        nlohmann::json row = {
            {"exception", number}, {"entries", stats.entries}, {"cycles", stats.cycles}};
        // A decoded stream knows its activations; stored totals (entries, cycles) do not.
        if (stats.completed > 0) {
            row["completed"] = stats.completed;
            row["max_cycles"] = stats.max_cycles;
            row["p99_cycles"] = stats.p99_cycles;
        }
        out.push_back(std::move(row));
    }
    return out;
}

nlohmann::json stored_session_summary(const storage::SessionInfo& info,
                                      const gmon::Symbolizer* elf) {
    nlohmann::json out = {
        {"session",
         {{"id", info.id},
          {"board", info.spec.board},
          {"state", info.state},
          {"gaps", info.counters.gaps},
          {"records_lost", info.counters.records_lost}}},
        {"board", info.spec.board},
        {"protocol", info.spec.protocol},
        {"format", info.spec.format},
        {"addr_bytes", info.spec.addr_bytes},
        {"decoder", storage::decoder_stats_json(storage::decoder_counters(info.counters))}};
    if (!info.target.build_id.empty()) out["target_build_id"] = info.target.build_id;
    if (!info.spec.arch.empty()) out["arch"] = info.spec.arch;
    if (protocol::wire_format(info.spec.protocol).traits.swo) {
        std::map<std::uint16_t, protocol::ExceptionStats> counts;
        for (const auto& e : info.exceptions) counts[e.number] = {e.entries, e.cycles};
        out["exceptions"] = exceptions_json(counts);
    }
    if (elf) {
        out["elf"] = elf->path().string();
        out["build_id"] = elf->build_id();
    }
    return out;
}

std::shared_ptr<gmon::ExportInput> stored_session_input(const storage::SessionInfo& info,
                                                        StoredSessionData data) {
    auto input = std::make_shared<gmon::ExportInput>();
    auto& source = input->source;
    if (data.aggregate) source.aggregate = std::move(data.aggregate);
    source.elf = std::move(data.elf);
    source.announced_range = ingest::announced_range(info.target);
    source.histograms = info.spec.histograms;
    input->summary = stored_session_summary(info, source.elf.get());
    input->calling_context = std::move(data.calling_context);
    return input;
}

}  // namespace rackprof::daemon::service
