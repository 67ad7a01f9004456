// The GDB client against a real server: QEMU's gdbstub on a Cortex-M3 board (mps2-an385)
// running target-fw's blinky, paced like a real board (-icount shift=7,align=on: some 8 MHz,
// its 100 blinks take 2 s). What the firmware is and does is known: its ELF says where the
// reset handler is and what the vector table holds, and blinky spends nearly all its time in
// its busy-wait, so PCs sampled by halting it land there.
#include <doctest/doctest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "gmon/symbolizer.h"
#include "probe/gdb_client.h"
#include "tests/integration/api_daemon.h"
#include "tests/integration/test_support.h"

namespace rackprof {
namespace {

using nlohmann::json;

using namespace std::chrono_literals;

// A port nothing listens on now (bound, read, closed): QEMU cannot be asked for port 0's.
std::uint16_t free_tcp_port() {
    const auto listener = testing::listen_loopback();
    ::close(listener.fd);
    return static_cast<std::uint16_t>(listener.port);
}

std::uint32_t word_at(const std::string& bytes, std::size_t at) {
    return static_cast<std::uint32_t>(*probe::little_endian_value(bytes.substr(at, 4)));
}

// The ELF header's e_entry (ELF32, little-endian).
std::uint32_t elf_entry(const std::filesystem::path& elf) {
    std::ifstream in(elf, std::ios::binary);
    std::string header(28, '\0');
    in.read(header.data(), 28);
    return word_at(header, 24);
}

std::string function_at(const gmon::Symbolizer& elf, std::uint64_t pc) {
    for (const auto& s : elf.symbols())
        if (s.function && pc >= s.addr && pc < s.addr + s.size) return s.name;
    return "";
}

const std::filesystem::path kBlinky = std::filesystem::path(RACKPROF_BINARY).parent_path() /
                                      "target-fw" / "blinky-mps2-an385-compat.elf";

bool qemu_missing() {
    if (testing::run({"sh", "-c", "command -v qemu-system-arm"}).exit_code == 0 &&
        std::filesystem::exists(kBlinky))
        return false;
    MESSAGE("SKIP: the probe tests need qemu-system-arm and target-fw built (./setup.sh)");
    return true;
}

// Blinky in QEMU, halted at reset (-S) with its gdbstub on a free loopback port.
struct QemuBoard {
    testing::TempDir dir;
    std::uint16_t port = free_tcp_port();
    testing::Process qemu{
        {"qemu-system-arm", "-M", "mps2-an385", "-display", "none", "-monitor", "none", "-serial",
         "null", "-semihosting-config", "enable=on,target=native", "-icount", "shift=7,align=on",
         "-S", "-gdb", "tcp:127.0.0.1:" + std::to_string(port), "-kernel", kBlinky.string()},
        dir / "qemu.err"};
};

TEST_CASE("GDB client against QEMU's gdbstub: negotiation, registers, memory, halt-sampled PCs") {
    if (qemu_missing()) return;
    const auto& elf_path = kBlinky;
    QemuBoard board;
    const std::uint16_t port = board.port;
    std::unique_ptr<probe::GdbClient> gdb;
    REQUIRE(testing::eventually(
        [&] {
            try {
                gdb = probe::GdbClient::connect("127.0.0.1", port);
                return true;
            } catch (const probe::ProbeError&) {
                return false;
            }
        },
        10s, 50ms));

    // What the server offered, and what the client made of it.
    CHECK(gdb->features().count("PacketSize") == 1);
    // Acknowledgements off only where the server offers it (QEMU 7 does not).
    const auto no_ack = gdb->features().find("QStartNoAckMode");
    CHECK(gdb->acknowledging() == (no_ack == gdb->features().end() || no_ack->second != "+"));
    CHECK(gdb->has_vcont_continue());
    // The register numbers come from the server's description, not from a table of ours.
    CHECK(gdb->target().architecture == "arm");
    REQUIRE(gdb->pc_register());
    const unsigned pc = *gdb->pc_register();
    CHECK(pc == 15);
    const auto stopped = gdb->stop_reason();
    CHECK(stopped.kind == probe::StopReply::Kind::kStopped);

    // At reset: pc is the reset handler (the ELF's entry), and memory at 0 is the vector table.
    const std::uint32_t entry = elf_entry(elf_path);
    CHECK(gdb->read_register(pc) == (entry & ~1u));
    const std::string vectors = gdb->read_memory(0, 8);
    REQUIRE(vectors.size() == 8);
    CHECK(word_at(vectors, 4) == entry);
    CHECK_THROWS_AS(gdb->read_register(0x7fff), probe::ProbeError);

    // Halt-sample-resume: the target runs between halts (the PCs differ), every PC is in the
    // firmware's code, and blinky's busy-wait is among them.
    const auto elf = gmon::Symbolizer::load(elf_path);
    std::map<std::string, int> by_function;
    std::set<std::uint64_t> pcs;
    int samples = 0;
    for (int i = 0; i < 40; ++i) {
        gdb->resume();
        CHECK_THROWS_AS(gdb->request("g"), probe::ProbeError);  // not while it runs
        std::this_thread::sleep_for(2ms);
        const auto halted = gdb->halt();
        REQUIRE(halted.kind == probe::StopReply::Kind::kStopped);
        const std::uint64_t at = gdb->read_register(pc);
        CAPTURE(at);
        const std::string function = function_at(*elf, at);
        CHECK_FALSE(function.empty());
        ++by_function[function];
        pcs.insert(at);
        ++samples;
    }
    std::string seen;
    for (const auto& [function, n] : by_function) seen += " " + function + ":" + std::to_string(n);
    MESSAGE(samples << " halt samples:" << seen);
    CHECK(samples == 40);
    CHECK(pcs.size() >= 3);
    CHECK(by_function["wait_us"] > 0);
    CHECK(gdb->bytes_discarded() == 0);
}

TEST_CASE("GDB client: a port nothing listens on, and a server that says nothing, are errors") {
    const std::uint16_t port = free_tcp_port();
    CHECK_THROWS_WITH_AS(probe::GdbClient::connect("127.0.0.1", port),
                         doctest::Contains("cannot connect"), probe::ProbeError);
    // A listener that accepts and never answers: the handshake's deadline, not a hang.
    const auto silent = testing::listen_loopback();
    probe::GdbClientOptions options;
    options.timeout = 300ms;
    const auto started = std::chrono::steady_clock::now();
    CHECK_THROWS_WITH_AS(
        probe::GdbClient::connect("127.0.0.1", static_cast<std::uint16_t>(silent.port), options),
        doctest::Contains("did not answer in time"), probe::ProbeError);
    CHECK(std::chrono::steady_clock::now() - started < 2s);
    ::close(silent.fd);
}

// Issue 41's "ordinary sessions": a board whose link is the probe's GDB server, created over
// the API, captures into a session like any other; its profile and gmon.out (read back by
// arm-none-eabi-gprof) name blinky's busy-wait as where the time goes. QEMU paced by -icount
// align answers a halt in some 39 ms, so the board samples at about 20 Hz whatever it asks.
TEST_CASE("a gdb:// board: the daemon halt-samples QEMU into a session, profiled and exported") {
    if (qemu_missing()) return;
    QemuBoard board;
    testing::ApiDaemon d;
    const auto put = d.call("PUT", "/api/v1/firmware", {"--data-binary", "@" + kBlinky.string()});
    REQUIRE(put.first / 100 == 2);
    const std::string firmware = json::parse(put.second)["id"];
    const std::string body = R"({"name":"probe","link":"gdb://127.0.0.1:)" +
                             std::to_string(board.port) + R"(?rate=200","firmware":")" + firmware +
                             R"("})";
    REQUIRE(
        d.call("POST", "/api/v1/boards", {"-H", "Content-Type: application/json", "--data", body})
            .first == 201);
    std::int64_t id = 0;
    const bool captured = testing::eventually(
        [&] {
            const auto list = json::parse(d.call("GET", "/api/v1/sessions?board=probe").second);
            if (list.empty() || list.back()["counters"]["pc_samples"].get<std::uint64_t>() < 60)
                return false;
            id = list.back()["id"].get<std::int64_t>();
            return true;
        },
        20s, 100ms);
    if (!captured) MESSAGE("the board: " << d.call("GET", "/api/v1/boards/probe").second);
    REQUIRE(captured);
    REQUIRE(d.call("POST", "/api/v1/sessions/" + std::to_string(id) + "/stop").first == 200);
    const json session =
        json::parse(d.call("GET", "/api/v1/sessions/" + std::to_string(id)).second);
    CHECK(session["protocol"] == "framed");  // what a gdb:// board's samples come as
    CHECK(session["counters"]["bytes_discarded"] == 0);
    CHECK(session["counters"]["arcs"] == 0);  // a probe samples; it never sees a call
    const json profile =
        json::parse(d.call("GET", "/api/v1/sessions/" + std::to_string(id) + "/profile").second);
    const std::uint64_t total = profile["total_samples"];
    CHECK(total == session["counters"]["pc_samples"].get<std::uint64_t>());
    std::string seen;
    std::uint64_t in_functions = 0, in_wait = 0;
    for (const auto& row : profile["flat"]) {
        const auto n = row["samples"].get<std::uint64_t>();
        in_functions += n;
        if (row["name"] == "wait_us") in_wait = n;
        seen += " " + row["name"].get<std::string>() + ":" + std::to_string(n);
    }
    MESSAGE(total << " samples:" << seen);
    CHECK(in_functions == total);  // every sample in a function of the firmware
    CHECK(in_wait > 0);
    // The gmon.out of an ordinary session, read by GNU gprof.
    const auto gmon = d.dir() / "probe.gmon";
    const auto exported = d.call("GET", "/api/v1/sessions/" + std::to_string(id) + "/gmon.out");
    REQUIRE(exported.first == 200);
    std::ofstream(gmon, std::ios::binary) << exported.second;
    CHECK(testing::gprof_brief(kBlinky, gmon).find("wait_us") != std::string::npos);
}

}  // namespace
}  // namespace rackprof
