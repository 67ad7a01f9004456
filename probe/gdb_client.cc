#include "probe/gdb_client.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace rackprof::probe {

namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kInterruptRetry = std::chrono::milliseconds(200);
constexpr std::size_t kConsoleKept = std::size_t{64} << 10;

int remaining_ms(Clock::time_point deadline) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return left > 0 ? static_cast<int>(left) : 0;
}

// A non-blocking connect, waited for until the deadline; -1 with `error` set on failure.
int connect_one(const addrinfo& a, Clock::time_point deadline, std::string& error) {
    const int fd =
        ::socket(a.ai_family, a.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a.ai_protocol);
    if (fd < 0) {
        error = std::strerror(errno);
        return -1;
    }
    if (::connect(fd, a.ai_addr, a.ai_addrlen) != 0 && errno != EINPROGRESS) {
        error = std::strerror(errno);
        ::close(fd);
        return -1;
    }
    pollfd p{fd, POLLOUT, 0};
    int soerr = 0;
    socklen_t len = sizeof soerr;
    if (::poll(&p, 1, remaining_ms(deadline)) != 1 ||
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0 || soerr != 0) {
        error = soerr ? std::strerror(soerr) : "timed out";
        ::close(fd);
        return -1;
    }
    // A request and its acknowledgement are small writes in a row: with Nagle's algorithm
    // the second waits for the server's delayed ACK (some 40 ms a request).
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

// "PacketSize=1000;QStartNoAckMode+;qXfer:features:read-" -> name -> value ("+", "-", or
// what follows '=').
std::map<std::string, std::string> parse_features(std::string_view reply) {
    std::map<std::string, std::string> out;
    for_each_field(reply, [&](std::string_view item) {
        if (const auto eq = item.find('='); eq != std::string_view::npos) {
            out[std::string(item.substr(0, eq))] = std::string(item.substr(eq + 1));
        } else if (item.back() == '+' || item.back() == '-' || item.back() == '?') {
            out[std::string(item.substr(0, item.size() - 1))] = std::string(1, item.back());
        } else {
            out[std::string(item)] = "+";
        }
        return true;
    });
    return out;
}

bool is_error_reply(std::string_view reply) {
    return reply.size() == 3 && reply[0] == 'E' && hex_to_bytes(reply.substr(1)).has_value();
}

// 'O' followed by hex: console output, not a reply ("OK" is one).
bool is_console_output(std::string_view payload) {
    return payload.size() > 1 && payload[0] == 'O' && hex_to_bytes(payload.substr(1)).has_value();
}

}  // namespace

std::unique_ptr<GdbClient> GdbClient::connect(const std::string& host, std::uint16_t port,
                                              GdbClientOptions options,
                                              const std::function<void(GdbClient&)>& connected) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const std::string where = host + ":" + std::to_string(port);
    if (const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found))
        throw ProbeError("gdb://" + where + ": " + ::gai_strerror(rc));
    const auto deadline = Clock::now() + options.connect_timeout;
    std::string error = "no address";
    int fd = -1;
    for (const addrinfo* a = found; a && fd < 0; a = a->ai_next)
        fd = connect_one(*a, deadline, error);
    ::freeaddrinfo(found);
    if (fd < 0) throw ProbeError("gdb://" + where + ": cannot connect: " + error);
    return attach(fd, options, connected);
}

std::unique_ptr<GdbClient> GdbClient::attach(int fd, GdbClientOptions options,
                                             const std::function<void(GdbClient&)>& connected) {
    std::unique_ptr<GdbClient> client(new GdbClient(fd, options));
    if (connected) connected(*client);
    client->handshake();
    return client;
}

GdbClient::GdbClient(int fd, GdbClientOptions options)
    : fd_(fd), options_(options), reader_(options.max_packet) {
    int type = 0;
    socklen_t len = sizeof type;
    socket_ = ::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0;
    abort_->fd_ = socket_ ? fd : -1;  // a socket is shut down too: a blocked send returns
}

GdbClient::~GdbClient() {
    {
        std::lock_guard lock(abort_->mutex_);
        abort_->fd_ = -1;  // the number may be reused once closed: never shut down after
    }
    ::close(fd_);
}

AbortHandle::AbortHandle() : wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    if (wake_ < 0) throw ProbeError(std::string("eventfd: ") + std::strerror(errno));
}

AbortHandle::~AbortHandle() {
    ::close(wake_);
}

