// The firmware's transmit ring (ring.h) on the host: nested producers, one consumer. Under
// QEMU the firmware only shows that counts come out right for the interleavings its timers
// happen to hit; here a producer is preempted at every point where an interrupt may come
// (rp_host_preempt: around each load and store of the state word, before each byte written),
// and then by real POSIX signals at random points.
#include "target-fw/runtime/ring_host.h"

#include <doctest/doctest.h>
#include <signal.h>
#include <time.h>

#include <array>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace {

// A record: [length][producer][sequence, 4 bytes LE][filler...][checksum]. A byte lost, torn,
// doubled or written to the wrong place shows as a bad length, filler or checksum.
constexpr unsigned kHeaderBytes = 6;
constexpr unsigned kMinRecord = kHeaderBytes + 1;
constexpr unsigned kProducers = 4;

std::uint8_t filler(unsigned producer, std::uint32_t sequence, unsigned i) {
    return static_cast<std::uint8_t>(producer * 61u + sequence * 7u + i * 13u);
}

// Fills `out` (at least `length` bytes) with one record.
void make_record(unsigned producer, std::uint32_t sequence, unsigned length, std::uint8_t* out) {
    out[0] = static_cast<std::uint8_t>(length);
    out[1] = static_cast<std::uint8_t>(producer);
    for (unsigned i = 0; i < 4; ++i) out[2 + i] = static_cast<std::uint8_t>(sequence >> (8 * i));
    std::uint8_t sum = 0;
    for (unsigned i = 0; i < length - 1; ++i) {
        if (i >= kHeaderBytes) out[i] = filler(producer, sequence, i);
        sum = static_cast<std::uint8_t>(sum + out[i]);
    }
    out[length - 1] = static_cast<std::uint8_t>(~sum);
}

struct Taken {
    bool ok = false;
    unsigned producer = 0;
    std::uint32_t sequence = 0;
};

// Takes the record at the ring's tail; not ok (and nothing taken) when its bytes are not a
// whole, intact record. Async-signal-safe: the signal test's consumer runs it in a handler.
Taken take_record() {
    Taken t;
    const unsigned used = rp_host_used();
    const unsigned length = rp_host_peek(0);
    if (length < kMinRecord || length > used) return t;
    std::array<std::uint8_t, 256> bytes{};
    std::uint8_t sum = 0;
    for (unsigned i = 0; i < length; ++i) {
        bytes[i] = rp_host_peek(i);
        if (i + 1 < length) sum = static_cast<std::uint8_t>(sum + bytes[i]);
    }
    t.producer = bytes[1];
    for (unsigned i = 0; i < 4; ++i) t.sequence |= std::uint32_t{bytes[2 + i]} << (8 * i);
    if (t.producer >= kProducers || bytes[length - 1] != static_cast<std::uint8_t>(~sum)) return t;
    for (unsigned i = kHeaderBytes; i + 1 < length; ++i) {
        if (bytes[i] != filler(t.producer, t.sequence, i)) return t;
    }
    rp_host_consume(length);
    t.ok = true;
    return t;
}

std::uint32_t dropped_count() {
    return rp_host_dropped;
}

// rp_host_preempt's target: nothing outside the tests below.
void (*g_preempt)() = nullptr;

}  // namespace

extern "C" void rp_host_preempt(void) {
    if (g_preempt != nullptr) g_preempt();
}

