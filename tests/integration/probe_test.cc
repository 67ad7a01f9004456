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
#include "tests/integration/test_support.h"

namespace rackprof {
namespace {

using namespace std::chrono_literals;

// A port nothing listens on now (bound, read, closed): QEMU cannot be asked for port 0's.
std::uint16_t free_tcp_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    ::close(fd);
    return ntohs(a.sin_port);
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

TEST_CASE("GDB client against QEMU's gdbstub: negotiation, registers, memory, halt-sampled PCs") {
    const auto elf_path = std::filesystem::path(RACKPROF_BINARY).parent_path() / "target-fw" /
                          "blinky-mps2-an385-compat.elf";
    if (testing::run({"sh", "-c", "command -v qemu-system-arm"}).exit_code != 0 ||
        !std::filesystem::exists(elf_path)) {
        MESSAGE("SKIP: the probe test needs qemu-system-arm and target-fw built (./setup.sh)");
        return;
    }
    testing::TempDir dir;
    const std::uint16_t port = free_tcp_port();
    // Halted at reset (-S) until the client lets it run.
    testing::Process qemu(
        {"qemu-system-arm", "-M", "mps2-an385", "-display", "none", "-monitor", "none", "-serial",
         "null", "-semihosting-config", "enable=on,target=native", "-icount", "shift=7,align=on",
         "-S", "-gdb", "tcp:127.0.0.1:" + std::to_string(port), "-kernel", elf_path.string()},
        dir / "qemu.err");
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
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd, 1) == 0);
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    probe::GdbClientOptions options;
    options.timeout = 300ms;
    const auto started = std::chrono::steady_clock::now();
    CHECK_THROWS_WITH_AS(probe::GdbClient::connect("127.0.0.1", ntohs(a.sin_port), options),
                         doctest::Contains("did not answer in time"), probe::ProbeError);
    CHECK(std::chrono::steady_clock::now() - started < 2s);
    ::close(fd);
}

}  // namespace
}  // namespace rackprof
