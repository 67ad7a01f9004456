// /metrics: the daemon in the Prometheus text format (version 0.0.4), so a lab's monitoring
// notices a sick bench. Boards and storage come from the rack service, HTTP requests are
// counted here as the API answers them, and other rooms (the live feeds) add their own
// families through a source set by the composition root.
#pragma once

#include <array>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "daemon/service/rack_types.h"

namespace rackprof::web::api {

using MetricLabels = std::vector<std::pair<std::string_view, std::string>>;

// Writes the exposition format: a family's HELP and TYPE once, then its samples; label values
// escaped (backslash, quote, newline) as the format requires.
class MetricsText {
  public:
    void family(std::string_view name, std::string_view type, std::string_view help);
    void sample(std::string_view name, const MetricLabels& labels, double value);
    void sample(std::string_view name, double value) { sample(name, {}, value); }
    const std::string& text() const { return text_; }

  private:
    std::string text_;
};

using MetricsSource = std::function<void(MetricsText&)>;

// HTTP requests by route pattern (never the raw path: ids would make unbounded series),
// method and status, with a latency histogram per route. Thread-safe.
class HttpMetrics {
  public:
    static constexpr std::array<double, 12> kBuckets = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                        0.25,  0.5,   1,    2.5,   5,    10};
    void record(std::string_view route, std::string_view method, unsigned status,
                std::chrono::duration<double> took);
    void write(MetricsText& out) const;

  private:
    struct Latency {
        std::array<std::uint64_t, kBuckets.size()> below{};  // cumulative, as exposed
        std::uint64_t count = 0;
        double sum = 0;
    };
    mutable std::mutex mutex_;
    std::map<std::tuple<std::string, std::string, unsigned>, std::uint64_t> requests_;
    std::map<std::string, Latency> latency_;
};

// Boards by link state, each board's counters (every loss named), the storage writer.
void write_rack_metrics(MetricsText& out, const daemon::service::RackMetrics& rack);

}  // namespace rackprof::web::api
