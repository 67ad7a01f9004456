// A client of a GDB server: OpenOCD, pyOCD, the J-Link GDB Server, probe-rs, a Black Magic
// Probe, QEMU's gdbstub. It connects, learns what the server supports (qSupported, vCont?)
// rather than assuming it, turns acknowledgements off where the server offers
// (QStartNoAckMode), and sends one request at a time with a deadline on every reply.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "probe/gdb_packet.h"
#include "probe/stop_reply.h"
#include "probe/target_description.h"

namespace rackprof::probe {

// A server that cannot be reached, answers too late, or answers what no server should.
class ProbeError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

// No reply by the deadline.
class ProbeTimeout : public ProbeError {
  public:
    using ProbeError::ProbeError;
};

// Cuts a client's connection short from another thread, and does nothing once the client is
// gone: a thread that keeps it may call abort() whenever, with no race on the client's life.
// The client waits on its connection and on this handle's eventfd, so a serial port (which has
// no shutdown) is cut short as a socket is.
class AbortHandle {
  public:
    AbortHandle();
    ~AbortHandle();
    AbortHandle(const AbortHandle&) = delete;
    AbortHandle& operator=(const AbortHandle&) = delete;
    void abort();

  private:
    friend class GdbClient;
    std::mutex mutex_;
    int fd_ = -1;    // -1 once the client has closed it
    int wake_ = -1;  // an eventfd, readable once aborted
};

struct GdbClientOptions {
    std::chrono::milliseconds timeout{3000};          // per reply
    std::chrono::milliseconds connect_timeout{3000};  // for the TCP connection
    std::size_t max_packet = std::size_t{1} << 20;    // larger replies are refused, not held
};

class GdbClient {
  public:
    // Connects to host:port and handshakes; throws ProbeError. `connected`, when given, sees
    // the client before the handshake (so another thread may abort() a slow one).
    static std::unique_ptr<GdbClient> connect(
        const std::string& host, std::uint16_t port, GdbClientOptions options = {},
        const std::function<void(GdbClient&)>& connected = nullptr);
    // The same over a descriptor already open on a server (a Black Magic Probe's serial port,
    // opened raw by its owner); the client owns it from here on, and closes it.
    static std::unique_ptr<GdbClient> attach(
        int fd, GdbClientOptions options = {},
        const std::function<void(GdbClient&)>& connected = nullptr);
    ~GdbClient();
    GdbClient(const GdbClient&) = delete;
    GdbClient& operator=(const GdbClient&) = delete;

    // What the server offered in its qSupported reply: "PacketSize" -> "1000",
    // "QStartNoAckMode" -> "+", ...
    const std::map<std::string, std::string>& features() const { return features_; }
    bool acknowledging() const { return acks_; }
    // The server's target description (qXfer:features:read), empty where it offers none.
    const TargetDescription& target() const { return target_; }
    // GDB's number for the program counter: the description's "pc", else nothing.
    std::optional<unsigned> pc_register() const;
    bool has_vcont_continue() const { return vcont_continue_; }

    // One request and its reply (empty: the server does not know the request). Throws
    // ProbeError past the deadline or after a reply damaged three times.
    std::string request(std::string_view payload);
    // Why the target is stopped ('?').
    StopReply stop_reason();
    // Stops a running target (the interrupt byte, sent again every 200 ms until a stop reply
    // comes: QEMU 7.2 drops one that arrives before it has processed the resume) and returns
    // its stop reply.
    StopReply halt();
    // Lets the target run ('vCont;c' where offered, else 'c'); its reply comes at the next
    // stop, which halt() reads.
    void resume();
    // `length` bytes at `address` ('m'); throws ProbeError for an error reply.
    std::string read_memory(std::uint64_t address, std::size_t length);
    // Writes `bytes` at `address` ('M'); throws ProbeError for an error reply.
    void write_memory(std::uint64_t address, std::string_view bytes);
    // Writes a register by GDB's number ('P', little-endian, `width` bytes); throws ProbeError
    // where the server refuses it.
    void write_register(unsigned number, std::uint64_t value, std::size_t width = 4);
    // A breakpoint at `address` of `kind` (ARM: 2 for Thumb): a software one ('Z0'), else a
    // hardware one ('Z1') where the server has no software breakpoints there. Throws
    // ProbeError when the server sets neither.
    void insert_breakpoint(std::uint64_t address, int kind);
    void remove_breakpoint(std::uint64_t address, int kind);
    // A command for the server itself ('qRcmd', GDB's `monitor`): its console output.
    std::string monitor(std::string_view command);
    // Lets the target run and waits up to `within` for it to stop by itself (a breakpoint, an
    // exit); ProbeTimeout past that, the target still running (halt() stops it).
    StopReply run_until_stop(std::chrono::milliseconds within);
    // Executes one instruction ('vCont;s' where offered, else 's') and returns the stop reply.
    StopReply step();
    // A register by GDB's number for the target ('p'; ARM: 15 is pc, RISC-V: 32), read as
    // little-endian; from a 'g' reply where the server has no 'p'.
    std::uint64_t read_register(unsigned number);
    // Several registers by GDB's numbers: one 'g' where the description places them all in
    // it, else a 'p' each.
    std::vector<std::uint64_t> read_registers(const std::vector<unsigned>& numbers);

    // From another thread: a call waiting on the server fails at once with ProbeError, and so
    // does every later one (the connection is shut down).
    void abort() { abort_->abort(); }
    std::shared_ptr<AbortHandle> abort_handle() const { return abort_; }
    // Console output the target sent ('O' packets) while running, oldest first; taken. Only
    // the newest 64 KiB are kept between takes; console_dropped() counts the rest.
    std::string take_console();
    std::uint64_t console_dropped() const { return console_dropped_; }
    std::uint64_t bytes_discarded() const { return reader_.bytes_discarded(); }

  private:
    GdbClient(int fd, GdbClientOptions options);
    void handshake();
    // Waits for `events` on the connection until `timeout_ms`; false on timeout. Throws
    // ProbeError once aborted.
    bool wait_for(short events, int timeout_ms);
    // A qXfer:features:read annex, read whole in PacketSize pieces (at most 1 MiB).
    std::string read_annex(const std::string& annex);
    void send_raw(std::string_view bytes);
    void send_packet(std::string_view payload);
    // The next packet's payload (acks handled here), by the deadline.
    std::string receive_packet(std::chrono::steady_clock::time_point deadline);
    RspItem receive_item(std::chrono::steady_clock::time_point deadline);
    // The next stop reply, console output kept aside.
    StopReply receive_stop(std::chrono::steady_clock::time_point deadline);
    std::chrono::steady_clock::time_point deadline() const;

    int fd_;
    bool socket_ = false;  // send()/recv() with MSG_NOSIGNAL; else write()/read()
    std::shared_ptr<AbortHandle> abort_ = std::make_shared<AbortHandle>();
    GdbClientOptions options_;
    RspReader reader_;
    bool acks_ = true;
    bool vcont_continue_ = false;
    bool vcont_step_ = false;
    bool running_ = false;
    std::map<std::string, std::string> features_;
    TargetDescription target_;
    std::size_t packet_size_ = 0x400;
    std::map<std::uint64_t, int> breakpoints_;  // address -> 'Z' type that set it
    std::string console_;                       // at most 64 KiB, the newest
    std::uint64_t console_dropped_ = 0;
};

}  // namespace rackprof::probe
