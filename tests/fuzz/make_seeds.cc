// Writes the fuzz targets' seed inputs: `fuzz_make_seeds OUT [SHARED]` fills OUT/<target>/
// with wire bytes made by the encoders the tests use (so the fuzzers start from valid
// streams), gmon.out files, ELF images and HTTP requests; with the thesis' real captures from
// SHARED (../shared/data/thesis) cut to a few KB, or a SKIP line when they are absent.
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "daemon/capture/board.h"
#include "gmon/gmon_reader.h"
#include "gmon/gmon_writer.h"
#include "gmon/synthetic_elf.h"
#include "gmon/tiva_test_support.h"
#include "protocol/framed_format.h"
#include "protocol/legacy_format.h"
#include "protocol/swo_encoder.h"

namespace rackprof::fuzz {
namespace {

namespace fs = std::filesystem;
using protocol::Record;
using Bytes = std::vector<std::uint8_t>;

constexpr std::size_t kMaxSharedSeed = 4096;  // the real captures are cut to this

fs::path out_dir;

void write(const std::string& target, const std::string& name, const Bytes& bytes) {
    fs::create_directories(out_dir / target);
    std::ofstream f(out_dir / target / name, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

Bytes text_bytes(const std::string& s) {
    return {s.begin(), s.end()};
}

// A decoder seed: settings byte, no chunk lengths, the payload (fuzz_input.h).
void write_wire(const std::string& target, const std::string& name, std::uint8_t settings,
                const Bytes& payload) {
    Bytes seed = {settings, 0};
    seed.insert(seed.end(), payload.begin(), payload.end());
    write(target, name, seed);
}

Bytes read_file(const fs::path& path, std::size_t max = SIZE_MAX) {
    std::ifstream f(path, std::ios::binary);
    Bytes bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (bytes.size() > max) bytes.resize(max);
    return bytes;
}

// The thesis' blink capture's first records (protocol/legacy_decoder_test.cc).
std::vector<Record> sample_records() {
    return {Record::arc(0x153D, 0x14E5), Record::arc(0x150D, 0x1499), Record::pc_sample(0x14B4),
            Record::arc(0x153D, 0x14E5), Record::pc_sample(0x146E),   Record::pc_sample(0x08A0),
            Record::arc(0x05BD, 0x04FD)};
}

Bytes legacy_wire(int width) {
    Bytes wire;
    for (const Record& r : sample_records()) encode_legacy(r, width, wire);
    return wire;
}

Bytes hex_of(const Bytes& wire, bool lines) {
    std::string text;
    for (std::size_t i = 0; i < wire.size(); ++i) {
        protocol::append_hex(std::span<const std::uint8_t>(wire).subspan(i, 1), text);
        if (lines && i % 16 == 15) text += "\r\n";
    }
    return text_bytes(text);
}

void legacy_seeds() {
    write_wire("legacy_bin", "w3", 0, legacy_wire(3));
    write_wire("legacy_bin", "w4", 1, legacy_wire(4));
    write_wire("legacy_bin", "w3-range", 2, legacy_wire(3));
    // Garbage first, fed in chunks of 1, 7 and 2 bytes.
    Bytes chunked = {0, 3, 1, 7, 2, 0x41, 0x00, 0x50, 0xFF};
    const Bytes wire = legacy_wire(3);
    chunked.insert(chunked.end(), wire.begin(), wire.end());
    write("legacy_bin", "garbage-chunked", chunked);
    write_wire("legacy_hex", "w3", 0, hex_of(legacy_wire(3), false));
    write_wire("legacy_hex", "w4-lines", 1, hex_of(legacy_wire(4), true));
    write_wire("legacy_hex", "w3-range", 2, hex_of(legacy_wire(3), true));
}

protocol::TargetHello sample_hello() {
    protocol::TargetHello hello;
    hello.version = 1;
    hello.addr_bytes = 4;
    hello.flags = 1;
    hello.text_lo = 0x400;
    hello.text_hi = 0x2000;
    hello.sample_hz = 1000;
    hello.core_clock_hz = 48'000'000;
    hello.build_id = {0xde, 0xad, 0xbe, 0xef};
    return hello;
}

Bytes framed_wire(int width) {
    protocol::FramedEncoder enc(width);
    enc.hello(sample_hello());
    enc.marker({true});
    for (const Record& r : sample_records()) enc.record(r);
    enc.record(Record::arc(0x153D, 0x14E5, 300));
    enc.record(Record::pc_sample(0x14B4, 70000));
    enc.dropped(3);
    enc.flush();
    enc.record(Record::pc_sample(0x146E));
    enc.marker({false});
    enc.flush();
    enc.reset();
    enc.hello(sample_hello());
    enc.flush();
    return enc.take_wire();
}

void framed_seeds() {
    write_wire("framed", "w4", 0, framed_wire(4));
    protocol::FramedEncoder narrow(3);
    for (const Record& r : sample_records()) narrow.record(r);
    narrow.flush();
    write_wire("framed", "w3", 1, narrow.take_wire());
    // Version 2: enter/exit events (thread and handler), a frame lost between them.
    protocol::FramedEncoder events(4, 40);
    protocol::TargetHello hello = sample_hello();
    hello.version = protocol::kFramedVersionEvents;
    hello.flags |= protocol::kHelloEvents;
    events.hello(hello);
    events.function_event({true, 0x1013, 0x1101, 0xFFFFFFF0, 32, 0});
    events.function_event({true, 0x1203, 0x1301, 0x10, 32, 15});
    events.flush();
    events.function_event({false, 0x1203, 0x1301, 0x40, 32, 15});
    events.flush();
    Bytes lost = events.take_wire();
    events.function_event({false, 0x1013, 0x1101, 0x80, 32, 0});
    events.flush();
    events.take_wire();  // this frame is lost
    events.dropped(1);
    events.function_event({true, 0x1013, 0x1101, 0x100, 32, 0});
    events.flush();
    const Bytes rest = events.take_wire();
    lost.insert(lost.end(), rest.begin(), rest.end());
    write_wire("framed", "events", 0, lost);
}

// Everything a target sends over SWO: PC samples, sleep, timestamps, exceptions, console text,
// orbstat words, framed records on port 1, other ports, overflow.
Bytes itm_wire() {
    Bytes itm;
    protocol::ItmEncoder enc(itm);
    enc.sync();
    enc.pc_sample(0x14B4);
    enc.pc_sleep();
    enc.local_timestamp(1200, 0);
    enc.exception(15, protocol::kExceptionEnter);
    enc.local_timestamp(90, 1);
    enc.exception(15, protocol::kExceptionExit);
    enc.exception(0, protocol::kExceptionReturn);
    for (const char c : std::string("hi\n")) enc.software(0, static_cast<std::uint8_t>(c), 1);
    enc.software(0, 0x0A6B6F, 4);
    enc.software(30, 0x40000000U | 1234, 4);  // orbstat entry: stamp, call site, callee
    enc.software(30, 0x153D, 4);
    enc.software(30, 0x14E4, 4);
    enc.software(30, 0x50000000U | 1300, 4);  // and its exit
    enc.software(30, 0x153D, 4);
    enc.software(30, 0x14E4, 4);
    protocol::FramedEncoder framed(4);
    framed.hello(sample_hello());
    framed.record(Record::arc(0x150D, 0x1499));
    framed.flush();
    for (const auto b : framed.take_wire()) enc.software(1, b, 1);
    enc.software(40, 0xDEADBEEF, 4);  // a port on page 1
    enc.global_timestamp1(0x123456, 1);
    enc.global_timestamp2(0x42);
    enc.overflow();
    enc.pc_sample(0x146E);
    return itm;
}

Bytes tpiu_wire(const Bytes& itm, std::uint8_t id) {
    Bytes wire;
    protocol::TpiuFramer framer(wire);
    framer.full_sync();
    for (std::size_t pos = 0; pos < itm.size(); pos += 7) {
        framer.write(id, std::span<const std::uint8_t>(itm).subspan(
                             pos, std::min<std::size_t>(7, itm.size() - pos)));
        if (pos % 21 == 0) framer.write(3, Bytes(3, 0xA5));  // another trace source
        if (pos % 35 == 0) framer.half_sync();
    }
    framer.flush();
    framer.full_sync();
    return wire;
}

void swo_seeds() {
    const Bytes itm = itm_wire();
    write_wire("itm", "all-kinds", 0, itm);
    write_wire("tpiu", "id1", 0, tpiu_wire(itm, 1));  // settings 0: ID 1
    write_wire("tpiu", "id2", 1, tpiu_wire(itm, 2));
    // swo_fuzzer.cc's settings bits: 1 tpiu, 2 console, 4 orbstat, 8 framed, 16 range, 64 ID 2.
    write_wire("swo", "raw-all-ports", 2 | 4 | 8, itm);
    write_wire("swo", "raw-range", 2 | 4 | 16, itm);
    write_wire("swo", "tpiu-all-ports", 1 | 2 | 4 | 8, tpiu_wire(itm, 1));
    write_wire("swo", "tpiu-id2", 1 | 2 | 64, tpiu_wire(itm, 2));
}

gmon::GmonData sample_gmon(const gmon::TargetLayout& layout) {
    gmon::GmonData data;
    data.layout = layout;
    gmon::Histogram h;
    h.low_pc = 0x400;
    h.high_pc = 0x440;
    h.bins = {0, 3, 70000, 1, 0, 0, 2, 9, 0, 0, 0, 0, 0, 0, 0, 5,
              1, 1, 1,     1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4};
    data.histograms.push_back(h);
    data.arcs = {{0x153D, 0x14E5, 3}, {0x150D, 0x1499, 5'000'000'000ULL}, {0x5BD, 0x4FD, 1}};
    return data;
}

// A BSD gmon.out (old or 4.4) of a 32-bit little-endian target: header, bins, arcs.
Bytes bsd_gmon(bool bsd44) {
    Bytes out;
    auto u32 = [&](std::uint32_t v) {
        for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
    };
    const std::uint32_t header = bsd44 ? 32 : 12;
    u32(0x400);
    u32(0x440);
    u32(header + 32 * 2);  // ncnt: header and 32 bins
    if (bsd44) {
        u32(0x00051879);
        u32(1000);
        while (out.size() < header) out.push_back(0);
    }
    for (int i = 0; i < 32; ++i) {
        out.push_back(static_cast<std::uint8_t>(i % 5));
        out.push_back(0);
    }
    for (const auto& [from, self, n] : {std::tuple{0x153D, 0x14E5, 3}, {0x5BD, 0x4FD, 1}}) {
        u32(from);
        u32(self);
        u32(n);
    }
    return out;
}

void gmon_seeds() {
    // Byte 0: bit 0 8-byte addresses, bit 1 big-endian (gmon_fuzzer.cc).
    for (std::uint8_t layout = 0; layout < 4; ++layout) {
        const gmon::TargetLayout t{layout & 1 ? 8 : 4,
                                   layout & 2 ? gmon::ByteOrder::kBig : gmon::ByteOrder::kLittle};
        Bytes seed = {layout};
        const Bytes file = gmon::serialize_gmon(sample_gmon(t));
        seed.insert(seed.end(), file.begin(), file.end());
        write("gmon", "gnu-layout" + std::to_string(layout), seed);
    }
    for (const bool bsd44 : {false, true}) {
        Bytes seed = {0};
        const Bytes file = bsd_gmon(bsd44);
        seed.insert(seed.end(), file.begin(), file.end());
        write("gmon", bsd44 ? "bsd44" : "bsd", seed);
    }
}

// Linker maps (gmon/linker_map.h): GNU ld's layout (function sections, a name on a line of its
// own, a plain .text with two symbols) and TI's (section allocation, globals by address).
void linker_map_seeds() {
    const std::string gnu =
        "Linker script and memory map\n\n.text           0x00000000      0x200\n"
        " .text.leaf     0x00000064       0x14 nested.c.obj\n"
        "                0x00000064                leaf\n"
        " .text.app_timer_isr\n"
        "                0x00000098        0xe nested.c.obj\n"
        "                0x00000098                app_timer_isr\n"
        " .text          0x00000134       0x28 mcount.S.obj\n"
        "                0x00000134                __gnu_mcount_nc\n"
        "                0x00000148                mcount_tail\n"
        " .text.put_le   0x00000170       0x10 framed.c.obj\n\n"
        "OUTPUT(app.elf elf32-littlearm)\n";
    const std::string ti =
        "TI ARM Linker PC v20.2.5\n\nSECTION ALLOCATION MAP\n\n"
        ".text      0    00000200    00000c00     \n"
        "                  00000200    00000a80     tasks.obj (.text)\n"
        "                  00000c80    00000180     Task.obj (.text:Task_ProgramTrace)\n\n"
        "GLOBAL SYMBOLS: SORTED BY Symbol Address \n\naddress   name\n-------   ----\n"
        "00000201  xTaskCreate\n00000641  vTaskDelay\n00000c81  Task_ProgramTrace\n";
    write("linker_map", "gnu-ld", Bytes(gnu.begin(), gnu.end()));
    write("linker_map", "ti-arm", Bytes(ti.begin(), ti.end()));
}

// Tiva binned PC reports (gmon/tiva_report.h): a whole minute, and one cut mid-report.
void tiva_seeds() {
    std::string report = "DONE COLLECTING (1)\n";
    for (int bin = 0; bin < 512; ++bin) {
        const int count = bin == 323 ? 4100 : bin == 42 ? 310 : bin % 97 == 0 ? 3 : 0;
        report += std::to_string(1000 + bin) + ",42,0," + std::to_string(bin) + "," +
                  std::to_string(count) + ",0,0\n";
    }
    report += "ERROR: (Current PC / 64) >= 512 (Current_PC = 40000)\n";
    write("tiva", "one-minute", Bytes(report.begin(), report.end()));
    write("tiva", "truncated", Bytes(report.begin(), report.begin() + 2000));
    // As a report task's printf prints it: zero-padded, signed, six fields.
    const std::string printed = gmon::testing::printed_tiva_report(1, {{323, 4100}});
    write("tiva", "printed", Bytes(printed.begin(), printed.end()));
}

const std::vector<gmon::SyntheticFunction> kFunctions = {{"main", 0x400, 0x40},
                                                         {"blink", 0x440, 0x20},
                                                         {"delay", 0x460, 0x10, false},
                                                         {"loop_label", 0x470, 0x10, true, false}};

Bytes synthetic_elf() {
    const fs::path path = out_dir / "synthetic.elf.tmp";
    gmon::write_synthetic_elf(path, kFunctions, 0x400, 0x480);
    Bytes bytes = read_file(path);
    fs::remove(path);
    return bytes;
}

std::string request(const std::string& method, const std::string& target,
                    const std::string& body = "", const std::string& type = "application/json") {
    std::string r = method + " " + target + " HTTP/1.1\r\nHost: localhost\r\n";
    if (!body.empty() || method == "POST" || method == "PUT") {
        r +=
            "Content-Type: " + type + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    }
    return r + "\r\n" + body;
}

void api_seeds() {
    const Bytes elf = synthetic_elf();
    write("symbolizer", "synthetic", elf);

    const fs::path elf_path = out_dir / "firmware.elf.tmp";
    {
        std::ofstream(elf_path, std::ios::binary)
            .write(reinterpret_cast<const char*>(elf.data()),
                   static_cast<std::streamsize>(elf.size()));
    }
    const std::string firmware_id = daemon::capture::file_sha256(elf_path);  // it has no build-id
    fs::remove(elf_path);
    Bytes capture;
    for (const Record& r : {Record::arc(0x401, 0x441), Record::arc(0x441, 0x461),
                            Record::pc_sample(0x410), Record::pc_sample(0x448)}) {
        encode_legacy(r, 3, capture);
    }
    const std::string elf_text(elf.begin(), elf.end());
    const std::string capture_text(capture.begin(), capture.end());
    write("api", "firmware-import-profile-exports",
          text_bytes(request("PUT", "/api/v1/firmware", elf_text, "application/octet-stream") +
                     request("POST",
                             "/api/v1/sessions/import?format=bin&protocol=legacy&addr_bytes=3&"
                             "board=b1&firmware=" +
                                 firmware_id,
                             capture_text, "application/octet-stream") +
                     request("GET", "/api/v1/sessions/1/profile?top=5&min_percent=0.5") +
                     request("GET", "/api/v1/sessions/1/export/gmon") +
                     request("GET", "/api/v1/sessions/1/export/text") +
                     request("GET", "/api/v1/sessions/1/records.csv?from=0&to=99999999999999999") +
                     request("GET", "/api/v1/sessions/1/console?tail=5") +
                     request("DELETE", "/api/v1/sessions/1")));
    Bytes gmon_file = gmon::serialize_gmon(sample_gmon({}));
    write("api", "import-gmon",
          text_bytes(request("POST", "/api/v1/sessions/import?format=gmon",
                             std::string(gmon_file.begin(), gmon_file.end()),
                             "application/octet-stream") +
                     request("GET", "/api/v1/sessions/1/export/json") +
                     request("GET", "/api/v1/sessions?board=import&state=completed&from=0")));
    const Bytes framed = framed_wire(4);
    write(
        "api", "import-framed",
        text_bytes(request("POST", "/api/v1/sessions/import?protocol=framed&addr_bytes=4",
                           std::string(framed.begin(), framed.end()), "application/octet-stream") +
                   request("GET", "/api/v1/sessions/1/export/ndjson") +
                   request("GET", "/api/v1/sessions/1/raw")));
    const Bytes itm = itm_wire();
    write("api", "import-itm",
          text_bytes(request("POST",
                             "/api/v1/sessions/import?protocol=itm&console_port=0&orbstat_port=30&"
                             "framed_port=1",
                             std::string(itm.begin(), itm.end()), "application/octet-stream") +
                     request("GET", "/api/v1/sessions/1/console") +
                     request("PUT", "/api/v1/sessions/1/firmware", R"({"id":"abc"})")));
}

void shared_seeds(const fs::path& shared) {
    if (!fs::exists(shared / "blink1hex.txt")) {
        std::cout << "SKIP: seeds from the thesis captures: they are not at " << shared.string()
                  << "\n";
        return;
    }
    const Bytes hex = read_file(shared / "blink1hex.txt", kMaxSharedSeed);
    write_wire("legacy_hex", "thesis-blink1hex", 0, hex);
    write_wire("legacy_hex", "thesis-blink1hex-range", 2, hex);  // range [0, 0x2000)
    std::string digits;
    for (const auto c : hex) {
        if (std::isxdigit(c)) digits.push_back(static_cast<char>(c));
    }
    Bytes bin;
    for (std::size_t i = 0; i + 1 < digits.size(); i += 2)
        bin.push_back(static_cast<std::uint8_t>(std::stoi(digits.substr(i, 2), nullptr, 16)));
    write_wire("legacy_bin", "thesis-blink1", 0, bin);
    // The real gmon.out files, their histograms cut to 256 bins so they stay small.
    for (const char* name : {"blink1gmon.out", "shield1gmon.out"}) {
        gmon::GmonData data = gmon::parse_gmon(read_file(shared / name), {});
        for (auto& h : data.histograms) {
            if (h.bins.size() <= 256) continue;
            h.high_pc = h.low_pc + (h.high_pc - h.low_pc) / h.bins.size() * 256;
            h.bins.resize(256);
        }
        Bytes seed = {0};
        const Bytes file = gmon::serialize_gmon(data);
        seed.insert(seed.end(), file.begin(), file.end());
        write("gmon", std::string("thesis-") + name, seed);
    }
    std::cout << "seeds: the thesis captures from " << shared.string() << "\n";
}

}  // namespace
}  // namespace rackprof::fuzz

int main(int argc, char** argv) {
    using namespace rackprof::fuzz;
    if (argc < 2) {
        std::cerr << "usage: fuzz_make_seeds OUT [SHARED]\n";
        return 2;
    }
    out_dir = argv[1];
    std::filesystem::create_directories(out_dir);
    legacy_seeds();
    framed_seeds();
    swo_seeds();
    gmon_seeds();
    tiva_seeds();
    linker_map_seeds();
    api_seeds();
    shared_seeds(argc > 2 ? argv[2] : "");
    return 0;
}
