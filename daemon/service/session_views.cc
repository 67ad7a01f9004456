#include "daemon/service/session_views.h"

#include <algorithm>

#include "daemon/capture/capture_session.h"
#include "daemon/service/selection.h"
#include "gmon/report.h"
#include "gmon/tasks.h"
#include "protocol/wire_format.h"
#include "storage/counters_json.h"
#include "storage/retention.h"

namespace rackprof::daemon::service {

using nlohmann::json;

void add_storage_state(json& out, const std::string& storage_error) {
    out["storage_state"] = storage_error.empty() ? "ok" : "storage_error";
    out["storage_error"] = storage_error.empty() ? json(nullptr) : json(storage_error);
}

json board_json(const BoardStatus& b) {
    json out = {{"name", b.name},
                {"link", b.link},
                {"state", to_string(b.state)},
                {"last_error", b.last_error},
                {"reconnects", b.reconnects},
                {"session", b.session ? json(*b.session) : json(nullptr)},
                {"counters", b.session ? storage::counters_json(b.counters) : json(nullptr)}};
    add_storage_state(out, b.storage_error);
    return out;
}

json gaps_json(const std::vector<storage::Gap>& gaps) {
    const auto count = [](const std::optional<std::uint64_t>& n) {
        return n ? json(*n) : json(nullptr);
    };
    json out = json::array();
    for (const auto& g : gaps) {
        out.push_back({{"started_ns", g.started_ns},
                       {"ended_ns", g.ended_ns},
                       {"reason", g.reason},
                       {"records_lost", count(g.records_lost)},
                       {"bytes_lost", count(g.bytes_lost)}});
    }
    return out;
}

json session_json(const storage::SessionInfo& s, const std::string& storage_error) {
    json out = {{"id", s.id},
                {"board", s.spec.board},
                {"link", s.spec.link},
                {"protocol", s.spec.protocol},
                {"format", s.spec.format},
                {"addr_bytes", s.spec.addr_bytes},
                {"elf",
                 {{"path", s.spec.elf_path},
                  {"build_id", s.spec.elf_build_id},
                  {"sha256", s.spec.elf_sha256}}},
                {"target", s.target == storage::TargetInfo{}
                               ? json(nullptr)
                               : json{{"build_id", s.target.build_id},
                                      {"text_lo", gmon::hex_address(s.target.text_lo)},
                                      {"text_hi", gmon::hex_address(s.target.text_hi)}}},
                {"build_id", build_id_of(s).empty() ? json(nullptr) : json(build_id_of(s))},
                {"arch", s.spec.arch.empty() ? json(nullptr) : json(s.spec.arch)},
                {"state", s.state},
                {"started_ns", s.spec.started_ns},
                {"ended_ns", s.ended_ns ? json(s.ended_ns) : json(nullptr)},
                {"counters", storage::counters_json(s.counters)}};
    add_storage_state(out, s.state == "capturing" ? storage_error : "");
    if (protocol::wire_format(s.spec.protocol).traits.swo) {
        // The SWO settings it was captured with, and its exception trace.
        const json swo = json::parse(s.spec.wire_options, nullptr, false);
        out["swo"] = swo.is_object() ? swo : json(nullptr);  // written by the daemon; never fatal
        json exceptions = json::array();
        for (const auto& e : s.exceptions) {
            exceptions.push_back({{"exception", e.number},
                                  {"name", gmon::exception_name(e.number)},
                                  {"entries", e.entries},
                                  {"cycles", e.cycles}});
        }
        out["exceptions"] = exceptions;
    }
    // An RTOS's tasks as the capture counted them (the shares with intervals: /tasks).
    if (!s.tasks.empty()) {
        json tasks = json::array();
        for (const auto& t : s.tasks) {
            gmon::TaskStats stats;
            stats.number = t.number;
            stats.handle = t.handle;
            stats.name = t.name;
            tasks.push_back({{"name", gmon::task_label(stats)},
                             {"samples", t.samples},
                             {"switches", t.switches},
                             {"deleted", t.deleted}});
        }
        out["tasks"] = tasks;
    }
    // Only where entry/exit events (or a probe's stacks) made one: the cct-* exports answer
    // 422 without it.
    if (s.calling_context_nodes > 0) out["calling_context_nodes"] = s.calling_context_nodes;
    // A probe link's intrusion: the share of the session's time the target was held halted
    // (samples_halted_ns over the time from start to end, or to now while capturing).
    if (s.counters.samples_halted_ns > 0) {
        const std::int64_t end = s.ended_ns ? s.ended_ns : capture::unix_now_ns();
        const double span = static_cast<double>(end - s.spec.started_ns);
        out["halted_share"] =
            span > 0 ? std::min(1.0, static_cast<double>(s.counters.samples_halted_ns) / span)
                     : 0.0;
    }
    // Retention dropped its raw data (storage/retention.h): null while it has it.
    out["raw_pruned"] = s.raw_pruned ? json{{"at_ns", s.raw_pruned->at_ns},
                                            {"keep_raw_days", s.raw_pruned->keep_days},
                                            {"reason", storage::raw_pruned_reason(*s.raw_pruned)}}
                                     : json(nullptr);
    return out;
}

}  // namespace rackprof::daemon::service