void AbortHandle::abort() {
    std::lock_guard lock(mutex_);
    const std::uint64_t one = 1;
    (void)!::write(wake_, &one, sizeof one);
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

bool GdbClient::wait_for(short events, int timeout_ms) {
    while (true) {
        pollfd p[2] = {{fd_, events, 0}, {abort_->wake_, POLLIN, 0}};
        const int ready = ::poll(p, 2, timeout_ms);
        if (ready < 0 && errno == EINTR) continue;
        if (p[1].revents) throw ProbeError("the connection to the GDB server was cut short");
        return ready > 0;
    }
}

Clock::time_point GdbClient::deadline() const {
    return Clock::now() + options_.timeout;
}

// qSupported first (what the server does), then no-ack mode where offered, then vCont.
void GdbClient::handshake() {
    send_raw("+");  // a server may wait for the ack of a packet it sent before we came
    features_ = parse_features(
        request("qSupported:multiprocess-;swbreak+;hwbreak+;vContSupported+;no-resumed+"));
    if (features_.count("PacketSize")) {
        const auto size = std::strtoull(features_["PacketSize"].c_str(), nullptr, 16);
        if (size < 64) throw ProbeError("the server's qSupported names no usable PacketSize");
        packet_size_ = static_cast<std::size_t>(std::min<unsigned long long>(size, 1 << 16));
    }
    if (features_["QStartNoAckMode"] == "+" && request("QStartNoAckMode") == "OK") acks_ = false;
    if (features_["qXfer:features:read"] == "+") {
        try {
            target_ = parse_target_description(
                read_annex("target.xml"),
                [this](const std::string& name) { return read_annex(name); });
        } catch (const std::runtime_error& e) {
            throw ProbeError(std::string("the server's target description: ") + e.what());
        }
    }
    const std::string vcont = request("vCont?");
    vcont_continue_ = vcont.rfind("vCont", 0) == 0 && (vcont.find(";c") != std::string::npos);
    vcont_step_ = vcont.rfind("vCont", 0) == 0 && (vcont.find(";s") != std::string::npos);
}

std::string GdbClient::read_annex(const std::string& annex) {
    std::string text;
    // The reply holds at most PacketSize bytes, less its 'm'/'l' and framing.
    const std::size_t piece = packet_size_ - 8;
    while (true) {
        char range[48];
        std::snprintf(range, sizeof range, ":%zx,%zx", text.size(), piece);
        const std::string reply = request("qXfer:features:read:" + annex + range);
        if (reply.empty() || (reply[0] != 'm' && reply[0] != 'l'))
            throw ProbeError("reading " + annex + ": " +
                             (reply.empty() ? "not supported" : reply.substr(0, 40)));
        text.append(reply, 1);
        if (reply[0] == 'l') return text;
        if (reply.size() == 1 || text.size() > (1u << 20))
            throw ProbeError("reading " + annex + ": no end in sight");
    }
}

std::optional<unsigned> GdbClient::pc_register() const {
    if (const auto* pc = target_.find("pc")) return pc->number;
    return std::nullopt;
}

void GdbClient::send_raw(std::string_view bytes) {
    while (!bytes.empty()) {
        const ssize_t n = socket_ ? ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL)
                                  : ::write(fd_, bytes.data(), bytes.size());
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (!wait_for(POLLOUT, static_cast<int>(options_.timeout.count())))
                throw ProbeError("the GDB server stopped reading");
            continue;
        }
        if (n <= 0)
            throw ProbeError(std::string("sending to the GDB server: ") + std::strerror(errno));
        bytes.remove_prefix(static_cast<std::size_t>(n));
    }
}

// With acknowledgements on, a packet is sent again on '-' (three tries).
void GdbClient::send_packet(std::string_view payload) {
    const std::string framed = frame_packet(payload);
    for (int attempt = 0; attempt < 3; ++attempt) {
        send_raw(framed);
        if (!acks_) return;
        const auto by = deadline();
        while (true) {
            const RspItem item = receive_item(by);
            if (item.kind == RspItem::Kind::kAck) return;
            if (item.kind == RspItem::Kind::kNak) break;
            // A packet before our ack (a stop reply the server sent first): not ours.
        }
    }
    throw ProbeError("the GDB server refused a packet three times: " +
                     std::string(payload.substr(0, 40)));
}

RspItem GdbClient::receive_item(Clock::time_point by) {
    while (true) {
        if (auto item = reader_.next()) return *item;
        if (!wait_for(POLLIN, remaining_ms(by)))
            throw ProbeTimeout("the GDB server did not answer in time");
        char buffer[16384];
        const ssize_t n =
            socket_ ? ::recv(fd_, buffer, sizeof buffer, 0) : ::read(fd_, buffer, sizeof buffer);
        if (n == 0) throw ProbeError("the GDB server closed the connection");
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) continue;
            throw ProbeError(std::string("reading from the GDB server: ") + std::strerror(errno));
        }
        reader_.feed(std::string_view(buffer, static_cast<std::size_t>(n)));
    }
}

