// The daemon's peak memory while it takes large uploads, which must go through files and streams,
// never whole into memory. Built and run only without the sanitizers: ASan keeps freed memory in
// quarantine and shadows the rest, so a peak measured under it says nothing about the daemon.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <iostream>

#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "gmon/gmon_data.h"
#include "gmon/gmon_writer.h"
#include "gmon/symbolizer.h"
#include "gmon/synthetic_elf.h"
#include "tests/integration/api_daemon.h"
#include "tests/integration/sim_rack.h"
#include "tests/integration/test_support.h"

namespace rackprof {
namespace {

using nlohmann::json;
using testing::ApiDaemon;
using testing::peak_growth;
using testing::Rack;

TEST_CASE("unplug and replug 20 times: the daemon's resident memory stays within 5 %") {
    Rack rack({testing::unplugging_board("flaky")});
    rack.start_connected("flaky");
    const long rss_before = rack.daemon().rss_kib();
    rack.wait_boards_settled();
    CHECK(rack.truth("flaky")["unplugs"] == 20);
    const long rss_after = rack.daemon().rss_kib();
    std::cout << "FIGURE unplug_loop.rss_kib = " << rss_before << " -> " << rss_after
              << " KiB over 20 unplugs\n";
    // Twenty reconnects hold nothing: growth within 5 % (and the allocator's 1 MiB of slack).
    CHECK(rss_after <= rss_before + rss_before / 20 + 1024);
    rack.stop_daemon();
}

// A 40 MiB capture of the deterministic model in the daemon's folder.
std::filesystem::path simulated_40mb(const ApiDaemon& d) {
    const auto capture = d.dir() / "big.bin";
    REQUIRE(testing::rackprof(
                {"simulate", "--model", "deterministic", "--bytes", "40M", "-o", capture.string()})
                .exit_code == 0);
    return capture;
}

TEST_CASE("a 40 MiB import goes through a file: the daemon's peak memory grows by < 16 MiB") {
    ApiDaemon d;
    const auto capture = simulated_40mb(d);
    std::pair<int, std::string> imported;
    const auto grown = peak_growth(d.pid(), [&] {
        imported = d.upload_chunked("POST", "/api/v1/sessions/import?format=bin", capture);
    });
    std::cout << "FIGURE uploads.import_40mib_peak_growth = +" << grown / 1024
              << " kB of peak memory (VmHWM)\n";
    CHECK(grown < (16u << 20));
    REQUIRE(imported.first == 201);
    const auto session = json::parse(imported.second);
    CHECK(session["counters"]["bytes_in"] == std::filesystem::file_size(capture));
    // The raw bytes come back exactly as sent.
    const auto raw = d.call(
        "GET", "/api/v1/sessions/" + std::to_string(session["id"].get<std::int64_t>()) + "/raw");
    CHECK(raw.second == testing::read_text(capture));
    // No upload file is left behind.
    for (const auto& entry : std::filesystem::recursive_directory_iterator(d.dir().path()))
        CHECK(entry.path().filename().string().find("upload") == std::string::npos);
}

// A GNU gmon.out (little-endian, 32-bit) laid out as rackprof writes one: one histogram of
// `bins` 2-byte bins from `low_pc`, every 128th bin counted, then a few arcs; returns its
// samples.
std::uint64_t write_sparse_gmon(const std::filesystem::path& path, std::uint32_t low_pc,
                                std::uint32_t bins) {
    std::ofstream out(path, std::ios::binary);
    auto put = [&](std::uint64_t value, int size) {
        // Fields wider than 8 bytes (the 12 reserved ones) are zero past the value's 8.
        for (int i = 0; i < size; ++i) out.put(i < 8 ? static_cast<char>(value >> (8 * i)) : '\0');
    };
    out.write("gmon", 4);
    put(1, 4);
    put(0, 12);
    out.put(0);  // a histogram
    put(low_pc, 4);
    put(low_pc + 2ull * bins, 4);
    put(bins, 4);
    put(1000, 4);
    const char dimension[15] = "seconds";
    out.write(dimension, sizeof dimension);
    out.put('s');
    std::uint64_t samples = 0;
    std::vector<std::uint8_t> piece;
    for (std::uint32_t i = 0; i < bins; ++i) {
        const std::uint16_t bin =
            i % 128 == 0 ? static_cast<std::uint16_t>(i / 128 % 65535 + 1) : 0;
        samples += bin;
        piece.push_back(static_cast<std::uint8_t>(bin));
        piece.push_back(static_cast<std::uint8_t>(bin >> 8));
        if (piece.size() >= (1u << 20) || i + 1 == bins) {
            out.write(reinterpret_cast<const char*>(piece.data()),
                      static_cast<std::streamsize>(piece.size()));
            piece.clear();
        }
    }
    for (std::uint32_t a = 0; a < 64; ++a) {  // sorted by (from, self), as rackprof writes them
        out.put(1);
        put(low_pc + 0x100 + 8 * a, 4);
        put(low_pc + 0x40 + 4 * (a % 8), 4);
        put(1000 + a, 4);
    }
    return samples;
}

TEST_CASE(
    "a 63 MiB gmon.out import streams: the daemon's peak memory grows by < 48 MiB; its gmon.out "
    "comes back byte for byte") {
    ApiDaemon d;
    const auto gmon = d.dir() / "big.gmon";
    const std::uint32_t bins = 63u << 19;  // 63 MiB of 2-byte bins: under the 64 MiB upload limit
    const std::uint64_t samples = write_sparse_gmon(gmon, 0x08000000, bins);
    REQUIRE(std::filesystem::file_size(gmon) < (64u << 20));
    std::pair<int, std::string> imported;
    const auto grown = peak_growth(d.pid(), [&] {
        imported = d.upload_chunked("POST", "/api/v1/sessions/import?format=gmon&board=big", gmon);
    });
    std::cout << "FIGURE uploads.gmon_63mib_peak_growth = +" << grown / 1024
              << " kB of peak memory (VmHWM)\n";
    CHECK(grown < (48u << 20));
    REQUIRE(imported.first == 201);
    const auto session = json::parse(imported.second);
    CHECK(session["counters"]["pc_samples"] == samples);
    CHECK(session["counters"]["bytes_in"] == std::filesystem::file_size(gmon));
    const auto id = std::to_string(session["id"].get<std::int64_t>());
    // Its histogram's shape and every count come back: the same bytes.
    const auto back = d.call("GET", "/api/v1/sessions/" + id + "/gmon.out");
    REQUIRE(back.first == 200);
    CHECK(back.second == testing::read_text(gmon));
    for (const auto& entry : std::filesystem::recursive_directory_iterator(d.dir().path()))
        CHECK(entry.path().filename().string().find(".upload") == std::string::npos);
}

// A stalled client on a stalled socket (a tiny receive buffer), asking for `path`.
int stalled_reader(const ApiDaemon& d, const std::string& path) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    const int small = 4096;
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<std::uint16_t>(d.port()));
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) == 0);
    const std::string request = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    REQUIRE(::write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size()));
    return fd;
}

