#include "daemon/capture/gdb_link.h"

#include <boost/asio/post.hpp>

#include <array>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>

#include "probe/firmware_identity.h"
#include "probe/gdb_client.h"
#include "probe/stack_unwinder.h"
#include "protocol/framed_format.h"

namespace rackprof::daemon::capture {

namespace asio = boost::asio;

namespace {

using Clock = std::chrono::steady_clock;

// Samples are handed to capture in pieces of this many (or every 50 ms at low rates).
constexpr std::size_t kSamplesPerPiece = 64;
constexpr auto kPieceInterval = std::chrono::milliseconds(50);
// How long close() lets the sampler halt, detach and end before cutting the server off.
constexpr auto kDetachWait = std::chrono::milliseconds(500);
// Connecting is cut short as soon as the client exists (abort); the TCP connect alone is not.
constexpr auto kConnectTimeout = std::chrono::milliseconds(1000);

// What the URI and the board ask of the sampler.
struct SamplerSettings {
    std::uint64_t rate = 100;        // samples/s
    bool stacks = false;             // unwind each sample's stack (needs the ELF)
    std::size_t stack_bytes = 1024;  // stack memory read per sample
    bool verify = true;              // refuse a target whose build-id is not the ELF's
    std::filesystem::path elf;       // the board's firmware, may be empty
};

// GDB's register names for what one stack sample reads (ARM M-profile descriptions).
constexpr std::array<const char*, 16> kCoreRegisters = {"r0",  "r1", "r2", "r3", "r4",  "r5",
                                                        "r6",  "r7", "r8", "r9", "r10", "r11",
                                                        "r12", "sp", "lr", "pc"};

// One stack sample: the core registers ('g'), xPSR for the exception number, and the stack
// memory from sp up, unwound by the ELF's CFI.
class StackReader {
  public:
    StackReader(probe::GdbClient& gdb, const SamplerSettings& settings)
        : gdb_(gdb), unwinder_(settings.elf), stack_bytes_(settings.stack_bytes) {
        for (const char* name : kCoreRegisters) core_.push_back(number_of(name));
        xpsr_ = number_of("xpsr");
        stack_top_ = initial_stack_pointer();
    }

    protocol::StackSample sample() {
        const auto values = gdb_.read_registers(core_);
        probe::TargetStack stack;
        std::copy(values.begin(), values.end(), stack.registers.begin());
        stack.stack_address = stack.registers[13];
        stack.memory = read_stack(stack.stack_address);
        const auto unwound = unwinder_.unwind(stack, protocol::kMaxStackFrames);
        protocol::StackSample out;
        out.pc = static_cast<std::uint32_t>(stack.registers[15]);
        out.exception = static_cast<std::uint16_t>(gdb_.read_register(xpsr_) & 0x1FF);
        out.truncated = unwound.truncated;
        for (const auto f : unwound.functions)
            out.functions.push_back(static_cast<std::uint32_t>(f));
        return out;
    }

  private:
    unsigned number_of(const char* name) const {
        const auto* reg = gdb_.target().find(name);
        if (!reg)
            throw probe::ProbeError(std::string("stacks=1: the GDB server's target description "
                                                "has no register '") +
                                    name + "' (an ARM M-profile core is needed)");
        return reg->number;
    }

    // The main stack's top: the vector table's first word (VTOR, else address 0), so a read
    // near it stops there instead of failing past the end of RAM.
    std::uint64_t initial_stack_pointer() {
        try {
            const auto vtor = probe::little_endian_value(gdb_.read_memory(0xE000ED08, 4));
            const auto top = probe::little_endian_value(gdb_.read_memory(vtor.value_or(0), 4));
            return top.value_or(0);
        } catch (const probe::ProbeError&) {
            return 0;
        }
    }

    // stack_bytes from sp, fewer below the main stack's top; halved while the server refuses
    // (a process stack near the end of its memory), down to nothing: then lr alone names the
    // caller, and the stack is counted as cut short.
    std::string read_stack(std::uint64_t sp) {
        std::size_t n = stack_bytes_;
        if (sp < stack_top_ && stack_top_ - sp < n) n = static_cast<std::size_t>(stack_top_ - sp);
        for (; n >= 4; n /= 2) {
            try {
                return gdb_.read_memory(sp, n);
            } catch (const probe::ProbeTimeout&) {
                throw;
            } catch (const probe::ProbeError&) {
            }
        }
        return {};
    }