std::string GdbClient::receive_packet(Clock::time_point by) {
    for (int damaged = 0;;) {
        const RspItem item = receive_item(by);
        if (item.kind != RspItem::Kind::kPacket) continue;  // stray acks, notifications
        if (item.checksum_ok) {
            if (acks_) send_raw("+");
            return item.payload;
        }
        if (!acks_ || ++damaged == 3)
            throw ProbeError("the GDB server's replies arrive damaged (checksum)");
        send_raw("-");
    }
}

std::string GdbClient::request(std::string_view payload) {
    if (running_) throw ProbeError("a request while the target runs: halt it first");
    send_packet(payload);
    return receive_packet(deadline());
}

StopReply GdbClient::receive_stop(Clock::time_point by) {
    while (true) {
        const std::string payload = receive_packet(by);
        if (is_console_output(payload)) {
            console_ += *hex_to_bytes(payload.substr(1));
            if (console_.size() > kConsoleKept) {  // a chatty target costs bounded memory
                console_dropped_ += console_.size() - kConsoleKept;
                console_.erase(0, console_.size() - kConsoleKept);
            }
            continue;
        }
        if (auto stop = parse_stop_reply(payload)) return *stop;
        throw ProbeError("the GDB server answered '" + payload.substr(0, 40) +
                         "' where a stop reply belongs");
    }
}

StopReply GdbClient::stop_reason() {
    if (running_) throw ProbeError("the target runs: halt it first");
    send_packet("?");
    return receive_stop(deadline());
}

StopReply GdbClient::halt() {
    if (!running_) return stop_reason();
    running_ = false;
    const auto by = deadline();
    while (true) {
        send_raw(std::string_view("\x03", 1));
        try {
            return receive_stop(std::min(by, Clock::now() + kInterruptRetry));
        } catch (const ProbeTimeout&) {
            if (Clock::now() >= by) throw;
        }
    }
}

void GdbClient::resume() {
    if (running_) return;
    send_packet(vcont_continue_ ? "vCont;c" : "c");
    running_ = true;
}

std::string GdbClient::read_memory(std::uint64_t address, std::size_t length) {
    char text[48];
    std::snprintf(text, sizeof text, "m%llx,%zx", static_cast<unsigned long long>(address), length);
    const std::string reply = request(text);
    if (is_error_reply(reply) || reply.empty())
        throw ProbeError("reading " + std::to_string(length) + " bytes at " + text + ": " +
                         (reply.empty() ? "not supported" : reply));
    auto bytes = hex_to_bytes(reply);
    if (!bytes || bytes->size() > length)
        throw ProbeError("the GDB server's memory reply is not " + std::to_string(length) +
                         " bytes of hex");
    return *bytes;
}

void GdbClient::write_memory(std::uint64_t address, std::string_view bytes) {
    char head[48];
    std::snprintf(head, sizeof head, "M%llx,%zx:", static_cast<unsigned long long>(address),
                  bytes.size());
    const std::string reply = request(std::string(head) + bytes_to_hex(bytes));
    if (reply != "OK")
        throw ProbeError(std::string("writing memory (") + head +
                         ") : " + (reply.empty() ? "not supported" : reply));
}

void GdbClient::write_register(unsigned number, std::uint64_t value, std::size_t width) {
    std::string bytes;
    for (std::size_t i = 0; i < width; ++i) bytes += static_cast<char>((value >> (8 * i)) & 0xFF);
    char head[24];
    std::snprintf(head, sizeof head, "P%x=", number);
    const std::string reply = request(std::string(head) + bytes_to_hex(bytes));
    if (reply != "OK")
        throw ProbeError("writing register " + std::to_string(number) + ": " +
                         (reply.empty() ? "not supported" : reply));
}

namespace {
std::string breakpoint_packet(char op, int type, std::uint64_t address, int kind) {
    char text[48];
    std::snprintf(text, sizeof text, "%c%d,%llx,%x", op, type,
                  static_cast<unsigned long long>(address), kind);
    return text;
}
}  // namespace

void GdbClient::insert_breakpoint(std::uint64_t address, int kind) {
    std::string reply;
    for (int type : {0, 1}) {  // software first: hardware comparators are few
        reply = request(breakpoint_packet('Z', type, address, kind));
        if (reply == "OK") {
            breakpoints_[address] = type;
            return;
        }
    }
    char where[24];
    std::snprintf(where, sizeof where, "0x%llx", static_cast<unsigned long long>(address));
    throw ProbeError(std::string("the GDB server sets no breakpoint at ") + where + " (" +
                     (reply.empty() ? "not supported" : reply) + ")");
}