namespace {

// ---- Deterministic preemption: a plan of interrupts, each at one point of one push. ----

// What each producer queued (in order), dropped and received.
struct Log {
    std::array<std::uint32_t, kProducers> next{};
    std::array<std::vector<std::uint32_t>, kProducers> queued, received;
    std::array<unsigned, kProducers> dropped{};
    std::vector<std::string> errors;
    bool producers_only = true;  // no consumer in the plan: room only shrinks during a push
};

struct Interrupt {
    Interrupt(int d, int p, std::function<void()> h) : depth(d), point(p), handler(std::move(h)) {}
    int depth;  // of the push it preempts: 0 the outermost
    int point;  // the rp_host_preempt call of that push, from 0
    std::function<void()> handler;
    bool fired = false;
};

Log* g_log = nullptr;
std::vector<Interrupt> g_plan;
int g_running = 0;              // pushes in progress
std::array<int, 8> g_points{};  // rp_host_preempt calls so far, by the push's depth

void planned_preempt() {
    const int depth = g_running - 1;
    const int point = g_points[depth]++;
    for (Interrupt& irq : g_plan) {
        if (irq.depth == depth && irq.point == point && !irq.fired) {
            irq.fired = true;
            irq.handler();
        }
    }
}

void push(unsigned producer, unsigned length) {
    Log& log = *g_log;
    const std::uint32_t sequence = log.next[producer]++;
    std::array<std::uint8_t, 256> record{};
    make_record(producer, sequence, length, record.data());
    g_points[g_running++] = 0;
    const int queued = rp_host_push(record.data(), length);
    --g_running;
    if (queued) {
        log.queued[producer].push_back(sequence);
        return;
    }
    ++log.dropped[producer];
    // Only consumers make room, so with none in the plan the drop must have been forced.
    if (log.producers_only && rp_host_room() >= length) {
        log.errors.push_back("producer " + std::to_string(producer) + " dropped " +
                             std::to_string(length) + " bytes with " +
                             std::to_string(rp_host_room()) + " free");
    }
}

void drain() {
    while (rp_host_used() > 0) {
        const Taken t = take_record();
        if (!t.ok) {
            g_log->errors.push_back("a torn record at the tail");
            return;
        }
        g_log->received[t.producer].push_back(t.sequence);
    }
}

// Pushes and takes `rotate` bytes, so the run starts at that index and wraps where it will.
void start_ring(unsigned rotate) {
    g_preempt = nullptr;
    rp_host_reset(0);
    rp_host_dropped = 0;
    for (unsigned left = rotate; left > 0;) {
        const unsigned n = left < rp_host_capacity() ? left : rp_host_capacity();
        std::array<std::uint8_t, 256> bytes{};
        REQUIRE(rp_host_push(bytes.data(), n) == 1);
        rp_host_consume(n);
        left -= n;
    }
}

struct Outcome {
    bool all_fired;
    unsigned dropped;
};

// One run: the ring rotated, `prefill` bytes queued by producer 3, then producer 0 pushes
// `outer` bytes under `plan`. Checks everything; returns whether every planned interrupt found
// its point (a point past the end of its push does not exist).
Outcome run(unsigned rotate, unsigned prefill, unsigned outer, std::vector<Interrupt> plan,
            bool producers_only, const std::string& what) {
    Log log;
    log.producers_only = producers_only;
    g_log = &log;
    start_ring(rotate);
    if (prefill > 0) push(3, prefill);
    g_plan = std::move(plan);
    g_preempt = planned_preempt;
    push(0, outer);
    g_preempt = nullptr;
    drain();
    bool all_fired = true;
    for (const Interrupt& irq : g_plan) all_fired = all_fired && irq.fired;

    CAPTURE(what);
    CAPTURE(rotate);
    CAPTURE(prefill);
    for (const std::string& e : log.errors) FAIL_CHECK(e);
    REQUIRE(rp_host_quiescent());
    unsigned dropped = 0;
    for (unsigned p = 0; p < kProducers; ++p) {
        CAPTURE(p);
        // Every record queued arrives once, intact, in its producer's order; no other does.
        CHECK(log.received[p] == log.queued[p]);
        CHECK(log.queued[p].size() + log.dropped[p] == log.next[p]);
        dropped += log.dropped[p];
    }
    const std::uint32_t counted = rp_host_dropped;
    CHECK(counted == dropped);
    return {all_fired, dropped};
}

// The points of each push, tried in turn until one is past its end.
template <typename Body>
void every_point(Body body) {
    for (int point = 0;; ++point) {
        REQUIRE(point < 1000);
        if (!body(point)) return;
    }
}

TEST_CASE("the ring, one producer at a time: whole records, FIFO, a drop exactly when full") {
    const unsigned capacity = rp_host_capacity();
    REQUIRE(capacity >= 2 * kMinRecord);
    for (const unsigned rotate : {0u, 1u, 5u, 200u, 255u}) {
        CAPTURE(rotate);
        Log log;
        g_log = &log;
        start_ring(rotate);
        // Fill it to the last byte: the record that fits exactly is queued, one more byte not.
        unsigned queued = 0;
        while (capacity - queued >= kMinRecord) {
            const unsigned n = capacity - queued >= 2 * kMinRecord ? kMinRecord : capacity - queued;
            push(1, n);
            queued += n;
        }
        CHECK(queued == capacity);
        CHECK(rp_host_room() == 0);
        push(1, kMinRecord);
        CHECK(log.dropped[1] == 1);
        CHECK(dropped_count() == 1);
        // Taking one record makes room for exactly that many bytes.
        const Taken first = take_record();
        REQUIRE(first.ok);
        log.received[1].push_back(first.sequence);
        CHECK(rp_host_room() == kMinRecord);
        push(2, kMinRecord + 1);  // one byte too many
        push(2, kMinRecord);
        CHECK(log.dropped[2] == 1);
        CHECK(dropped_count() == 2);
        drain();
        CHECK(log.errors.empty());
        CHECK(log.received[1] == log.queued[1]);
        CHECK(log.received[2] == log.queued[2]);
        CHECK(rp_host_quiescent());
    }
}

TEST_CASE("nested producers and the consumer at every point of a push") {
    const unsigned capacity = rp_host_capacity();
    // Producer 0 in thread mode pushes 9 bytes; producer 1 (a handler) 11; producer 2 (a
    // handler above it) 7; producer 3 queued `prefill` bytes first. 27 bytes in all.
    constexpr unsigned kOuter = 9, kInner = 11, kInnermost = 7, kAll = kOuter + kInner + kInnermost;
    std::vector<unsigned> prefills{0};
    for (const unsigned below : {kAll, kAll - 5, kAll - 12, kOuter + 2, kOuter, kOuter - 1}) {
        if (capacity >= below + kMinRecord) prefills.push_back(capacity - below);
    }
    unsigned runs = 0, drops = 0;
    auto tally = [&](Outcome o) {
        ++runs;
        drops += o.dropped;
        return o.all_fired;
    };
    for (const unsigned rotate : {0u, 1u, 7u, 31u, 100u, 250u, 255u}) {
        for (const unsigned prefill : prefills) {
            // Everything fits whatever the order: nothing may be dropped.
            const bool fits = prefill + kAll <= capacity;
            auto run_fits = [&](std::vector<Interrupt> plan, bool producers_only,
                                const std::string& what) {
                const Outcome o =
                    run(rotate, prefill, kOuter, std::move(plan), producers_only, what);
                if (fits) CHECK(o.dropped == 0);
                return tally(o);
            };
            auto inner = [] { push(1, kInner); };
            auto innermost = [] { push(2, kInnermost); };
            // Which points a push has depends only on what came before them, not on what
            // interrupts there: each loop stops at the first point past the end of its push.
            every_point([&](int i) {
                const std::string at = std::to_string(i);
                if (!run_fits({{0, i, inner}}, true, "a handler at " + at)) return false;
                run_fits({{0, i, drain}}, false, "the consumer at " + at);
                every_point([&](int j) {
                    const std::string at2 = at + ", then " + std::to_string(j);
                    run_fits({{0, i, inner}, {1, j, drain}}, false,
                             "the consumer in a handler at " + at2);
                    return run_fits({{0, i, inner}, {1, j, innermost}}, true,
                                    "a handler in a handler at " + at2);
                });
                every_point([&](int j) {
                    const std::string at2 = at + " and " + std::to_string(i + 1 + j);
                    run_fits({{0, i, inner}, {0, i + 1 + j, drain}}, false,
                             "a handler, then the consumer at " + at2);
                    return run_fits({{0, i, inner}, {0, i + 1 + j, inner}}, true,
                                    "the same handler twice at " + at2);
                });
                return true;
            });
        }
    }
    MESSAGE(runs << " runs, " << drops << " records dropped");
    CHECK(drops > 0);
}

// ---- Real signals: producers preempted wherever the kernel delivers. ----
// Producer 0 is the thread; producer 1 a SIGUSR1 handler; producer 2 a SIGUSR2 handler, which
// may preempt producer 1 (SIGUSR1 is masked in it, not the reverse); the consumer a SIGALRM
// handler that masks both, as the UART's interrupt outranks every producer. Timers raise the
// three signals. Everything the handlers touch is preallocated.

constexpr unsigned kSignalProducers = 3;
constexpr std::uint32_t kMaxSequence = 1u << 21;
constexpr std::uint8_t kDropped = 1, kReceived = 2;

std::array<std::vector<std::uint8_t>, kSignalProducers> g_fate;  // by sequence
std::array<std::uint32_t, kSignalProducers> g_next_sequence{}, g_expected{};
std::array<volatile std::uint32_t, kSignalProducers> g_queued{};  // pushes the ring took
volatile std::sig_atomic_t g_signal_errors = 0;
volatile int g_pushing = 0;           // pushes in progress, nested
volatile unsigned long g_nested = 0;  // pushes that began inside another

// At every preemption point: widens each window an interrupt may hit, so that signals land
// inside pushes, and inside their steps, far more often than in a bare loop.
void stall() {
    volatile int spins = 0;
    while (spins < 40) spins = spins + 1;
}

void signal_push(unsigned producer) {
    const std::uint32_t sequence = g_next_sequence[producer];
    if (sequence >= kMaxSequence) return;
    g_next_sequence[producer] = sequence + 1;
    const unsigned length = kMinRecord + sequence % 9;
    std::array<std::uint8_t, kMinRecord + 8> record{};
    make_record(producer, sequence, length, record.data());
    if (g_pushing > 0) g_nested = g_nested + 1;
    g_pushing = g_pushing + 1;
    const int queued = rp_host_push(record.data(), length);
    g_pushing = g_pushing - 1;
    if (queued)
        g_queued[producer] = g_queued[producer] + 1;
    else
        g_fate[producer][sequence] |= kDropped;
}

void consume_all() {
    while (rp_host_used() > 0) {
        const Taken t = take_record();
        // FIFO per producer: each one's sequences arrive in increasing order.
        if (!t.ok || t.producer >= kSignalProducers || t.sequence >= kMaxSequence ||
            t.sequence < g_expected[t.producer]) {
            g_signal_errors = g_signal_errors + 1;
            return;
        }
        g_expected[t.producer] = t.sequence + 1;
        g_fate[t.producer][t.sequence] |= kReceived;
    }
}

extern "C" void on_sigusr1(int) {
    signal_push(1);
}
extern "C" void on_sigusr2(int) {
    signal_push(2);
}
extern "C" void on_sigalrm(int) {
    consume_all();
}

struct SignalTimer {
    SignalTimer(int signo, long period_ns) {
        sigevent event{};
        event.sigev_notify = SIGEV_SIGNAL;
        event.sigev_signo = signo;
        REQUIRE(timer_create(CLOCK_MONOTONIC, &event, &id) == 0);
        set_period(period_ns);
    }
    void set_period(long period_ns) {
        itimerspec spec{};
        spec.it_value.tv_sec = spec.it_interval.tv_sec = period_ns / 1'000'000'000;
        spec.it_value.tv_nsec = spec.it_interval.tv_nsec = period_ns % 1'000'000'000;
        REQUIRE(timer_settime(id, 0, &spec, nullptr) == 0);
    }
    ~SignalTimer() { timer_delete(id); }
    SignalTimer(const SignalTimer&) = delete;
    SignalTimer& operator=(const SignalTimer&) = delete;
    timer_t id{};
};

void handle(int signo, void (*handler)(int), std::initializer_list<int> masked) {
    struct sigaction action {};
    action.sa_handler = handler;
    sigemptyset(&action.sa_mask);
    for (const int m : masked) sigaddset(&action.sa_mask, m);
    action.sa_flags = SA_RESTART;
    REQUIRE(sigaction(signo, &action, nullptr) == 0);
}

TEST_CASE("producers preempted by POSIX signals: nothing lost or torn, drops counted exactly") {
    for (auto& fate : g_fate) fate.assign(kMaxSequence, 0);
    g_next_sequence = {};
    g_expected = {};
    g_signal_errors = 0;
    g_nested = 0;
    for (auto& queued : g_queued) queued = 0;
    g_preempt = stall;
    rp_host_reset(0);
    rp_host_dropped = 0;
    handle(SIGUSR1, on_sigusr1, {});
    handle(SIGUSR2, on_sigusr2, {SIGUSR1});
    handle(SIGALRM, on_sigalrm, {SIGUSR1, SIGUSR2});

    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    {
        constexpr long kConsumerNs = 20'000, kLowNs = 47'000, kHighNs = 89'000;
        SignalTimer consumer(SIGALRM, kConsumerNs), low(SIGUSR1, kLowNs), high(SIGUSR2, kHighNs);
        // Handlers that take longer than their period (a sanitizer, a loaded machine) would
        // starve the thread: each 50 ms in which it pushed fewer than 20 times, the signals slow
        // down by half, so all three producers keep getting through.
        long slowdown = 1;
        auto window = start;
        std::uint32_t window_pushes = 0;
        const auto every_producer_through = [] {
            for (const auto queued : g_queued)
                if (queued < 20) return false;
            return true;
        };
        // The thread waits a little for room, as a blocking thread-mode producer does, but
        // pushes anyway after 30 us (dropped if still full). Half a second at least, and until
        // a thousand pushes began inside another and every producer got 20 records through
        // (or 10 s).
        while (g_next_sequence[0] + 1 < kMaxSequence && g_signal_errors == 0) {
            const auto now = Clock::now();
            if (now - start > std::chrono::seconds(10)) break;
            if (now - start > std::chrono::milliseconds(500) && g_nested >= 1000 &&
                every_producer_through())
                break;
            if (now - window > std::chrono::milliseconds(50)) {
                if (g_next_sequence[0] - window_pushes < 20 && slowdown < 1024) {
                    slowdown *= 2;
                    consumer.set_period(kConsumerNs * slowdown);
                    low.set_period(kLowNs * slowdown);
                    high.set_period(kHighNs * slowdown);
                }
                window = now;
                window_pushes = g_next_sequence[0];
            }
            const unsigned length = kMinRecord + g_next_sequence[0] % 9;
            while (rp_host_room() < length && Clock::now() - now < std::chrono::microseconds(30)) {
            }
            signal_push(0);
        }
        MESSAGE("the signals' periods multiplied by " << slowdown);
    }
    g_preempt = nullptr;
    for (const int signo : {SIGUSR1, SIGUSR2, SIGALRM}) {
        struct sigaction ignore {};
        ignore.sa_handler = SIG_IGN;
        sigaction(signo, &ignore, nullptr);
    }
    consume_all();

    const int errors = g_signal_errors;
    const unsigned long nested = g_nested;
    CHECK(errors == 0);
    CHECK(rp_host_quiescent());
    CHECK(rp_host_used() == 0);
    MESSAGE(nested << " pushes began inside another");
    CHECK(nested >= 100);
    std::uint64_t dropped = 0;
    for (unsigned p = 0; p < kSignalProducers; ++p) {
        CAPTURE(p);
        unsigned lost = 0, both = 0, received = 0, drops = 0;
        for (std::uint32_t s = 0; s < g_next_sequence[p]; ++s) {
            const std::uint8_t fate = g_fate[p][s];
            lost += fate == 0;
            both += fate == (kDropped | kReceived);
            received += fate == kReceived;
            drops += fate == kDropped;
        }
        MESSAGE("producer " << p << ": " << received << " received, " << drops << " dropped");
        CHECK(lost == 0);
        CHECK(both == 0);
        CHECK(received > 0);
        dropped += drops;
    }
    CHECK(dropped_count() == dropped);
}

}  // namespace
