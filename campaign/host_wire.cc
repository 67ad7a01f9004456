#include "campaign/host_wire.h"

#include <stdexcept>

namespace rackprof::campaign {

struct HostWire::Sink final : protocol::RecordSink {
    explicit Sink(HostWire& w) : wire(w) {}
    HostWire& wire;
    void on_records(std::span<const protocol::Record>) override {}
    void on_event(const protocol::StreamEvent& event) override {
        if (const auto* h = std::get_if<protocol::TargetHello>(&event)) {
            wire.hello_ = *h;
            wire.addr_bytes_ = h->addr_bytes;
            wire.encoder_ = protocol::FramedEncoder(h->addr_bytes);
        } else if (const auto* c = std::get_if<protocol::CounterCapabilities>(&event)) {
            wire.caps_ = *c;
        } else if (const auto* f = std::get_if<protocol::FunctionCounts>(&event)) {
            if (f->run != wire.pending_.run && wire.pending_items_ == 0) wire.pending_.run = f->run;
            const auto it = wire.by_addr_.find(f->function & ~1u);
            if (it == wire.by_addr_.end()) {
                ++wire.unknown_functions_;
            } else {
                wire.pending_.functions.emplace_back(it->second, f->counts);
                wire.pending_.calls.push_back(f->calls);
            }
            ++wire.pending_items_;
        } else if (const auto* t = std::get_if<protocol::RunTotals>(&event)) {
            RunResult r = std::move(wire.pending_);
            std::string error;
            if (t->functions == 0 && t->counters == 0) {
                error = "the target refused run " + std::to_string(t->run) +
                        " (too many functions or a counter it lacks)";
            } else if (wire.pending_items_ != t->functions) {
                error = "run " + std::to_string(t->run) + ": " +
                        std::to_string(wire.pending_items_) + " of " +
                        std::to_string(t->functions) + " function counts arrived";
            }
            r.run = t->run;
            r.totals = t->counts;
            wire.done_.emplace_back(std::move(r), error);
            wire.pending_ = {};
            wire.pending_items_ = 0;
        }
    }
};

HostWire::HostWire(const CallGraph& graph, int addr_bytes)
    : graph_(graph), addr_bytes_(addr_bytes), decoder_({addr_bytes}), encoder_(addr_bytes) {
    // Without the Thumb bit: ELF symbols carry it, a target's hooks may not.
    const std::uint32_t mask = addr_bytes == 3 ? 0xFFFFFE : 0xFFFFFFFE;
    for (std::size_t f = 0; f < graph.functions.size(); ++f)
        by_addr_.emplace(graph.functions[f].addr & mask, f);
}

std::vector<std::uint8_t> HostWire::config_frame(const RunPlan& plan) {
    protocol::CounterConfig config;
    config.run = plan.run;
    config.counters = plan.counters;
    for (std::size_t f : plan.functions) config.functions.push_back(graph_.functions.at(f).addr);
    encoder_.counter_config(config);
    encoder_.flush();
    return encoder_.take_wire();
}

void HostWire::feed(std::span<const std::uint8_t> bytes) {
    Sink sink(*this);
    decoder_.feed(bytes, sink);
}

std::optional<RunResult> HostWire::take_result() {
    if (done_.empty()) return std::nullopt;
    auto [result, error] = std::move(done_.front());
    done_.pop_front();
    if (!error.empty()) throw std::runtime_error(error);
    return result;
}

void run_campaign(Planner& planner, HostWire& wire, const Exchange& exchange,
                  const std::function<void(const RunPlan&, const RunResult&)>& on_run) {
    run_campaign(
        planner,
        [&](const RunPlan& plan) {
            std::vector<std::uint8_t> answer = exchange(wire.config_frame(plan));
            for (int tries = 0;; ++tries) {
                wire.feed(answer);
                if (auto result = wire.take_result()) return *result;
                if (answer.empty() || tries > 1000)
                    throw std::runtime_error("run " + std::to_string(plan.run) +
                                             ": the target did not answer");
                answer = exchange({});
            }
        },
        on_run);
}

}  // namespace rackprof::campaign