void GdbClient::remove_breakpoint(std::uint64_t address, int kind) {
    const auto it = breakpoints_.find(address);
    const int type = it == breakpoints_.end() ? 0 : it->second;
    const std::string reply = request(breakpoint_packet('z', type, address, kind));
    if (it != breakpoints_.end()) breakpoints_.erase(it);
    if (reply != "OK")
        throw ProbeError("removing the breakpoint: " + (reply.empty() ? "not supported" : reply));
}

std::string GdbClient::monitor(std::string_view command) {
    if (running_) throw ProbeError("a request while the target runs: halt it first");
    send_packet("qRcmd," + bytes_to_hex(command));
    std::string output;
    const auto by = deadline();
    while (true) {
        const std::string reply = receive_packet(by);
        if (is_console_output(reply)) {
            if (output.size() < kConsoleKept) output += *hex_to_bytes(reply.substr(1));
            continue;
        }
        if (reply == "OK") return output;
        if (reply.empty()) throw ProbeError("the GDB server has no monitor commands (qRcmd)");
        if (is_error_reply(reply))
            throw ProbeError("monitor " + std::string(command) + ": " + reply);
        if (auto bytes = hex_to_bytes(reply)) return output + *bytes;  // output as one reply
        throw ProbeError("monitor " + std::string(command) + ": '" + reply.substr(0, 40) + "'");
    }
}

StopReply GdbClient::step() {
    if (running_) throw ProbeError("a request while the target runs: halt it first");
    send_packet(vcont_step_ ? "vCont;s" : "s");
    return receive_stop(deadline());
}

StopReply GdbClient::run_until_stop(std::chrono::milliseconds within) {
    resume();
    StopReply stop = receive_stop(Clock::now() + within);
    running_ = false;
    return stop;
}

std::uint64_t GdbClient::read_register(unsigned number) {
    char text[16];
    std::snprintf(text, sizeof text, "p%x", number);
    std::string reply = request(text);
    if (reply.empty()) {
        // No 'p': the register's bytes inside the 'g' reply, where the description places them.
        const auto at = target_.g_offset(number);
        const TargetRegister* reg = nullptr;
        for (const auto& r : target_.registers)
            if (r.number == number) reg = &r;
        if (!at || !reg)
            throw ProbeError("reading register " + std::to_string(number) +
                             ": the server has no 'p' and no description placing it in 'g'");
        const std::string all = request("g");
        if (all.size() < 2 * (*at + reg->bits / 8))
            throw ProbeError("reading register " + std::to_string(number) + ": 'g' is too short");
        reply = all.substr(2 * *at, reg->bits / 4);
    }
    if (is_error_reply(reply))
        throw ProbeError("reading register " + std::to_string(number) + ": " + reply);
    const auto bytes = hex_to_bytes(reply);
    const auto value = bytes ? little_endian_value(*bytes) : std::nullopt;
    if (!value)
        throw ProbeError("the GDB server's register reply is not hex: " + reply.substr(0, 40));
    return *value;
}

std::string GdbClient::take_console() {
    std::string out;
    out.swap(console_);
    return out;
}

}  // namespace rackprof::probe

namespace rackprof::probe {

std::vector<std::uint64_t> GdbClient::read_registers(const std::vector<unsigned>& numbers) {
    std::vector<std::pair<std::size_t, std::size_t>> places;  // byte offset and size in 'g'
    for (const unsigned number : numbers) {
        const auto at = target_.g_offset(number);
        const TargetRegister* reg = nullptr;
        for (const auto& r : target_.registers)
            if (r.number == number) reg = &r;
        if (!at || !reg || reg->bits % 8 != 0) break;
        places.emplace_back(*at, reg->bits / 8);
    }
    std::vector<std::uint64_t> values;
    if (places.size() == numbers.size()) {
        const std::string all = request("g");
        const auto bytes = is_error_reply(all) ? std::nullopt : hex_to_bytes(all);
        for (const auto& [at, size] : places) {
            const auto value = bytes && bytes->size() >= at + size
                                   ? little_endian_value(bytes->substr(at, size))
                                   : std::nullopt;
            if (!value) break;
            values.push_back(*value);
        }
        if (values.size() == numbers.size()) return values;
        values.clear();
    }
    for (const unsigned number : numbers) values.push_back(read_register(number));
    return values;
}

}  // namespace rackprof::probe
