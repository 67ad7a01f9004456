#include "daemon/sim/pty_rack.h"

#include "daemon/sim/pty_board.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <thread>

namespace rackprof::daemon::sim {
namespace {

std::vector<std::uint8_t> single_board_bytes(const SimulatorOptions& options) {
    std::vector<std::uint8_t> bytes;
    simulate_board(options, [&](const std::uint8_t* data, std::size_t size) {
        bytes.insert(bytes.end(), data, data + size);
    });
    return bytes;
}

// Reads every device until the feeder finished and each one carried `sizes[i]` bytes (or
// 20 s passed): what each one carried.
std::vector<std::vector<std::uint8_t>> read_all(const std::vector<std::filesystem::path>& devices,
                                                const std::vector<std::size_t>& sizes,
                                                const std::atomic<bool>& finished) {
    std::vector<pollfd> fds;
    for (const auto& d : devices) {
        const int fd = ::open(d.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        REQUIRE(fd >= 0);
        fds.push_back({fd, POLLIN, 0});
    }
    std::vector<std::vector<std::uint8_t>> got(devices.size());
    const auto complete = [&] {
        for (std::size_t i = 0; i < got.size(); ++i) {
            if (got[i].size() < sizes[i]) return false;
        }
        return true;
    };
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    std::uint8_t buffer[4096];
    while (!(finished && complete()) && std::chrono::steady_clock::now() < deadline) {
        ::poll(fds.data(), fds.size(), 20);
        for (std::size_t i = 0; i < fds.size(); ++i) {
            ssize_t n = 0;
            while ((n = ::read(fds[i].fd, buffer, sizeof buffer)) > 0)
                got[i].insert(got[i].end(), buffer, buffer + n);
        }
    }
    for (const auto& p : fds) ::close(p.fd);
    return got;
}

TEST_CASE("a pty rack sends each board exactly the bytes the single-board simulator sends") {
    std::vector<SimulatorOptions> boards(4);
    const char* models[] = {"blinky", "deterministic", "conflation", "blinky"};
    for (std::size_t i = 0; i < boards.size(); ++i) {
        boards[i].model = models[i];
        boards[i].seed = 1 + i;
        boards[i].max_iterations = 0;
        boards[i].max_bytes = 20000 + 3000 * i;
    }
    // One framed board with caches and frame loss: the HELLO, ARC_N and STOP paths too.
    boards[3].protocol = WireProtocol::kFramed;
    boards[3].arc_cache = 32;
    boards[3].pc_cache = 32;
    boards[3].faults.frame_drop = 0.01;

    PtyRackOptions options;
    options.boards = boards;
    options.rate = 100000;
    PtyRack rack(options);
    REQUIRE(rack.size() == 4);
    std::vector<std::filesystem::path> devices;
    for (std::size_t i = 0; i < rack.size(); ++i) devices.push_back(rack.device(i));

    std::vector<std::vector<std::uint8_t>> expected;
    std::vector<std::size_t> sizes;
    for (const auto& b : boards) {
        expected.push_back(single_board_bytes(b));
        sizes.push_back(expected.back().size());
    }

    std::atomic<bool> finished{false};
    PtyRackStats stats;
    std::thread feeder([&] {
        stats = rack.run();
        finished = true;
    });
    const auto got = read_all(devices, sizes, finished);
    feeder.join();

    std::uint64_t total = 0;
    for (std::size_t i = 0; i < boards.size(); ++i) {
        CAPTURE(i);
        CHECK(got[i] == expected[i]);
        CHECK(rack.truth(i).wire_bytes == expected[i].size());
        total += expected[i].size();
    }
    CHECK(stats.bytes_sent == total);
    // Paced: the largest board's bytes take at least their time on a 100 kB/s wire.
    CHECK(stats.seconds >= 0.9 * 29000 / 100000.0);
}

TEST_CASE("a pty rack's symlinks name the boards' ptys and vanish with the rack") {
    const auto dir =
        std::filesystem::temp_directory_path() / ("pty-rack-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    {
        PtyRackOptions options;
        options.boards.resize(2);
        options.links = {dir / "b0", dir / "b1"};
        PtyRack rack(options);
        CHECK(rack.device(1) == dir / "b1");
        CHECK(std::filesystem::read_symlink(dir / "b0").string().rfind("/dev/pts/", 0) == 0);
    }
    CHECK_FALSE(std::filesystem::exists(dir / "b0"));
    std::filesystem::remove_all(dir);
}

// A sim:// board runs in real time: its PC samples leave no faster than the rate the profile
// assumes (1000 Hz), however fast its wire, so a capture's sampled seconds are the seconds it
// took; without sample_hz only the byte rate paces it (a test feeder).
TEST_CASE("a simulated board in real time sends its samples at its sampling rate") {
    for (const std::uint32_t hz : {1000u, 0u}) {
        CAPTURE(hz);
        PtyBoardOptions o;
        o.simulator.model = "deterministic";
        o.simulator.max_iterations = 7;  // 7 x 148 samples: 1.036 s at 1000 Hz
        o.simulator.piece_bytes = 64;
        o.rate = 1'000'000;  // a wire that would carry all of it in a few milliseconds
        o.sample_hz = hz;
        const std::size_t size = single_board_bytes(o.simulator).size();
        PtyBoard board(o);
        const int fd = ::open(board.device().c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        REQUIRE(fd >= 0);
        const auto start = std::chrono::steady_clock::now();
        board.start();
        std::size_t got = 0;
        std::uint8_t buffer[4096];
        while (got < size && std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
            pollfd p{fd, POLLIN, 0};
            ::poll(&p, 1, 20);
            ssize_t n = 0;
            while ((n = ::read(fd, buffer, sizeof buffer)) > 0) got += static_cast<std::size_t>(n);
        }
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const GroundTruth truth = board.wait();
        ::close(fd);
        REQUIRE(got == size);
        REQUIRE(truth.aggregate.total_samples() == 7 * 148);
        if (hz) {
            CHECK(seconds >= 0.95 * 7 * 148 / 1000.0);
        } else {
            CHECK(seconds < 0.5);
        }
    }
}

}  // namespace
}  // namespace rackprof::daemon::sim