// A firmware of 2000 functions and a gmon.out of `arcs` distinct arcs among random pairs of
// them, imported: the session's id and how many function pairs call (a gprof call graph line
// each, as a parent and as a child). Its whole call graph is some 190 bytes of JSON a line.
std::pair<std::string, std::size_t> import_large_call_graph(ApiDaemon& d, std::size_t arcs) {
    std::vector<gmon::SyntheticFunction> functions;
    std::uint32_t addr = 0x1000;
    for (int i = 0; i < 2000; ++i) {
        const std::uint32_t size = 2 * (16 + static_cast<std::uint32_t>(i * 7919 % 200));
        functions.push_back({"function_" + std::to_string(i), addr, size});
        addr += size;
    }
    const auto elf_path = d.dir() / "large.elf";
    gmon::write_synthetic_elf(elf_path, functions, 0x1000, addr);
    gmon::Aggregate counts;
    std::set<std::pair<std::size_t, std::size_t>> pairs;
    std::mt19937_64 rng(7);
    while (counts.distinct_arcs() < arcs) {
        const std::size_t from = rng() % functions.size(), to = rng() % functions.size();
        const auto& f = functions[from];
        counts.add_arc((f.addr + 2 * static_cast<std::uint32_t>(rng() % (f.size / 2))) | 1,
                       functions[to].addr | 1, 1 + rng() % 1000);
        pairs.emplace(from, to);
    }
    for (std::uint32_t pc = 0x1000; pc < addr; pc += 14) counts.add_pc(pc, 1 + pc % 5);
    const auto elf = gmon::Symbolizer::load(elf_path);
    const auto binned = gmon::to_gmon_data(counts, {0x1000, addr, 2, 1000}, elf->layout());
    const auto gmon_path = d.dir() / "large.gmon";
    gmon::write_file_atomically(gmon_path, gmon::serialize_gmon(binned.data));
    const auto put = d.call("PUT", "/api/v1/firmware", {"--data-binary", "@" + elf_path.string()});
    REQUIRE(put.first / 100 == 2);
    const std::string fw = json::parse(put.second)["id"];
    const auto imported = d.upload_chunked(
        "POST", "/api/v1/sessions/import?format=gmon&board=large&firmware=" + fw, gmon_path);
    REQUIRE(imported.first == 201);
    return {std::to_string(json::parse(imported.second)["id"].get<std::int64_t>()), pairs.size()};
}

