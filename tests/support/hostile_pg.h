// A PostgreSQL server that is not one: it speaks the startup and query messages of the
// frontend/backend protocol v3 on a loopback port, then answers every query the way its mode
// says, so tests can put the fleet client against a hostile or broken server without a real
// PostgreSQL. Each connection is served by its own thread; the destructor closes them all.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace rackprof::testing {

class HostilePg {
  public:
    enum class Mode {
        kEndless,    // rows, 8 KiB each, without end
        kMalformed,  // one row: "12abc" and control characters, where integers belong
        kUneven,     // two rows, one and two columns wide
        kErrors,     // an error whose text holds ESC, CR and LF and a forged log line
        kSilent,     // never answers a query
    };
    explicit HostilePg(Mode mode);
    ~HostilePg();
    HostilePg(const HostilePg&) = delete;
    HostilePg& operator=(const HostilePg&) = delete;

    // postgresql://rackprof@127.0.0.1:PORT/rackprof?sslmode=disable
    std::string url() const;
    int queries() const { return queries_; }  // queries received, over all connections

  private:
    void accept_loop();
    void serve(int fd);
    void answer(int fd);  // one query's reply, as the mode says

    Mode mode_;
    int listener_ = -1;
    int port_ = 0;
    std::atomic<bool> stopping_{false};
    std::atomic<int> queries_{0};
    std::thread acceptor_;
    std::mutex mutex_;
    std::vector<int> clients_;
    std::vector<std::thread> threads_;
};

}  // namespace rackprof::testing
