#include "daemon/sim/board_simulator.h"

#include <algorithm>
#include <optional>
#include <stdexcept>

#include "daemon/sim/target_cache.h"
#include "gmon/elf_fit.h"
#include "gmon/profile.h"
#include "gmon/synthetic_elf.h"

namespace rackprof::daemon::sim {

const char* wire_format_name(WireProtocol protocol) {
    return protocol == WireProtocol::kFramed ? "framed" : "legacy";
}

std::optional<WireProtocol> simulated_protocol(std::string_view wire_format) {
    for (const auto p : {WireProtocol::kLegacy, WireProtocol::kFramed}) {
        if (wire_format == wire_format_name(p)) return p;
    }
    return std::nullopt;
}

namespace {

// Encodes records (legacy or framed), keeps the ground truth of what left the target, applies
// faults, hex-encodes if asked, and streams the result out.
class WireWriter {
  public:
    WireWriter(const SimulatorOptions& options, const WireOutput& out, GroundTruth& truth)
        : options_(options),
          out_(out),
          truth_(truth),
          fault_rng_(options.seed ^ 0x5EED'FA17ull),
          encoder_(options.addr_bytes) {
        if (framed() && options.arc_cache > 0) arc_cache_.emplace(options.arc_cache);
        if (framed() && options.pc_cache > 0) pc_cache_.emplace(options.pc_cache);
    }

    bool framed() const { return options_.protocol == WireProtocol::kFramed; }

    // What the target runtime says first after reset (framed only).
    void start(const protocol::AddressRange& code_range) {
        if (!framed()) return;
        protocol::TargetHello hello;
        hello.version = protocol::kFramedVersion;
        hello.addr_bytes = static_cast<std::uint8_t>(options_.addr_bytes);
        hello.flags = arc_cache_ ? protocol::kHelloArcCache : 0;
        hello.text_lo = code_range.low;
        hello.text_hi = code_range.high;
        hello.sample_hz = options_.sample_hz;
        hello.core_clock_hz = 48'000'000;
        if (options_.elf) hello.build_id = build_id_bytes(options_.elf->build_id());
        hello.arch = options_.arch;
        encoder_.hello(hello);
        encoder_.marker({true});
        encoder_.flush();
        take_frames(true);
    }

    // One observation of the model.
    void record(const protocol::Record& r) {
        if (r.kind == protocol::RecordKind::kArc) truth_.calls += r.count;
        auto& cache = r.kind == protocol::RecordKind::kArc ? arc_cache_ : pc_cache_;
        if (cache) {
            cache->add(r, [this](const protocol::Record& e) { send(e); });
        } else {
            send(r);
        }
    }
    void flush_cache() {
        for (auto* cache : {&arc_cache_, &pc_cache_}) {
            if (*cache) (*cache)->flush([this](const protocol::Record& e) { send(e); });
        }
    }
    std::uint64_t binary_bytes() const { return binary_bytes_; }

    // The end of the run: the cache flushed, then STOP (framed), then everything out.
    void finish() {
        if (framed()) {
            flush_cache();
            encoder_.flush();
            take_frames(false);
            encoder_.marker({false});
            encoder_.flush();
            take_frames(true);
        }
        flush();
    }

  private:
    static std::vector<std::uint8_t> build_id_bytes(const std::string& hex) {
        std::vector<std::uint8_t> out;
        for (std::size_t i = 0; i + 1 < hex.size() && out.size() < protocol::kMaxBuildIdBytes;
             i += 2) {
            out.push_back(static_cast<std::uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
        }
        return out;
    }

    // A record leaving the target: into the ground truth and onto the wire.
    void send(const protocol::Record& r) {
        if (r.kind == protocol::RecordKind::kArc) {
            truth_.aggregate.add_arc(r.from_pc, r.self_pc, r.count);
            ++truth_.arcs_sent;
        } else {
            truth_.aggregate.add_pc(r.self_pc, r.count);
            ++truth_.pc_samples_sent;
        }
        if (framed()) {
            encoder_.record(r);
            if (!encoder_.wire().empty()) take_frames(false);
        } else {
            const std::size_t before = encoded_.size();
            protocol::encode_legacy(r, options_.addr_bytes, encoded_);
            binary_bytes_ += encoded_.size() - before;
        }
        if (encoded_.size() >= options_.piece_bytes) flush();
    }

    // Moves the encoder's finished frames to the output, losing whole frames as the link's
    // frame_drop says unless `spared`.
    void take_frames(bool spared) {
        const std::vector<std::uint8_t> wire = encoder_.take_wire();
        binary_bytes_ += wire.size();
        std::size_t start = 0;
        for (std::size_t i = 0; i < wire.size(); ++i) {
            if (wire[i] != protocol::kFrameDelimiter) continue;
            ++truth_.frames_sent;
            const double p = options_.faults.frame_drop;
            if (!spared && p > 0 && std::uniform_real_distribution<double>(0, 1)(fault_rng_) < p) {
                ++truth_.faults.frames_dropped;
            } else {
                encoded_.insert(encoded_.end(), wire.begin() + static_cast<std::ptrdiff_t>(start),
                                wire.begin() + static_cast<std::ptrdiff_t>(i + 1));
            }
            start = i + 1;
        }
    }

    void flush() {
        std::vector<std::uint8_t>* bytes = &encoded_;
        if (options_.faults.any()) {
            apply_faults();
            bytes = &faulted_;
        }
        if (options_.encoding == protocol::LegacyEncoding::kHex) {
            text_.clear();
            protocol::append_hex(*bytes, text_);
            emit(reinterpret_cast<const std::uint8_t*>(text_.data()), text_.size());
        } else {
            emit(bytes->data(), bytes->size());
        }
        encoded_.clear();
    }

    void emit(const std::uint8_t* data, std::size_t size) {
        if (size == 0) return;
        truth_.wire_bytes += size;
        out_(data, size);
    }

    void apply_faults() {
        const FaultSpec& f = options_.faults;
        std::uniform_real_distribution<double> unit(0.0, 1.0);
        faulted_.clear();
        for (std::uint8_t b : encoded_) {
            if (f.insert > 0 && unit(fault_rng_) < f.insert) {
                faulted_.push_back(static_cast<std::uint8_t>(fault_rng_()));
                ++truth_.faults.inserted;
            }
            if (f.drop > 0 && unit(fault_rng_) < f.drop) {
                ++truth_.faults.dropped;
                continue;
            }
            if (f.flip > 0 && unit(fault_rng_) < f.flip) {
                b = static_cast<std::uint8_t>(b ^ (1u << (fault_rng_() % 8)));
                ++truth_.faults.flipped;
            }
            faulted_.push_back(b);
        }
    }

    const SimulatorOptions& options_;
    const WireOutput& out_;
    GroundTruth& truth_;
    std::mt19937_64 fault_rng_;
    protocol::FramedEncoder encoder_;
    std::optional<RecordCache> arc_cache_;
    std::optional<RecordCache> pc_cache_;
    std::vector<std::uint8_t> encoded_;
    std::vector<std::uint8_t> faulted_;
    std::string text_;
    std::uint64_t binary_bytes_ = 0;
};

// The board as a model program sees it: functions that do work (PC samples) and call each
// other (arcs). Every observation goes to the wire and into the ground truth.
class Board {
  public:
    Board(const SimulatorOptions& options, WireWriter& wire, GroundTruth& truth)
        : options_(options), wire_(wire), truth_(truth), rng_(options.seed) {}

    // `code_bytes`: where sampled PCs may land (0: the whole function).
    int function(const std::string& name, std::uint32_t addr, std::uint32_t size,
                 std::uint32_t mcount_offset = 4, std::uint32_t code_bytes = 0) {
        truth_.functions.push_back({name, addr, size, mcount_offset});
        code_bytes_.push_back(code_bytes ? code_bytes : size);
        const auto factor = options_.work_factor.find(name);
        work_factor_.push_back(factor == options_.work_factor.end() ? 1 : factor->second);
        return static_cast<int>(truth_.functions.size()) - 1;
    }

    // `samples` periodic PC samples land somewhere inside f.
    void work(int f, std::uint32_t samples) {
        const SimulatedFunction& fn = truth_.functions[static_cast<std::size_t>(f)];
        samples *= work_factor_[static_cast<std::size_t>(f)];
        const std::uint32_t code = code_bytes_[static_cast<std::size_t>(f)];
        for (std::uint32_t i = 0; i < samples; ++i) {
            const std::uint32_t pc = fn.addr + 2 * static_cast<std::uint32_t>(rng_() % (code / 2));
            send(protocol::Record::pc_sample(pc));
        }
    }

    // f runs for `cycles` cycles of the board's clock, its PC moving through its code evenly;
    // the sampling timer fires every kSamplePeriodCycles (± the dither) and takes the PC
    // wherever it is then. A loop of exactly the period meets the timer at the same place
    // every pass: that is the synchronisation a dithered period breaks.
    void run(int f, std::uint32_t cycles) {
        const SimulatedFunction& fn = truth_.functions[static_cast<std::size_t>(f)];
        cycles *= work_factor_[static_cast<std::size_t>(f)];
        const std::uint64_t start = clock_, end = clock_ + cycles;
        for (; next_sample_ < end; next_sample_ += sample_interval()) {
            const std::uint64_t into = next_sample_ - start;
            const auto halfwords = static_cast<std::uint64_t>(fn.size / 2);
            send(protocol::Record::pc_sample(
                fn.addr + 2 * static_cast<std::uint32_t>(into * halfwords / cycles)));
        }
        clock_ = end;
    }

    // caller calls callee from the call site `site` bytes into the caller; body runs inside.
    template <typename Body>
    void call(int caller, std::uint32_t site, int callee, Body&& body) {
        const SimulatedFunction& from = truth_.functions[static_cast<std::size_t>(caller)];
        const SimulatedFunction& to = truth_.functions[static_cast<std::size_t>(callee)];
        // What __gnu_mcount_nc reports: the caller's return address and an address just past
        // the callee's prologue, both with the Thumb bit.
        send(protocol::Record::arc((from.addr + site) | 1u,
                                   (to.addr + std::min(to.mcount_offset, to.size - 2)) | 1u));
        body();
    }
    void call(int caller, std::uint32_t site, int callee) {
        call(caller, site, callee, [] {});
    }

    std::mt19937_64& rng() { return rng_; }

  private:
    void send(const protocol::Record& r) { wire_.record(r); }

    // The next reload of the sampling timer: the period, with the dither the target adds.
    std::uint64_t sample_interval() {
        const std::uint32_t n = options_.dither_cycles;
        if (n == 0) return kSamplePeriodCycles;
        // The 16-bit Galois LFSR of target-fw's runtime (taps 16, 14, 13, 11: maximal).
        lfsr_ = static_cast<std::uint16_t>((lfsr_ >> 1) ^ ((lfsr_ & 1u) ? 0xB400u : 0u));
        const auto jitter = static_cast<std::int64_t>(lfsr_ % (2 * n + 1)) - n;
        return static_cast<std::uint64_t>(kSamplePeriodCycles + jitter);
    }

    const SimulatorOptions& options_;
    WireWriter& wire_;
    GroundTruth& truth_;
    std::mt19937_64 rng_;
    std::vector<std::uint32_t> work_factor_;  // per function, from options_.work_factor
    std::vector<std::uint32_t> code_bytes_;   // per function: where its sampled PCs land
    std::uint64_t clock_ = 0;                 // cycles run (run())
    std::uint64_t next_sample_ = kSamplePeriodCycles / 4;  // when the sampling timer fires
    std::uint16_t lfsr_ = 0xACE1u;
};

using Iteration = std::function<void()>;

// The thesis' blinky: LEDs toggled between busy-wait delays (fig. 40-42 of the thesis).
Iteration blinky(Board& b) {
    const int main_fn = b.function("main", 0x4F0, 0x60);
    const int leds = b.function("control_LEDs", 0x550, 0x80);
    const int set = b.function("LED_SetVal", 0xDC0, 0x20);
    const int clr = b.function("LED_ClrVal", 0xDE0, 0x20);
    const int waitms = b.function("WAIT1_Waitms", 0x1520, 0x40);
    const int longc = b.function("WAIT1_WaitLongCycles", 0x1500, 0x20);
    const int cycles = b.function("WAIT1_WaitCycles", 0x14E0, 0x20);
    auto state = std::make_shared<int>(0);
    return [&b, main_fn, leds, set, clr, waitms, longc, cycles, state] {
        b.work(main_fn, 1);
        b.call(main_fn, 0x1A, leds, [&] {
            b.work(leds, 1);
            b.call(leds, 0x10, (*state)++ % 2 ? set : clr);
        });
        b.call(main_fn, 0x26, waitms, [&] {
            for (int i = 0; i < 50; ++i) {
                b.call(waitms, 0x0C, longc, [&] {
                    b.work(longc, static_cast<std::uint32_t>(i % 2));
                    b.call(longc, 0x08, cycles, [&] { b.work(cycles, 3); });
                });
            }
        });
    };
}

// A main loop paced to exactly the sampling period (kSamplePeriodCycles): main runs 100
// cycles, calls compute() (600) and idle_wait() (300). Its true shares are 10 / 60 / 30 %;
// sampled at a fixed period every sample lands a quarter period into the loop, inside
// compute(), at one PC. A dithered period (dither_cycles) sees the true shares.
Iteration synced(Board& b) {
    const int main_fn = b.function("main", 0x2000, 0x40);
    const int compute = b.function("compute", 0x2040, 0x100);
    const int wait = b.function("idle_wait", 0x2140, 0x40);
    return [&b, main_fn, compute, wait] {
        b.run(main_fn, 100);
        b.call(main_fn, 0x10, compute, [&] { b.run(compute, 600); });
        b.call(main_fn, 0x20, wait, [&] { b.run(wait, 300); });
    };
}

// The thesis' fig. 4: fast() and slow() both call doSomething(); gprof splits its time by
// call counts, though slow()'s calls take 100 times longer.
Iteration conflation(Board& b) {
    const int main_fn = b.function("main", 0x800, 0x40);
    const int fast = b.function("fast", 0x840, 0x20);
    const int slow = b.function("slow", 0x860, 0x20);
    const int work = b.function("doSomething", 0x880, 0x40);
    return [&b, main_fn, fast, slow, work] {
        b.call(main_fn, 0x0A, fast, [&] { b.call(fast, 0x08, work, [&] { b.work(work, 1); }); });
        b.call(main_fn, 0x12, slow, [&] { b.call(slow, 0x08, work, [&] { b.work(work, 100); }); });
    };
}

// Known call counts per arc, recursion and a mutual-recursion cycle.
Iteration deterministic(Board& b) {
    const int main_fn = b.function("main", 0x1000, 0x80);
    const int a = b.function("alpha", 0x1080, 0x40);
    const int bb = b.function("beta", 0x10C0, 0x40);
    const int c = b.function("gamma", 0x1100, 0x40);
    const int fact = b.function("factorial", 0x1140, 0x20);
    const int ping = b.function("ping", 0x1160, 0x20);
    const int pong = b.function("pong", 0x1180, 0x20);
    // Recursive lambdas take themselves as a parameter: no self-owning closures.
    auto factorial = [&b, fact](auto& self, int n) -> void {
        b.work(fact, 1);
        if (n > 1) b.call(fact, 0x0C, fact, [&] { self(self, n - 1); });
    };
    auto pingpong = [&b, ping, pong](auto& self, int n, bool in_ping) -> void {
        const int current = in_ping ? ping : pong;
        b.work(current, 2);
        if (n > 0)
            b.call(current, 0x0A, in_ping ? pong : ping, [&] { self(self, n - 1, !in_ping); });
    };
    return [&b, main_fn, a, bb, c, fact, ping, factorial, pingpong]() mutable {
        b.work(main_fn, 1);
        for (int i = 0; i < 3; ++i) {
            b.call(main_fn, 0x10, a, [&] {
                b.work(a, 2);
                for (int j = 0; j < 2; ++j) {
                    b.call(a, 0x14, bb, [&] {
                        b.work(bb, 1);
                        for (int k = 0; k < 5; ++k) b.call(bb, 0x18, c, [&] { b.work(c, 4); });
                    });
                }
            });
        }
        b.call(main_fn, 0x30, fact, [&] { factorial(factorial, 5); });
        b.call(main_fn, 0x40, ping, [&] { pingpong(pingpong, 4, true); });
    };
}

struct ElfFunction {
    std::string name;
    std::uint32_t addr;
    std::uint32_t size;
    std::uint32_t mcount_offset;
    std::uint32_t code_bytes;  // before its literal pool
    std::vector<std::uint32_t> call_sites;
};

// The functions of an ELF the elf model calls: gprof's (its symbol table, so each call lands in
// the function the profile names), those built with -pg (on ARM a call in the prologue, so a
// capture of them fits the ELF as the decoder checks it), main first when it is one.
std::vector<ElfFunction> instrumented_functions(const gmon::Symbolizer& elf) {
    const bool arm = elf.arm();
    std::vector<std::uint64_t> pools;  // $d mapping symbols: literal pools
    for (const auto& d : elf.symbols())
        if (arm && d.local && (d.name == "$d" || d.name.rfind("$d.", 0) == 0))
            pools.push_back(d.addr);
    std::vector<ElfFunction> out;
    for (const gmon::ProfileSymbol& s : gmon::gprof_symbol_table(elf)) {
        const std::uint64_t size = s.end_addr + 1 - s.addr;
        if (!s.is_func || size < 8 || s.addr < elf.code_low() || s.end_addr >= elf.code_high() ||
            s.end_addr > 0xFFFFFFFFu)
            continue;
        // On ARM the -pg prologue is found in the code; elsewhere the fit check has only the
        // prologue rule (a target near the entry), which 4 bytes in meets.
        const auto mcount = arm ? gmon::mcount_return_in(elf, s.addr, size)
                                : std::optional<std::uint64_t>(s.addr + 4);
        if (!mcount) continue;
        ElfFunction f{s.name,
                      static_cast<std::uint32_t>(s.addr),
                      static_cast<std::uint32_t>(size),
                      static_cast<std::uint32_t>(*mcount - s.addr),
                      static_cast<std::uint32_t>(size),
                      {}};
        for (const std::uint64_t pool : pools)  // no PC is sampled on data
            if (pool > s.addr && pool <= s.end_addr)
                f.code_bytes = std::min(f.code_bytes, static_cast<std::uint32_t>(pool - s.addr));
        for (std::uint32_t o = f.mcount_offset + 2; arm && o < f.code_bytes; o += 2)
            if (gmon::call_ends_at(elf, s.addr + o)) f.call_sites.push_back(o);
        out.push_back(std::move(f));
    }
    const auto main_fn =
        std::find_if(out.begin(), out.end(), [](const ElfFunction& f) { return f.name == "main"; });
    if (main_fn != out.end()) std::rotate(out.begin(), main_fn, main_fn + 1);
    if (out.size() > 64) out.resize(64);
    return out;
}

// A call model made from an ELF's functions: a random call tree among them rooted at main (or
// the first), every function reached and doing some work, at the real addresses, calls from
// real call sites, so the capture symbolizes against that ELF and passes its fit check.
Iteration from_elf(Board& b, const gmon::Symbolizer& elf) {
    const std::vector<ElfFunction> fns = instrumented_functions(elf);
    if (fns.empty()) {
        throw std::invalid_argument(
            "the ELF has no function built with -pg (a call to mcount in its prologue) to "
            "simulate");
    }
    std::vector<int> ids;
    for (const auto& f : fns) {
        ids.push_back(b.function(f.name, f.addr, f.size, f.mcount_offset, f.code_bytes));
    }
    struct Edge {
        std::size_t callee;
        std::uint32_t site;
        std::uint32_t times;
    };
    auto edges = std::make_shared<std::vector<std::vector<Edge>>>(fns.size());
    auto costs = std::make_shared<std::vector<std::uint32_t>>(fns.size());
    auto& rng = b.rng();
    const auto site_in = [&](std::size_t caller) -> std::uint32_t {
        const auto& sites = fns[caller].call_sites;
        if (!sites.empty()) return sites[rng() % sites.size()];
        return 2 + 2 * static_cast<std::uint32_t>(rng() % (fns[caller].size / 2 - 1));
    };
    for (std::size_t i = 0; i < fns.size(); ++i) {
        (*costs)[i] = 1 + static_cast<std::uint32_t>(rng() % 4);
        if (i == 0) continue;
        const std::size_t parent = rng() % i;  // every function is reached from the root
        const std::uint32_t site = site_in(parent);
        (*edges)[parent].push_back({i, site, 1 + static_cast<std::uint32_t>(rng() % 2)});
    }
    auto run = [&b, ids, edges, costs](auto& self, std::size_t f) -> void {
        b.work(ids[f], (*costs)[f]);
        for (const Edge& e : (*edges)[f]) {
            for (std::uint32_t t = 0; t < e.times; ++t)
                b.call(ids[f], e.site, ids[e.callee], [&] { self(self, e.callee); });
        }
    };
    return [run]() mutable { run(run, 0); };
}

}  // namespace

std::vector<std::pair<std::string, std::string>> builtin_models() {
    return {
        {"blinky", "the thesis' blinky: LEDs toggled between busy-wait delays"},
        {"conflation", "fast() and slow() both call doSomething() (thesis fig. 4)"},
        {"deterministic", "known call counts per arc, recursion and a two-function cycle"},
        {"synced", "a main loop of exactly the sampling period (try --dither): 10/60/30 %"},
        {"elf", "a random call tree over the -pg functions of --elf FILE, each reached"},
    };
}

namespace {

void validate(const SimulatorOptions& options) {
    protocol::validate(protocol::LegacyOptions{options.addr_bytes, options.encoding, {}});
    const bool framed = options.protocol == WireProtocol::kFramed;
    if (framed && options.encoding != protocol::LegacyEncoding::kBinary)
        throw std::invalid_argument("the framed protocol is binary only (no hex)");
    if (!framed && (options.arc_cache > 0 || options.pc_cache > 0 || options.faults.frame_drop > 0))
        throw std::invalid_argument("on-target caches and frame drops need the framed protocol");
    if (options.dither_cycles >= kSamplePeriodCycles)
        throw std::invalid_argument("the dither must be below the sampling period (1000 cycles)");
    if (options.max_bytes == 0 && options.max_iterations == 0 && !options.stop) {
        throw std::invalid_argument("the simulation needs a limit: iterations or bytes");
    }
}

Iteration model_iteration(const SimulatorOptions& options, Board& board) {
    if (options.model == "blinky") return blinky(board);
    if (options.model == "conflation") return conflation(board);
    if (options.model == "deterministic") return deterministic(board);
    if (options.model == "synced") return synced(board);
    if (options.model == "elf") {
        if (!options.elf) throw std::invalid_argument("the elf model needs --elf FILE");
        return from_elf(board, *options.elf);
    }
    throw std::invalid_argument("unknown model '" + options.model +
                                "' (built in: blinky, conflation, deterministic, synced, elf)");
}

}  // namespace

// Heap-allocated as a whole: the writer, the board and the model's closures point at each
// other and at `options`, `out` and `truth`.
struct BoardSimulation::State {
    State(SimulatorOptions o, WireOutput w)
        : options(std::move(o)),
          out(std::move(w)),
          wire(options, out, truth),
          board(options, wire, truth) {}
    SimulatorOptions options;
    WireOutput out;
    GroundTruth truth;
    WireWriter wire;
    Board board;
    Iteration iteration;
    bool done = false;