// A whole call graph is written a piece at a time as the client reads (gmon::ProfileJsonPieces):
// readers that stop reading hold a piece or two each, never the document, which each of them
// held before (some 38 MB here, 190 MB at 10^6 arcs).
TEST_CASE("stalled readers of a whole call graph hold a piece of it each, not the document") {
    ApiDaemon d;
    const auto [id, pairs] = import_large_call_graph(d, 100'000);
    const std::string path = "/api/v1/sessions/" + id + "/profile";
    const auto whole = d.call("GET", path);
    REQUIRE(whole.first == 200);
    const auto graph = json::parse(whole.second)["call_graph"];
    std::size_t lines = 0;
    for (const auto& entry : graph) lines += entry["parents"].size() + entry["children"].size();
    CHECK(lines == 2 * pairs);  // every calling pair as a parent line and as a child line
    const long before = d.rss_kib();
    std::vector<int> stalled;
    for (int i = 0; i < 4; ++i) stalled.push_back(stalled_reader(d, path));
    std::this_thread::sleep_for(std::chrono::seconds(2));  // each has filled its socket
    const long grown_kib = d.rss_kib() - before;
    std::cout << "FIGURE stalled_call_graph.rss_growth = +" << grown_kib / 1024
              << " MiB for 4 readers of a " << whole.second.size() / (1 << 20)
              << " MiB call graph\n";
    CHECK(grown_kib * 1024 < static_cast<long>(whole.second.size()));  // not even one document
    const auto health = testing::http_get(std::to_string(d.port()), "/healthz");
    CHECK(health.status == 200);
    for (const int fd : stalled) ::close(fd);
}

// A client that asks for an export and then stops reading holds a page or two of it in the
// daemon (the one being sent and the next, made meanwhile; a page is bounded by bytes,
// storage/session_pages.h), not 64 rows: an imported session's
// rows are 1 MiB of raw bytes or 64 Ki records each, and such a page was 64 MB of raw bytes or
// 200 MB of NDJSON per stalled client. The health probe stays quick meanwhile.
TEST_CASE("stalled readers of a large session's exports pin a page or two each, not the export") {
    ApiDaemon d;
    const auto capture = simulated_40mb(d);
    const auto imported = d.upload_chunked("POST", "/api/v1/sessions/import?format=bin", capture);
    REQUIRE(imported.first == 201);
    const std::string id = std::to_string(json::parse(imported.second)["id"].get<std::int64_t>());
    const long before = d.rss_kib();
    std::vector<int> stalled;  // never read
    for (int i = 0; i < 6; ++i)
        stalled.push_back(
            stalled_reader(d, "/api/v1/sessions/" + id + "/export/" + (i % 2 ? "ndjson" : "raw")));
    std::this_thread::sleep_for(std::chrono::seconds(3));  // each has filled its socket
    const long grown_kib = d.rss_kib() - before;
    const auto probe_started = std::chrono::steady_clock::now();
    const auto health =
        testing::http_get(std::to_string(d.port()), "/healthz");  // in-process: no curl start-up
    const double probe_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - probe_started)
            .count();
    std::cout << "FIGURE stalled_readers.rss_growth = +" << grown_kib / 1024
              << " MiB for 6 (3 raw, 3 NDJSON) of a 40 MB session\n"
              << "FIGURE stalled_readers.healthz_ms = " << probe_ms << " ms\n";
    CHECK(health.status == 200);
    CHECK(grown_kib < 48 * 1024);  // a page and a row each; 64-row pages took over 1 GiB here
    CHECK(probe_ms < 100);
    for (const int fd : stalled) ::close(fd);
}

}  // namespace
}  // namespace rackprof
