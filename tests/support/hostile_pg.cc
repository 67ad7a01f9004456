#include "tests/support/hostile_pg.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <stdexcept>

namespace rackprof::testing {

namespace {

// A backend message: type, a length counting itself, the body.
std::string message(char type, const std::string& body) {
    const std::uint32_t length = htonl(static_cast<std::uint32_t>(body.size() + 4));
    std::string out(1, type);
    out.append(reinterpret_cast<const char*>(&length), 4);
    return out + body;
}

std::string int16(std::uint16_t v) {
    v = htons(v);
    return std::string(reinterpret_cast<const char*>(&v), 2);
}

std::string int32(std::uint32_t v) {
    v = htonl(v);
    return std::string(reinterpret_cast<const char*>(&v), 4);
}

// A RowDescription of `columns` text columns.
std::string row_description(int columns) {
    std::string body = int16(static_cast<std::uint16_t>(columns));
    for (int i = 0; i < columns; ++i) {
        body += "c" + std::to_string(i) + '\0';
        body += int32(0) + int16(0) + int32(25) + int16(0xffff) + int32(0xffffffff) + int16(0);
    }
    return message('T', body);
}

std::string data_row(const std::vector<std::string>& cells) {
    std::string body = int16(static_cast<std::uint16_t>(cells.size()));
    for (const auto& c : cells) body += int32(static_cast<std::uint32_t>(c.size())) + c;
    return message('D', body);
}

std::string ready() {
    return message('Z', "I");
}

bool send_all(int fd, const std::string& bytes) {
    std::size_t sent = 0;
    while (sent < bytes.size()) {
        const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) return false;
        sent += static_cast<std::size_t>(n);
    }
    return true;
}

bool read_exact(int fd, char* out, std::size_t n) {
    std::size_t got = 0;
    while (got < n) {
        const ssize_t r = ::recv(fd, out + got, n - got, 0);
        if (r <= 0) return false;
        got += static_cast<std::size_t>(r);
    }
    return true;
}

std::uint32_t read_int32(int fd) {
    std::uint32_t v = 0;
    if (!read_exact(fd, reinterpret_cast<char*>(&v), 4)) return 0;
    return ntohl(v);
}

// The startup: SSL and GSS encryption declined, any credentials accepted.
bool start_up(int fd) {
    while (true) {
        const std::uint32_t length = read_int32(fd);
        if (length < 8 || length > 10000) return false;
        const std::uint32_t code = read_int32(fd);
        std::string rest(length - 8, '\0');
        if (!read_exact(fd, rest.data(), rest.size())) return false;
        if (code == 80877103 || code == 80877104) {  // SSLRequest, GSSENCRequest
            if (!send_all(fd, "N")) return false;
            continue;
        }
        if (code != 196608) return false;  // protocol 3.0
        std::string out = message('R', int32(0));
        for (const auto& [k, v] : {std::pair<std::string, std::string>{"server_version", "15.0"},
                                   {"client_encoding", "UTF8"},
                                   {"standard_conforming_strings", "on"},
                                   {"integer_datetimes", "on"},
                                   {"DateStyle", "ISO, MDY"}})
            out += message('S', k + '\0' + v + '\0');
        return send_all(fd, out + message('K', int32(4242) + int32(1)) + ready());
    }
}

}  // namespace

HostilePg::HostilePg(Mode mode) : mode_(mode) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof address;
    if (listener_ < 0 || ::bind(listener_, reinterpret_cast<sockaddr*>(&address), size) != 0 ||
        ::listen(listener_, 16) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &size) != 0)
        throw std::runtime_error("hostile PostgreSQL: cannot listen on loopback");
    port_ = ntohs(address.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
}

HostilePg::~HostilePg() {
    stopping_ = true;
    acceptor_.join();
    {
        const std::lock_guard lock(mutex_);
        for (int fd : clients_) ::shutdown(fd, SHUT_RDWR);
    }
    for (auto& t : threads_) t.join();
    for (int fd : clients_) ::close(fd);
    ::close(listener_);
}

std::string HostilePg::url() const {
    return "postgresql://rackprof@127.0.0.1:" + std::to_string(port_) + "/rackprof?sslmode=disable";
}

void HostilePg::accept_loop() {
    while (!stopping_) {
        pollfd p{listener_, POLLIN, 0};
        if (::poll(&p, 1, 50) <= 0) continue;
        const int fd = ::accept(listener_, nullptr, nullptr);
        if (fd < 0) continue;
        const std::lock_guard lock(mutex_);
        clients_.push_back(fd);
        threads_.emplace_back([this, fd] { serve(fd); });
    }
}

// Frontend messages until Terminate or a closed socket; a reply for each simple Query ('Q')
// and each Sync ('S') that ends an extended query (Parse, Bind, Describe, Execute).
void HostilePg::serve(int fd) {
    if (!start_up(fd)) return;
    bool parsed = false;
    while (!stopping_) {
        char type = 0;
        if (!read_exact(fd, &type, 1)) return;
        const std::uint32_t length = read_int32(fd);
        if (length < 4 || length > (64u << 20)) return;
        std::string body(length - 4, '\0');
        if (!read_exact(fd, body.data(), body.size())) return;
        if (type == 'X') return;
        if (type == 'P') parsed = true;
        if (type != 'Q' && type != 'S') continue;
        ++queries_;
        if (parsed && !send_all(fd, message('1', "") + message('2', ""))) return;
        parsed = false;
        answer(fd);
    }
}

void HostilePg::answer(int fd) {
    switch (mode_) {
        case Mode::kEndless: {
            const std::string row = data_row({std::string(8192, '7')});
            if (!send_all(fd, row_description(1))) return;
            while (!stopping_ && send_all(fd, row)) {
            }
            return;
        }
        case Mode::kMalformed:
            send_all(fd, row_description(1) + data_row({"12abc\x1b[2J\r\nfleet: pushed 9999"}) +
                             message('C', std::string("SELECT 1") + '\0') + ready());
            return;
        case Mode::kUneven:
            send_all(fd, row_description(1) + data_row({"1"}) + data_row({"1", "2"}) +
                             message('C', std::string("SELECT 2") + '\0') + ready());
            return;
        case Mode::kErrors: {
            std::string fields;
            fields += std::string("SERROR") + '\0';
            fields += std::string("VERROR") + '\0';
            fields += std::string("CXX000") + '\0';
            fields += std::string("Mforged\x1b[2J\r\n[info] fleet: pushed 9999 sessions") + '\0';
            send_all(fd, message('E', fields + '\0') + ready());
            return;
        }
        case Mode::kSilent:
            return;
    }
}

}  // namespace rackprof::testing
