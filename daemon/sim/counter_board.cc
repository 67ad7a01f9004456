#include "daemon/sim/counter_board.h"

#include <algorithm>
#include <map>
#include <random>
#include <stdexcept>

namespace rackprof::daemon::sim {

namespace {

constexpr std::uint32_t kCodeBase = 0x0800'0400;

// A layered program: main at the root of a call tree three wide per level (depth log3 N),
// each call made 1..2 times, and a quarter of the functions also called once from another
// function of their parent's level (shared callees: a DAG); per-call costs are heavy-tailed
// (most functions cheap, a few hot), so a threshold leaves few functions and the planner has
// much to prune. Activations per run stay within a few thousand times N.
std::vector<CounterFunction> layers(std::size_t n, std::uint64_t seed) {
    if (n < 2 || n > 100'000) throw std::invalid_argument("layers: 2..100000 functions");
    std::mt19937_64 rng(seed);
    std::vector<CounterFunction> fns(n);
    std::uint32_t addr = kCodeBase;
    for (std::size_t f = 0; f < n; ++f) {
        CounterFunction& fn = fns[f];
        fn.name = f == 0 ? "main" : "fn_" + std::to_string(f);
        fn.addr = addr | 1u;  // Thumb
        addr += 0x20 + 4 * static_cast<std::uint32_t>(rng() % 32);
        // One draw per statement: the operands' order is the compiler's to choose, and a model
        // must be the same whichever compiler built it.
        const std::uint64_t base = rng() % 30;
        const std::uint64_t cycles = 4 + base * (rng() % 6 == 0 ? 40 : 1);
        protocol::CounterValues& own = fn.own;
        own[0] = cycles;                           // CYCCNT
        own[1] = cycles * (rng() % 20) / 100;      // CPICNT
        own[2] = rng() % 10 == 0 ? 12 : 0;         // EXCCNT: an exception now and then
        own[3] = rng() % 8 == 0 ? cycles / 4 : 0;  // SLEEPCNT: a WFI in a few
        own[4] = cycles * (rng() % 25) / 100;      // LSUCNT
        own[5] = cycles * (rng() % 5) / 100;       // FOLDCNT
    }
    // Level l holds indices [(3^l - 1) / 2, (3^(l+1) - 1) / 2): parent(f) = (f - 1) / 3.
    auto level_start = [](std::size_t f) {
        std::size_t start = 0, width = 1;
        while (start + width <= f) {
            start += width;
            width *= 3;
        }
        return start;
    };
    for (std::size_t f = 1; f < n; ++f) {
        const std::size_t parent = (f - 1) / 3;
        fns[parent].calls.push_back({f, 1 + static_cast<std::uint32_t>(rng() % 2)});
        const std::size_t lo = level_start(parent);
        const std::size_t other = lo + rng() % (f - lo);  // before f, from the parent's level on
        if (rng() % 4 == 0 && other != parent && other < level_start(f))
            fns[other].calls.push_back({f, 1});
    }
    return fns;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> counter_models() {
    return {
        {"layers", "a layered call DAG of --functions functions (default 60), heavy-tailed costs"}};
}

struct CounterBoard::Sink final : protocol::RecordSink {
    explicit Sink(CounterBoard& b) : board(b) {}
    CounterBoard& board;
    void on_records(std::span<const protocol::Record>) override {}
    void on_event(const protocol::StreamEvent& event) override {
        if (const auto* c = std::get_if<protocol::CounterConfig>(&event)) board.run(*c);
    }
};

CounterBoard::CounterBoard(const CounterModelOptions& options)
    : options_(options), decoder_({options.addr_bytes}), encoder_(options.addr_bytes) {
    if (options.slots == 0 || options.slots > protocol::kMaxConfigFunctions)
        throw std::invalid_argument("slots: 1..60");
    if (options.counters >= (1u << protocol::kPrimaryCounters))
        throw std::invalid_argument("a counter mask has bits 0..5 only");
    if (options.model != "layers")
        throw std::invalid_argument("unknown counter model '" + options.model +
                                    "' (built in: layers)");
    functions_ = layers(options.functions, options.seed);
    if (options.addr_bytes == 3) {
        for (auto& f : functions_) f.addr &= 0xFFFFFF;
    }
    compute_truth();
}

std::vector<std::uint8_t> CounterBoard::start() {
    protocol::TargetHello hello;
    hello.version = protocol::kFramedVersionCounters;
    hello.addr_bytes = static_cast<std::uint8_t>(options_.addr_bytes);
    hello.flags = protocol::kHelloCounters;
    hello.text_lo = kCodeBase;
    hello.text_hi = (functions_.back().addr & ~1u) + 0x100;
    hello.core_clock_hz = 64'000'000;
    encoder_.reset();
    encoder_.hello(hello);
    encoder_.counter_capabilities({options_.counters, options_.slots});
    encoder_.flush();
    return encoder_.take_wire();
}

std::vector<std::uint8_t> CounterBoard::receive(std::span<const std::uint8_t> bytes) {
    Sink sink(*this);
    decoder_.feed(bytes, sink);
    return encoder_.take_wire();
}

// One run of the program for a configuration, as target-fw counts it: the global counters run
// on; at the outermost entry of a configured function they are snapshot, at its exit the
// difference is added to its accumulator.
void CounterBoard::run(const protocol::CounterConfig& config) {
    ++runs_;
    const bool refused =
        config.functions.size() > options_.slots || (config.counters & ~options_.counters) != 0;
    if (refused) {
        encoder_.run_totals({config.run, 0, 0, {}});
        encoder_.flush();
        return;
    }
    std::map<std::uint32_t, std::size_t> slot_of;  // function address -> slot
    for (std::size_t i = 0; i < config.functions.size(); ++i)
        slot_of.emplace(config.functions[i], i);
    std::vector<std::size_t> slot(functions_.size(), SIZE_MAX);
    for (std::size_t f = 0; f < functions_.size(); ++f) {
        const auto it = slot_of.find(functions_[f].addr);
        if (it != slot_of.end()) slot[f] = it->second;
    }
    const std::size_t k = config.functions.size();
    std::vector<protocol::CounterValues> acc(k), snapshot(k);
    std::vector<std::uint64_t> entries(k, 0);
    std::vector<int> depth(k, 0);
    protocol::CounterValues now{};
    auto add = [&](const protocol::CounterValues& v, std::uint64_t div, bool rest) {
        for (std::size_t c = 0; c < now.size(); ++c)
            now[c] += rest ? v[c] - v[c] / div : v[c] / div;
    };
    // Iterative depth-first execution (no recursion limit on deep models).
    struct Frame {
        std::size_t f;
        std::size_t call = 0;
        std::uint32_t times = 0;
    };
    std::vector<Frame> stack;
    auto enter = [&](std::size_t f) {
        if (const std::size_t s = slot[f]; s != SIZE_MAX) {
            ++entries[s];
            if (depth[s]++ == 0) snapshot[s] = now;
        }
        add(functions_[f].own, 2, false);  // half its own work before its calls
        stack.push_back({f});
    };
    enter(0);
    while (!stack.empty()) {
        Frame& fr = stack.back();
        const auto& calls = functions_[fr.f].calls;
        if (fr.call < calls.size()) {
            if (fr.times < calls[fr.call].second) {
                ++fr.times;
                enter(calls[fr.call].first);
            } else {
                ++fr.call;
                fr.times = 0;
            }
            continue;
        }
        const std::size_t f = fr.f;
        add(functions_[f].own, 2, true);  // the rest after
        stack.pop_back();
        if (const std::size_t s = slot[f]; s != SIZE_MAX && --depth[s] == 0) {
            for (std::size_t c = 0; c < now.size(); ++c) acc[s][c] += now[c] - snapshot[s][c];
        }
    }
    auto masked = [&](protocol::CounterValues v) {
        for (int c = 0; c < protocol::kPrimaryCounters; ++c) {
            if (!(config.counters & (1u << c))) v[static_cast<std::size_t>(c)] = 0;
        }
        return v;
    };
    for (std::size_t s = 0; s < k; ++s) {
        encoder_.function_counts(
            {config.run, config.counters, config.functions[s], entries[s], masked(acc[s])});
    }
    encoder_.run_totals({config.run, config.counters, static_cast<std::uint8_t>(k), masked(now)});
    encoder_.flush();
}

// From the structure alone: per-call inclusive counts bottom-up (callees come later in the
// order), calls top-down; a function's inclusive counts are its calls times its per-call ones.
void CounterBoard::compute_truth() {
    const std::size_t n = functions_.size();
    std::vector<protocol::CounterValues> per_call(n);
    for (std::size_t f = n; f-- > 0;) {
        per_call[f] = functions_[f].own;
        for (const auto& [callee, times] : functions_[f].calls) {
            if (callee <= f) throw std::logic_error("a counter model must be a DAG in order");
            for (std::size_t c = 0; c < per_call[f].size(); ++c)
                per_call[f][c] += times * per_call[callee][c];
        }
    }
    calls_.assign(n, 0);
    calls_[0] = 1;
    for (std::size_t f = 0; f < n; ++f) {
        for (const auto& [callee, times] : functions_[f].calls) calls_[callee] += calls_[f] * times;
    }
    inclusive_.assign(n, {});
    for (std::size_t f = 0; f < n; ++f) {
        for (std::size_t c = 0; c < per_call[f].size(); ++c)
            inclusive_[f][c] = calls_[f] * per_call[f][c];
    }
    totals_ = inclusive_[0];
}

}  // namespace rackprof::daemon::sim
