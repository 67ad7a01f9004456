#include "daemon/app/decode_summary.h"

namespace rackprof::daemon::app {

std::string summary_line(const protocol::DecoderStats& s, const gmon::Aggregate& decoded) {
    std::string line = "decoded " + std::to_string(s.records()) + " records (" +
                       std::to_string(s.arcs) + " arcs, " + std::to_string(s.pc_samples) +
                       " PC samples";
    if (decoded.total_calls() != s.arcs || decoded.total_samples() != s.pc_samples) {
        line += "; counted on the target: " + std::to_string(decoded.total_calls()) + " calls, " +
                std::to_string(decoded.total_samples()) + " samples";
    }
    line += ") from " + std::to_string(s.bytes_in) + " bytes; " +
            std::to_string(s.bytes_discarded) + " bytes discarded in " + std::to_string(s.resyncs) +
            " resyncs";
    if (s.frames + s.frames_bad > 0) {
        line += "; frames: " + std::to_string(s.frames) + " good, " + std::to_string(s.frames_bad) +
                " bad, " + std::to_string(s.frames_lost) + " lost; " +
                std::to_string(s.target_dropped) + " records dropped on the target";
    }
    if (s.overflows + s.sleep_samples > 0) {
        line += "; " + std::to_string(s.overflows) + " ITM overflows (trace lost on the target), " +
                std::to_string(s.sleep_samples) + " sleep samples";
    }
    return line;
}

}  // namespace rackprof::daemon::app