    probe::GdbClient& gdb_;
    probe::StackUnwinder unwinder_;
    std::size_t stack_bytes_;
    std::vector<unsigned> core_;
    unsigned xpsr_ = 0;
    std::uint64_t stack_top_ = 0;
};

class GdbLink : public Link {
  public:
    // The server at uri's host:port (gdb://) or on uri's serial port (gdb+serial://).
    GdbLink(asio::io_context& io, const config::LinkUri& uri, SamplerSettings settings)
        : io_(io),
          host_(uri.host),
          port_(uri.port),
          device_(uri.scheme == "gdb+serial" ? uri.path : ""),
          settings_(std::move(settings)),
          period_(std::chrono::nanoseconds(1'000'000'000 /
                                           std::max<std::uint64_t>(settings_.rate, 1))) {}
    ~GdbLink() override { close(); }

    void open(DataHandler on_data, ClosedHandler on_closed) override {
        close();
        alive_ = std::make_shared<bool>(true);
        stop_ = done_ = false;
        try {
            thread_ = std::thread(
                [this, on_data, on_closed, alive = alive_] { sample(on_data, on_closed, alive); });
        } catch (const std::system_error& e) {
            asio::post(io_, [on_closed, alive = alive_, what = std::string(e.what())] {
                if (*alive) on_closed(LinkClosed{"cannot start the GDB sampler: " + what, false});
            });
        }
    }

    // The sampler halts, detaches and ends; a server that does not let it within kDetachWait
    // is cut off (its client aborted), so capture's thread never waits long here.
    void close() override {
        if (!thread_.joinable()) return;
        *alive_ = false;  // capture's thread: what is posted and not yet run is dropped
        {
            std::unique_lock lock(mutex_);
            stop_ = true;
            wake_.notify_all();
            if (!wake_.wait_for(lock, kDetachWait, [this] { return done_; }) && connection_)
                connection_->abort();
        }
        thread_.join();
    }

  private:
    // The sampling thread: connect, then halt-read-resume until closed or the server fails.
    // Nothing escapes it: a failure ends the link with its reason, as a serial link's does.
    void sample(const DataHandler& on_data, const ClosedHandler& on_closed,
                const std::shared_ptr<bool>& alive) {
        std::string failure;
        try {
            run(on_data, alive);
        } catch (const std::exception& e) {
            failure = e.what();
            let_run_on();
        }
        std::lock_guard lock(mutex_);
        client_.reset();
        connection_.reset();
        done_ = true;
        wake_.notify_all();
        if (stop_) return;
        try {
            asio::post(io_, [on_closed, alive, failure] {
                if (*alive) on_closed(LinkClosed{failure, false});
            });
        } catch (const std::exception&) {  // out of memory: the board sees no data, as unplugged
        }
    }

    void run(const DataHandler& on_data, const std::shared_ptr<bool>& alive) {
        probe::GdbClientOptions options;
        options.connect_timeout = kConnectTimeout;
        // close() may cut the handshake short from here on (a server slow to describe itself).
        const auto connected = [this](probe::GdbClient& c) {
            std::lock_guard lock(mutex_);
            connection_ = c.abort_handle();
            if (stop_) c.abort();  // closed while connecting: the handshake fails at once
        };
        if (device_.empty()) {
            client_ = probe::GdbClient::connect(host_, port_, options, connected);
        } else {
            // A Black Magic Probe's GDB server: raw, exclusive, its rate left as it is (USB).
            client_ = probe::GdbClient::attach(open_serial_device(device_, 0), options, connected);
        }
        if (stop_requested()) return;
        probe::GdbClient& gdb = *client_;  // this thread's alone
        const auto pc = gdb.pc_register();
        if (!pc)
            throw probe::ProbeError("the GDB server's target description names no pc register");
        protocol::FramedEncoder encoder(4);
        gdb.halt();  // it may be running or halted: halted from here on
        auto stopped_at = Clock::now();
        encoder.hello(identify(gdb));
        std::unique_ptr<StackReader> stacks;
        if (settings_.stacks) stacks = std::make_unique<StackReader>(gdb, settings_);
        std::size_t pending = 0;
        Clock::duration halted{};
        auto piece_due = Clock::now() + kPieceInterval;
        auto next = Clock::now();
        while (true) {
            gdb.resume();
            halted += Clock::now() - stopped_at;
            next += period_;
            if (wait_until(next)) break;
            gdb.halt();
            stopped_at = Clock::now();
            if (stacks) {
                encoder.stack(stacks->sample());
            } else {
                encoder.record(protocol::Record::pc_sample(
                    static_cast<std::uint32_t>(gdb.read_register(*pc))));
            }
            (void)gdb.take_console();  // not a sample; kept bounded by the client meanwhile
            if (++pending >= kSamplesPerPiece || Clock::now() >= piece_due) {
                hand_on(encoder, halted, on_data, alive);
                pending = 0;
                piece_due = Clock::now() + kPieceInterval;
            }
            if (Clock::now() > next + 100 * period_) next = Clock::now();  // fell far behind
        }
        hand_on(encoder, halted, on_data, alive);
        gdb.halt();
        gdb.request("D");  // detach: the target runs on without us
    }