    bool limit_reached() const {
        return (options.max_iterations > 0 && truth.iterations >= options.max_iterations) ||
               (options.max_bytes > 0 && wire.binary_bytes() >= options.max_bytes) ||
               (options.stop && options.stop->load(std::memory_order_relaxed));
    }
};

BoardSimulation::BoardSimulation(SimulatorOptions options, WireOutput out) {
    validate(options);
    state_ = std::make_unique<State>(std::move(options), std::move(out));
    State& s = *state_;
    s.truth.model = s.options.model;
    s.iteration = model_iteration(s.options, s.board);
    std::uint32_t low = ~0u, high = 0;
    for (const auto& f : s.truth.functions) {
        low = std::min(low, f.addr);
        high = std::max(high, f.addr + f.size);
    }
    s.truth.code_range = {low, high};
    s.wire.start(s.truth.code_range);
}

BoardSimulation::~BoardSimulation() = default;

bool BoardSimulation::done() const {
    return state_->done;
}

const GroundTruth& BoardSimulation::truth() const {
    return state_->truth;
}

void BoardSimulation::step() {
    State& s = *state_;
    if (s.done) return;
    if (!s.limit_reached()) {
        s.iteration();
        ++s.truth.iterations;
        if (s.options.arc_cache_flush > 0 && s.truth.iterations % s.options.arc_cache_flush == 0)
            s.wire.flush_cache();
    }
    // Finished as soon as a limit is reached, so done() turns true with the last bytes out.
    if (s.limit_reached()) {
        s.wire.finish();
        s.done = true;
    }
}

GroundTruth simulate_board(const SimulatorOptions& options, const WireOutput& out) {
    BoardSimulation simulation(options, out);
    while (!simulation.done()) simulation.step();
    return simulation.truth();
}

void write_model_elf(const std::filesystem::path& path, const GroundTruth& truth) {
    std::vector<gmon::SyntheticFunction> functions;
    for (const auto& f : truth.functions) functions.push_back({f.name, f.addr, f.size});
    gmon::write_synthetic_elf(path, functions, truth.code_range.low, truth.code_range.high);
}

}  // namespace rackprof::daemon::sim
