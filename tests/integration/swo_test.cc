// SWO boards as a bench has them: a probe server (OpenOCD's `-output :port`, J-Link's 2332,
// pyOCD's 3443, orbuculum) streaming raw SWO bytes to whoever connects, and a real `rackprof
// serve` board with protocol = "itm" as its client. The bytes are made with the reference
// encoders; the stored session must hold exactly what was encoded, through the server closing
// its port and opening it again.
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "gmon/aggregate.h"
#include "gmon/symbolizer.h"
#include "protocol/framed_format.h"
#include "protocol/itm_packet.h"
#include "protocol/swo_encoder.h"
#include "storage/session_store.h"
#include "tests/integration/feed.h"
#include "tests/integration/test_support.h"

namespace rackprof {
namespace {

using nlohmann::json;
using protocol::Record;
using namespace std::chrono_literals;

constexpr std::uint16_t kFramedPort = 1;
constexpr std::uint16_t kConsolePort = 0;
constexpr std::uint16_t kOrbstatPort = 30;
constexpr std::uint16_t kSysTick = 15;
constexpr std::uint32_t kSysTickCycles = 100;  // local timestamp inside each SysTick

// What one connection's worth of SWO carries, and what the daemon must make of it.
struct SwoPart {
    std::vector<std::uint8_t> itm;  // raw ITM bytes
    gmon::Aggregate expected;
    std::vector<std::string> console;
    std::uint64_t pc_samples = 0;  // records: DWT and framed PC samples
    std::uint64_t arcs = 0;        // records: framed arcs and orbstat entries
    std::uint64_t sleep_samples = 0;
    std::uint64_t overflows = 0;
    std::uint64_t systicks = 0;
};

// Software packets as the ITM sends them: whole words where it can, then the rest.
void software_bytes(protocol::ItmEncoder& itm, std::uint16_t port,
                    std::span<const std::uint8_t> bytes) {
    std::size_t i = 0;
    while (i < bytes.size()) {
        const std::size_t size = bytes.size() - i >= 4 ? 4 : bytes.size() - i >= 2 ? 2 : 1;
        std::uint32_t value = 0;
        for (std::size_t k = 0; k < size; ++k) value |= std::uint32_t{bytes[i + k]} << (8 * k);
        itm.software(port, value, static_cast<std::uint8_t>(size));
        i += size;
    }
}

// One connection: PC samples (awake and asleep), framed records on port 1, orbstat enter/exit
// words on port 30, console lines on port 0, SysTick exceptions with time, one overflow.
SwoPart make_part(std::uint32_t code_low, int seed, protocol::FramedEncoder& framed) {
    SwoPart part;
    protocol::ItmEncoder itm(part.itm);
    itm.sync();
    const auto pc = [&](int i) { return code_low + 0x10 + 2 * static_cast<std::uint32_t>(i % 40); };
    for (int i = 0; i < 30 + seed; ++i) {
        itm.pc_sample(pc(i * 7 + seed));
        part.expected.add_pc(pc(i * 7 + seed), 1);
        ++part.pc_samples;
        if (i % 9 == 0) {
            itm.pc_sleep();
            ++part.sleep_samples;
        }
        if (i % 10 == 3) {  // a SysTick taking exactly kSysTickCycles
            itm.exception(kSysTick, protocol::kExceptionEnter);
            itm.local_timestamp(kSysTickCycles);
            itm.exception(kSysTick, protocol::kExceptionExit);
            ++part.systicks;
        }
    }
    // Framed records, some with counts (ARC_N), in whole frames on port 1.
    for (int i = 0; i < 12; ++i) {
        const auto arc = Record::arc(pc(i + 1), pc(i + 20), static_cast<std::uint32_t>(1 + i % 3));
        framed.record(arc);
        part.expected.add_arc(arc.from_pc, arc.self_pc, arc.count);
        ++part.arcs;
    }
    framed.record(Record::pc_sample(pc(seed), 4));
    part.expected.add_pc(pc(seed), 4);
    ++part.pc_samples;
    framed.flush();
    software_bytes(itm, kFramedPort, framed.take_wire());
    // orbstat: entry (0x4) and exit (0x5) words, each followed by call site and callee.
    for (int i = 0; i < 5; ++i) {
        const std::uint32_t site = pc(30 + i) | 1, callee = pc(2 * i);
        for (const std::uint32_t kind : {0x4u, 0x5u}) {
            for (const std::uint32_t word :
                 {kind << 28 | static_cast<std::uint32_t>(i), site, callee})
                itm.software(kOrbstatPort, word, 4);
        }
        part.expected.add_arc(site, callee, 1);
        ++part.arcs;
    }
    itm.overflow();
    ++part.overflows;
    for (const std::string& line :
         {"swo part " + std::to_string(seed) + " up\n", std::string("ok\n")}) {
        software_bytes(itm, kConsolePort,
                       std::span(reinterpret_cast<const std::uint8_t*>(line.data()), line.size()));
        part.console.push_back(line);
    }
    return part;
}

// The same ITM bytes in TPIU formatter frames (OpenOCD -formatter 1), beside another source's.
std::vector<std::uint8_t> in_tpiu_frames(std::span<const std::uint8_t> itm) {
    std::vector<std::uint8_t> out;
    protocol::TpiuFramer tpiu(out);
    tpiu.full_sync();
    const std::vector<std::uint8_t> etm = {0x11, 0x22, 0x33};
    for (std::size_t i = 0; i < itm.size(); i += 37) {
        tpiu.write(1, itm.subspan(i, std::min<std::size_t>(37, itm.size() - i)));
        if (i % 111 == 0) tpiu.write(2, etm);  // another trace source: not ours
    }
    tpiu.flush();
    tpiu.full_sync();
    return out;
}

// A probe's SWO server: streams the first part to the first client, closes the client and its
// port (the probe server restarting), opens the same port again after a pause and streams the
// second part to the next client.
class SwoServer {
  public:
    explicit SwoServer(std::vector<std::string> parts) : parts_(std::move(parts)) {
        port_ = listen_on(0);
        thread_ = std::thread([this] { serve(); });
    }
    ~SwoServer() {
        if (thread_.joinable()) thread_.join();
    }
    int port() const { return port_; }

