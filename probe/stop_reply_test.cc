#include "probe/stop_reply.h"

#include <doctest/doctest.h>

namespace rackprof::probe {
namespace {

TEST_CASE("stop replies: signal, registers, thread and the rest, as servers send them") {
    // QEMU's gdbstub after an interrupt.
    const auto qemu = parse_stop_reply("T02thread:p01.01;");
    REQUIRE(qemu);
    CHECK(qemu->kind == StopReply::Kind::kStopped);
    CHECK(qemu->signal == 2);
    CHECK(qemu->thread == "p01.01");
    // gdbserver-style, with expedited registers (ARM: 0d sp, 0f pc) and a breakpoint kind.
    const auto expedited = parse_stop_reply("T050d:f0ff0020;0f:f4010000;swbreak:;");
    REQUIRE(expedited);
    CHECK(expedited->signal == 5);
    CHECK(expedited->registers.at(15) == std::string("\xf4\x01\x00\x00", 4));
    CHECK(expedited->registers.at(13).size() == 4);
    CHECK(expedited->other.count("swbreak") == 1);
    CHECK(parse_stop_reply("S05")->signal == 5);
    CHECK(parse_stop_reply("W00")->kind == StopReply::Kind::kExited);
    CHECK(parse_stop_reply("W03;process:1a")->signal == 3);
    CHECK(parse_stop_reply("X09")->kind == StopReply::Kind::kTerminated);
}

TEST_CASE("stop replies: what is not one is refused, not guessed at") {
    for (const char* bad :
         {"", "OK", "E01", "O48656c6c6f", "T5", "Tzz", "T05:12;", "T050f:zz;", "S05junk", "Q05"}) {
        CAPTURE(bad);
        CHECK_FALSE(parse_stop_reply(bad));
    }
}

}  // namespace
}  // namespace rackprof::probe
