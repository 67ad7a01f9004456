// What the daemon benchmarks ask a running `rackprof serve` over loopback: the port it logged,
// and the time one GET takes to be answered in full.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/process.h"

namespace rackprof::bench {

// Whether a whole answer came: its body as long as Content-Length says, or, chunked, ending
// with the last chunk. A body cut short (a server deadline expiring mid-write did that once)
// must not be timed as an answer.
inline bool http_answer_whole(const std::string& head, std::size_t total, const std::string& tail) {
    const auto end_of_head = head.find("\r\n\r\n");
    if (end_of_head == std::string::npos) return false;
    std::string lower = head.substr(0, end_of_head);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const auto length = lower.find("\r\ncontent-length:");
    if (length != std::string::npos) {
        const std::size_t body = std::stoull(lower.substr(length + 17));
        return total == end_of_head + 4 + body;
    }
    return tail.size() >= 5 && tail.compare(tail.size() - 5, 5, "0\r\n\r\n") == 0;
}

// One GET over a fresh loopback connection, read to the end (Connection: close); seconds taken,
// or a negative number when the answer is not 200 or not whole. `bytes` receives its size,
// `answer` (if given) the whole answer, head included.
inline double http_get_seconds(int port, const std::string& path, std::size_t* bytes = nullptr,
                               std::string* answer = nullptr) {
    const auto t0 = std::chrono::steady_clock::now();
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
        ::close(fd);
        return -1;
    }
    const std::string request =
        "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (::write(fd, request.data(), request.size()) < 0) {
        ::close(fd);
        return -1;
    }
    std::string head, tail;  // the first 4 KiB (status line and headers), the last 8 bytes
    std::size_t total = 0;
    char buffer[65536];
    ssize_t n = 0;
    while ((n = ::read(fd, buffer, sizeof buffer)) > 0) {
        const auto got = static_cast<std::size_t>(n);
        total += got;
        if (head.size() < 4096) head.append(buffer, std::min<std::size_t>(got, 4096 - head.size()));
        if (answer) answer->append(buffer, got);
        tail.append(buffer, got);
        if (tail.size() > 8) tail.erase(0, tail.size() - 8);
    }
    ::close(fd);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (bytes) *bytes = total;
    if (head.rfind("HTTP/1.1 200", 0) != 0) return -1;
    return http_answer_whole(head, total, tail) ? s : -1;
}

// The body of a whole 200 answer to a GET (its chunks joined if it came chunked); nullopt for
// any other answer.
inline std::optional<std::string> http_get_body(int port, const std::string& path) {
    std::string answer;
    if (http_get_seconds(port, path, nullptr, &answer) < 0) return std::nullopt;
    const auto end_of_head = answer.find("\r\n\r\n");
    std::string head = answer.substr(0, end_of_head);
    for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string body = answer.substr(end_of_head + 4);
    if (head.find("\r\ntransfer-encoding: chunked") == std::string::npos) return body;
    std::string joined;
    for (std::size_t at = 0;;) {
        const auto line_end = body.find("\r\n", at);
        if (line_end == std::string::npos) return std::nullopt;
        const std::size_t size = std::stoull(body.substr(at, line_end - at), nullptr, 16);
        if (size == 0) return joined;
        joined.append(body, line_end + 2, size);
        at = line_end + 2 + size + 2;
    }
}

// Latency of `n` requests in milliseconds, sorted (empty: a request failed).
inline std::vector<double> latencies_ms(int port, const std::string& path, int n) {
    std::vector<double> times;
    for (int i = 0; i < n; ++i) {
        const double s = http_get_seconds(port, path);
        if (s < 0) return {};
        times.push_back(s * 1e3);
    }
    std::sort(times.begin(), times.end());
    return times;
}

// The port `rackprof serve` logged it listens on; 0 until it did.
inline int listening_port(const std::filesystem::path& log) {
    const std::string text = testing::read_text(log);
    const std::string marker = "HTTP API listening on 127.0.0.1:";
    const auto at = text.find(marker);
    return at == std::string::npos ? 0 : std::atoi(text.c_str() + at + marker.size());
}

}  // namespace rackprof::bench