  private:
    int listen_on(int port) {
        const auto listener = testing::listen_loopback(port);
        listener_ = listener.fd;
        return listener.port;
    }
    void serve() {
        for (std::size_t i = 0; i < parts_.size(); ++i) {
            if (i > 0) {
                std::this_thread::sleep_for(300ms);  // the port is closed meanwhile: refused
                listen_on(port_);
            }
            const int client = ::accept(listener_, nullptr, nullptr);
            ::close(listener_);
            std::size_t done = 0;
            while (client >= 0 && done < parts_[i].size()) {
                const ssize_t n = ::send(client, parts_[i].data() + done,
                                         std::min<std::size_t>(1000, parts_[i].size() - done), 0);
                if (n <= 0) break;
                done += static_cast<std::size_t>(n);
            }
            if (client >= 0) ::close(client);
        }
    }

    std::vector<std::string> parts_;
    int listener_ = -1;
    int port_ = 0;
    std::thread thread_;
};

std::string text_of(std::span<const std::uint8_t> bytes) {
    return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

std::size_t occurrences(const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

TEST_CASE("SWO over TCP, raw and TPIU-formatted: stored exactly, through the server's restart") {
    testing::TempDir dir;
    const auto elf_path = dir / "model.elf";
    REQUIRE(testing::rackprof({"simulate", "--model", "deterministic", "--iterations", "1",
                               "--write-elf", elf_path.string()})
                .exit_code == 0);
    const auto elf = gmon::Symbolizer::load(elf_path);
    REQUIRE(elf->code_high() > elf->code_low() + 0x100);  // room for the PCs make_part uses
    const auto code_low = static_cast<std::uint32_t>(elf->code_low());

    protocol::FramedEncoder framed(4);
    std::vector<SwoPart> parts;
    parts.push_back(make_part(code_low, 1, framed));
    parts.push_back(make_part(code_low, 2, framed));
    gmon::Aggregate expected;
    std::string console;
    for (const auto& p : parts) {
        expected.merge(p.expected);
        for (const auto& line : p.console) console += line;
    }
    std::vector<std::string> raw_parts, tpiu_parts;
    for (const auto& p : parts) {
        raw_parts.push_back(text_of(p.itm));
        tpiu_parts.push_back(text_of(in_tpiu_frames(p.itm)));
    }
    SwoServer raw_server(raw_parts), tpiu_server(tpiu_parts);
    {
        std::ofstream config(dir / "rack.toml");
        config << "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\npath = \""
               << (dir / "rack.db").string()
               << "\"\n[links]\nreconnect_min_ms = 20\nreconnect_max_ms = 100\n";
        for (const auto& [name, port, tpiu] : {std::tuple{"swo-raw", raw_server.port(), false},
                                               std::tuple{"swo-tpiu", tpiu_server.port(), true}}) {
            config << "[[boards]]\nname = \"" << name << "\"\nlink = \"tcp://127.0.0.1:" << port
                   << "\"\nprotocol = \"itm\"\ntpiu = " << (tpiu ? "true" : "false")
                   << "\ntpiu_stream = 1\nframed_port = " << kFramedPort
                   << "\norbstat_port = " << kOrbstatPort << "\nconsole_port = " << kConsolePort
                   << "\nelf = \"" << elf_path.string() << "\"\n";
        }
    }
    testing::Process daemon(
        testing::rackprof_argv({"serve", "--config", (dir / "rack.toml").string()}),
        dir / "serve.log");
    const auto log = [&] { return testing::read_text(dir / "serve.log"); };
    // Both connections of both boards came and went.
    REQUIRE_MESSAGE(testing::eventually(
                        [&] {
                            const auto text = log();
                            return occurrences(text, "[swo-raw] disconnected") >= 2 &&
                                   occurrences(text, "[swo-tpiu] disconnected") >= 2;
                        },
                        20s),
                    log());
    const std::string port = testing::api_port_in(log());
    REQUIRE(!port.empty());
    const std::string api = "http://127.0.0.1:" + port + "/api/v1/sessions/";
    const auto get = [&](const std::string& path) {
        return testing::run({"curl", "-sS", "--fail", api + path});
    };

    storage::SessionStore store(dir / "rack.db", storage::Database::Mode::kReadOnly);
    for (const auto& [board, bytes] :
         {std::pair{"swo-raw", raw_parts}, std::pair{"swo-tpiu", tpiu_parts}}) {
        const std::string board_name = board;
        CAPTURE(board_name);
        std::optional<storage::SessionInfo> session;
        for (const auto& s : store.sessions()) {
            if (s.spec.board == board) session = s;
        }
        REQUIRE(session);
        const auto id = std::to_string(session->id);
        // Served while capturing (once the writer committed): the console as text, the
        // counters and the exception trace.
        CHECK(testing::eventually([&] { return get(id + "/console").out == console; }, 5s));
        CHECK(get(id + "/console?tail=1").out == "ok\n");
        const auto served = json::parse(get(id).out);
        CHECK(served["protocol"] == "itm");
        CHECK(served["swo"]["tpiu"] == (std::string(board) == "swo-tpiu"));
        CHECK(served["swo"]["console_port"] == kConsolePort);
        CHECK(served["counters"]["overflows"] == parts[0].overflows + parts[1].overflows);
        const json systick = {{"exception", kSysTick},
                              {"name", "SysTick"},
                              {"entries", parts[0].systicks + parts[1].systicks},
                              {"cycles", (parts[0].systicks + parts[1].systicks) * kSysTickCycles}};
        CHECK(served["exceptions"] == json::array({systick}));
        const auto profile = json::parse(get(id + "/profile").out);
        CHECK(profile["sleeping"] == parts[0].sleep_samples + parts[1].sleep_samples);
        // The live feed: the newest console lines, overflows and sleep samples among losses.
        // The feed's state follows the decoder on its own tick: a snapshot taken just as the
        // second part is stored may not hold it yet, so a fresh feed is asked until it does.
        const json expected_lines = {parts[0].console[0], parts[0].console[1], parts[1].console[0],
                                     parts[1].console[1]};
        json snapshot, lines;
        testing::eventually(
            [&] {
                testing::Feed feed(port, "/api/v1/sessions/" + id + "/live");
                snapshot = feed.next();
                lines = json::array();
                for (const auto& line : snapshot["console"]) lines.push_back(line["text"]);
                return lines == expected_lines;
            },
            5s, 100ms);
        CHECK(lines == expected_lines);
        CHECK(snapshot["losses"]["overflows"] == parts[0].overflows + parts[1].overflows);
        CHECK(snapshot["losses"]["sleep_samples"] ==
              parts[0].sleep_samples + parts[1].sleep_samples);
    }
    daemon.signal(SIGTERM);
    REQUIRE(daemon.wait(5s) == 0);

    storage::SessionStore after(dir / "rack.db", storage::Database::Mode::kReadOnly);
    for (const auto& [board, bytes] :
         {std::pair{"swo-raw", raw_parts}, std::pair{"swo-tpiu", tpiu_parts}}) {
        const std::string board_name = board;
        CAPTURE(board_name);
        std::optional<storage::SessionInfo> session;
        for (const auto& s : after.sessions()) {
            if (s.spec.board == board) session = s;
        }
        REQUIRE(session);
        const auto& c = session->counters;
        CHECK(session->state == "completed");
        CHECK(after.aggregate(session->id) == expected);
        CHECK(c.bytes_in == bytes[0].size() + bytes[1].size());
        CHECK(c.bytes_discarded == 0);
        CHECK(c.arcs == parts[0].arcs + parts[1].arcs);
        CHECK(c.pc_samples == parts[0].pc_samples + parts[1].pc_samples);
        CHECK(c.sleep_samples == parts[0].sleep_samples + parts[1].sleep_samples);
        CHECK(c.overflows == parts[0].overflows + parts[1].overflows);
        // Frames: the framed protocol's, plus the TPIU's 16-byte frames (two 4-byte full syncs
        // around each part).
        const std::uint64_t tpiu_frames =
            std::string(board) == "swo-tpiu" ? (bytes[0].size() - 8 + bytes[1].size() - 8) / 16 : 0;
        CHECK(c.frames == framed.frames() + tpiu_frames);
        CHECK(c.frames_lost == 0);
        CHECK(c.frames_bad == 0);
        std::string console_stored;
        for (const auto& line : after.console(session->id)) console_stored += line.text;
        CHECK(console_stored == console);
        // The restart is a gap, and capture went on after it: the second part is stored.
        const auto gaps = after.gaps(session->id);
        REQUIRE(gaps.size() >= 1);
        CHECK(gaps[0].ended_ns > gaps[0].started_ns);
        std::string raw;
        std::int64_t last_received = 0;
        after.for_each_chunk(session->id, [&](std::int64_t at, std::span<const std::uint8_t> b) {
            raw += text_of(b);
            last_received = at;
        });
        CHECK(raw == bytes[0] + bytes[1]);
        CHECK(last_received > gaps[0].ended_ns);
    }
}

TEST_CASE("convert --console-port: many lines, all of them, in order, before the summary") {
    // Console output is buffered: lines beyond any buffer size must all arrive, in order, and
    // before what convert prints after decoding (the summary, or the error).
    testing::TempDir dir;
    std::vector<std::uint8_t> itm;
    protocol::ItmEncoder enc(itm);
    enc.sync();
    std::vector<std::string> lines;
    for (int i = 0; i < 20000; ++i) {
        lines.push_back("line " + std::to_string(i) + " \x01 of the console");
        for (const char c : lines.back() + "\n") enc.software(0, static_cast<std::uint8_t>(c), 1);
    }
    const auto no_records = dir / "console.itm";
    std::ofstream(no_records, std::ios::binary) << text_of(itm);
    enc.pc_sample(0x1000);
    const auto with_record = dir / "console-pc.itm";
    std::ofstream(with_record, std::ios::binary) << text_of(itm);

    for (const auto& [file, ok] : {std::pair{with_record, true}, std::pair{no_records, false}}) {
        const bool has_record = ok;  // CAPTURE takes no structured binding (clang 14)
        CAPTURE(has_record);
        const auto conv =
            testing::rackprof({"convert", file.string(), "--protocol", "itm", "--console-port", "0",
                               "-o", (dir / "gmon.out").string(), "--report", "none"});
        CHECK((conv.exit_code == 0) == ok);
        std::size_t at = 0;
        for (const auto& line : lines) {
            std::string shown = line;
            std::replace(shown.begin(), shown.end(), '\x01', '.');
            at = conv.err.find("console: " + shown + "\n", at);
            REQUIRE(at != std::string::npos);
        }
        const auto after = conv.err.find(ok ? "rackprof: decoded" : "no records found");
        REQUIRE(after != std::string::npos);
        CHECK(after > at);
    }
}

TEST_CASE("convert --protocol itm: console on stderr, ITM counters and exceptions reported") {
    testing::TempDir dir;
    const auto elf_path = dir / "model.elf";
    REQUIRE(testing::rackprof({"simulate", "--model", "deterministic", "--iterations", "1",
                               "--write-elf", elf_path.string()})
                .exit_code == 0);
    const auto code_low = static_cast<std::uint32_t>(gmon::Symbolizer::load(elf_path)->code_low());
    protocol::FramedEncoder framed(4);
    const SwoPart part = make_part(code_low, 3, framed);
    const auto capture = dir / "swo.bin";
    std::ofstream(capture, std::ios::binary) << text_of(part.itm);
    const auto tpiu_capture = dir / "swo-tpiu.bin";
    std::ofstream(tpiu_capture, std::ios::binary) << text_of(in_tpiu_frames(part.itm));

    for (const auto& [file, tpiu] : {std::pair{capture, false}, std::pair{tpiu_capture, true}}) {
        const bool formatted = tpiu;  // CAPTURE takes no structured binding (clang 14)
        CAPTURE(formatted);
        std::vector<std::string> args = {"convert", file.string(), "--protocol", "itm", "--elf",
                                         elf_path.string(), "--framed-port", "1", "--orbstat-port",
                                         "30", "--console-port", "0", "-o",
                                         (dir / "gmon.out").string(), "--report", "json",
                                         // The parts' arcs are made-up addresses, not the
                                         // model's function entries: no wrong-ELF check.
                                         "--force"};
        if (tpiu) args.insert(args.end(), {"--tpiu", "--tpiu-stream", "1"});
        const auto conv = testing::rackprof(args);
        REQUIRE_MESSAGE(conv.exit_code == 0, conv.err);
        for (const auto& line : part.console)
            CHECK(conv.err.find("console: " + line) != std::string::npos);  // line ends in \n
        CHECK(conv.err.find("1 ITM overflows") != std::string::npos);
        const json source = json::parse(conv.out)["source"];
        CHECK(source["protocol"] == "itm");
        CHECK(source["decoder"]["overflows"] == part.overflows);
        CHECK(source["decoder"]["sleep_samples"] == part.sleep_samples);
        CHECK(source["decoder"]["pc_samples"] == part.pc_samples);
        CHECK(source["decoder"]["arcs"] == part.arcs);
        CHECK(source["decoder"]["bytes_discarded"] == 0);
        // Each SysTick activation of kSysTickCycles: the longest and the p99 are that.
        CHECK(source["exceptions"] == json::array({{{"exception", kSysTick},
                                                    {"entries", part.systicks},
                                                    {"cycles", part.systicks * kSysTickCycles},
                                                    {"completed", part.systicks},
                                                    {"max_cycles", kSysTickCycles},
                                                    {"p99_cycles", kSysTickCycles}}}));
    }
    // Options that would do nothing, or cannot be: usage errors (exit 2) naming the option.
    const auto not_itm =
        testing::rackprof({"convert", capture.string(), "--console-port", "0", "-o", "x"});
    CHECK(not_itm.exit_code == 2);
    CHECK(not_itm.err.find("--console-port is for --protocol itm only") != std::string::npos);
    const auto bad_port = testing::rackprof(
        {"convert", capture.string(), "--protocol", "itm", "--console-port", "256", "-o", "x"});
    CHECK(bad_port.exit_code == 2);
    CHECK(bad_port.err.find("0..255") != std::string::npos);
    const auto same_port = testing::rackprof({"convert", capture.string(), "--protocol", "itm",
                                              "--console-port", "1", "--framed-port", "1"});
    CHECK(same_port.exit_code == 2);
    CHECK(same_port.err.find("one ITM port cannot serve two uses") != std::string::npos);
}

}  // namespace
}  // namespace rackprof
