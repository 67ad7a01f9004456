#include "web/api/metrics.h"

#include <cmath>
#include <cstdio>

#include "storage/counters.h"

namespace rackprof::web::api {

namespace {

std::string escaped(std::string_view value) {
    std::string out;
    for (const char c : value) {
        if (c == '\\')
            out += "\\\\";
        else if (c == '"')
            out += "\\\"";
        else if (c == '\n')
            out += "\\n";
        else
            out += c;
    }
    return out;
}

std::string number(double value) {
    if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
    if (value == std::floor(value) && std::fabs(value) < 1e15)
        return std::to_string(static_cast<long long>(value));
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.9g", value);
    return buffer;
}

}  // namespace

void MetricsText::family(std::string_view name, std::string_view type, std::string_view help) {
    text_ += "# HELP ";
    text_ += name;
    text_ += ' ';
    text_ += help;
    text_ += "\n# TYPE ";
    text_ += name;
    text_ += ' ';
    text_ += type;
    text_ += '\n';
}

void MetricsText::sample(std::string_view name, const MetricLabels& labels, double value) {
    text_ += name;
    if (!labels.empty()) {
        text_ += '{';
        for (std::size_t i = 0; i < labels.size(); ++i) {
            if (i) text_ += ',';
            text_ += labels[i].first;
            text_ += "=\"";
            text_ += escaped(labels[i].second);
            text_ += '"';
        }
        text_ += '}';
    }
    text_ += ' ';
    text_ += number(value);
    text_ += '\n';
}

void HttpMetrics::record(std::string_view route, std::string_view method, unsigned status,
                         std::chrono::duration<double> took) {
    std::lock_guard lock(mutex_);
    ++requests_[{std::string(route), std::string(method), status}];
    Latency& l = latency_[std::string(route)];
    for (std::size_t i = 0; i < kBuckets.size(); ++i) {
        if (took.count() <= kBuckets[i]) ++l.below[i];
    }
    ++l.count;
    l.sum += took.count();
}

void HttpMetrics::write(MetricsText& out) const {
    std::lock_guard lock(mutex_);
    out.family("rackprof_http_requests_total", "counter",
               "HTTP requests answered, by route pattern, method and status.");
    for (const auto& [key, count] : requests_) {
        const auto& [route, method, status] = key;
        out.sample("rackprof_http_requests_total",
                   {{"route", route}, {"method", method}, {"status", std::to_string(status)}},
                   static_cast<double>(count));
    }
    out.family("rackprof_http_request_duration_seconds", "histogram",
               "Time to answer a request (to the first byte of a streamed reply), by route.");
    for (const auto& [route, l] : latency_) {
        for (std::size_t i = 0; i < kBuckets.size(); ++i) {
            out.sample("rackprof_http_request_duration_seconds_bucket",
                       {{"route", route}, {"le", number(kBuckets[i])}},
                       static_cast<double>(l.below[i]));
        }
        out.sample("rackprof_http_request_duration_seconds_bucket",
                   {{"route", route}, {"le", "+Inf"}}, static_cast<double>(l.count));
        out.sample("rackprof_http_request_duration_seconds_sum", {{"route", route}}, l.sum);
        out.sample("rackprof_http_request_duration_seconds_count", {{"route", route}},
                   static_cast<double>(l.count));
    }
}

void write_rack_metrics(MetricsText& out, const daemon::service::RackMetrics& rack) {
    using daemon::service::LinkState;
    out.family("rackprof_boards", "gauge", "Boards by the state of their link.");
    for (const LinkState state :
         {LinkState::kConnecting, LinkState::kConnected, LinkState::kDisconnected,
          LinkState::kFinished, LinkState::kStopped}) {
        double n = 0;
        for (const auto& b : rack.boards) n += b.state == state ? 1 : 0;
        out.sample("rackprof_boards", {{"state", daemon::service::to_string(state)}}, n);
    }
    out.family("rackprof_board_capturing", "gauge", "1 while the board has a session capturing.");
    for (const auto& b : rack.boards)
        out.sample("rackprof_board_capturing", {{"board", b.name}}, b.capturing ? 1 : 0);
    out.family("rackprof_board_reconnects_total", "counter",
               "Times the board's link was opened again after it went away.");
    for (const auto& b : rack.boards) {
        out.sample("rackprof_board_reconnects_total", {{"board", b.name}},
                   static_cast<double>(b.reconnects));
    }
    // One family per session counter, named by the one counter table; the losses say so.
    // A counter of nanoseconds ("_ns") is exported in seconds, Prometheus' base unit.
    for (const auto& counter : storage::kSessionCounters) {
        std::string base(counter.name);
        double scale = 1;
        if (base.ends_with("_ns")) {
            base = base.substr(0, base.size() - 3) + "_seconds";
            scale = 1e-9;
        }
        const std::string name = "rackprof_session_" + base + "_total";
        out.family(name, "counter",
                   std::string(counter.is_loss ? "Loss: " : "") + std::string(counter.name) +
                       " of the board's current session (restarts with each session).");
        for (const auto& b : rack.boards) {
            out.sample(name, {{"board", b.name}},
                       scale * static_cast<double>(b.counters.*counter.member));
        }
    }
    const auto& w = rack.writer;
    const struct {
        const char* name;
        const char* type;
        const char* help;
        double value;
    } writer[] = {
        {"rackprof_storage_queue_operations", "gauge", "Operations waiting for the storage writer.",
         static_cast<double>(w.queued_ops)},
        {"rackprof_storage_queue_bytes", "gauge", "Bytes waiting for the storage writer.",
         static_cast<double>(w.queued_bytes)},
        {"rackprof_storage_committed_operations_total", "counter",
         "Operations the storage writer has committed.", static_cast<double>(w.committed_ops)},
        {"rackprof_storage_errors_total", "counter",
         "Failed storage transactions (disk full, I/O errors).",
         static_cast<double>(w.failed_transactions)},
        {"rackprof_storage_failing", "gauge",
         "1 while storage's commits fail (an episode of storage_error).", w.failing ? 1.0 : 0.0},
        {"rackprof_storage_records_lost_total", "counter",
         "Loss: records that storage failures cost this run.", static_cast<double>(w.records_lost)},
        {"rackprof_storage_bytes_lost_total", "counter",
         "Loss: raw bytes that storage failures cost this run.", static_cast<double>(w.bytes_lost)},
        {"rackprof_retention_sessions_raw_pruned_total", "counter",
         "Finished sessions whose raw data retention dropped this run (keep_raw_days).",
         static_cast<double>(w.retention.sessions_raw_pruned)},
        {"rackprof_retention_sessions_deleted_total", "counter",
         "Finished sessions retention deleted this run (keep_sessions_days).",
         static_cast<double>(w.retention.sessions_deleted)},
        {"rackprof_retention_bytes_freed_total", "counter",
         "Stored bytes of raw chunks, record batches and slices retention deleted this run.",
         static_cast<double>(w.retention.bytes)},
    };
    for (const auto& m : writer) {
        out.family(m.name, m.type, m.help);
        out.sample(m.name, m.value);
    }
}

}  // namespace rackprof::web::api