    // The HELLO this link writes for the target: version 4, 4-byte addresses, the build-id
    // read from the target's memory where the ELF's note says it is. A target whose note is
    // not the ELF's is refused (verify=0: warned about by the board, as a serial target's
    // HELLO is), with the evidence.
    protocol::TargetHello identify(probe::GdbClient& gdb) const {
        protocol::TargetHello hello;
        hello.version = protocol::kFramedVersionProbe;
        hello.addr_bytes = 4;
        hello.sample_hz = static_cast<std::uint32_t>(settings_.rate);
        if (settings_.elf.empty()) return hello;
        probe::IdentityCheck check;
        try {
            check = probe::check_identity(gdb, settings_.elf);
        } catch (const probe::ProbeError&) {
            throw;
        } catch (const std::runtime_error& e) {
            throw probe::ProbeError(std::string("the board's ELF: ") + e.what());
        }
        if (!check.note) return hello;  // an ELF without a note: nothing to compare
        if (!check.matches() && settings_.verify)
            throw probe::ProbeError(check.mismatch(settings_.elf.filename().string()) +
                                    " (flash that ELF, give the board the one it runs, or add "
                                    "verify=0)");
        const auto& id = check.found;
        if (const auto raw = id ? probe::hex_to_bytes(*id) : std::nullopt;
            raw && raw->size() <= protocol::kMaxBuildIdBytes)
            hello.build_id.assign(raw->begin(), raw->end());
        return hello;
    }

    // After a failure, best effort: a server still there lets the target run on, not halted.
    void let_run_on() {
        if (!client_) return;
        try {
            client_->resume();
        } catch (const std::exception&) {
        }
    }

    bool stop_requested() {
        std::lock_guard lock(mutex_);
        return stop_;
    }

    // Sleeps until `t`; true when the link is being closed.
    bool wait_until(Clock::time_point t) {
        std::unique_lock lock(mutex_);
        return wake_.wait_until(lock, t, [this] { return stop_; });
    }

    // The piece so far, closed by a HALTED item with the time held halted since the last one.
    void hand_on(protocol::FramedEncoder& encoder, Clock::duration& halted,
                 const DataHandler& on_data, const std::shared_ptr<bool>& alive) {
        encoder.halted(static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(halted).count()));
        halted = {};
        encoder.flush();
        auto bytes = std::make_shared<std::vector<std::uint8_t>>(encoder.take_wire());
        if (bytes->empty()) return;
        asio::post(io_, [on_data, alive, bytes] {
            if (*alive) on_data(*bytes);
        });
    }

    asio::io_context& io_;
    std::string host_;
    std::uint16_t port_;
    std::string device_;  // gdb+serial: the serial port; empty for TCP
    SamplerSettings settings_;
    Clock::duration period_;
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(false);
    std::thread thread_;
    std::mutex mutex_;
    std::condition_variable wake_;
    bool stop_ = false;
    bool done_ = false;                         // the sampling thread has finished (mutex_)
    std::unique_ptr<probe::GdbClient> client_;  // the sampling thread's alone
    // The client's connection, for close() to cut short (mutex_); harmless once it is gone.
    std::shared_ptr<probe::AbortHandle> connection_;
};

}  // namespace

std::unique_ptr<Link> make_gdb_link(asio::io_context& io, const config::LinkUri& uri,
                                    const std::filesystem::path& elf) {
    SamplerSettings settings;
    settings.rate = uri.number("rate", 100);
    settings.stacks = uri.number("stacks", 0) != 0;
    settings.stack_bytes = uri.number("stack_bytes", 1024);
    settings.verify = uri.number("verify", 1) != 0;
    settings.elf = elf;
    if (settings.stacks && elf.empty())
        throw std::invalid_argument("stacks=1 needs the board's firmware ELF");
    return std::make_unique<GdbLink>(io, uri, std::move(settings));
}

}  // namespace rackprof::daemon::capture
