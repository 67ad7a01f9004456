#include "probe/target_description.h"

#include <doctest/doctest.h>

#include <map>
#include <stdexcept>

namespace rackprof::probe {
namespace {

// What QEMU's gdbstub serves for a Cortex-M3 (mps2-an385), trimmed to what matters.
const std::map<std::string, std::string> kQemuArmM = {
    {"target.xml", R"(<?xml version="1.0"?><!DOCTYPE target SYSTEM "gdb-target.dtd"><target>)"
                   R"(<architecture>arm</architecture><xi:include href="arm-m-profile.xml"/>)"
                   R"(<xi:include href="system-registers.xml"/></target>)"},
    {"arm-m-profile.xml",
     "<?xml version=\"1.0\"?>\n<!-- a comment with <reg name=\"fake\" bitsize=\"8\"/> -->\n"
     "<feature name=\"org.gnu.gdb.arm.m-profile\">\n"
     "  <reg name=\"r0\" bitsize=\"32\"/>\n  <reg name=\"r1\" bitsize=\"32\"/>\n"
     "  <reg name=\"r2\" bitsize=\"32\"/>\n  <reg name=\"r3\" bitsize=\"32\"/>\n"
     "  <reg name=\"r4\" bitsize=\"32\"/>\n  <reg name=\"r5\" bitsize=\"32\"/>\n"
     "  <reg name=\"r6\" bitsize=\"32\"/>\n  <reg name=\"r7\" bitsize=\"32\"/>\n"
     "  <reg name=\"r8\" bitsize=\"32\"/>\n  <reg name=\"r9\" bitsize=\"32\"/>\n"
     "  <reg name=\"r10\" bitsize=\"32\"/>\n  <reg name=\"r11\" bitsize=\"32\"/>\n"
     "  <reg name=\"r12\" bitsize=\"32\"/>\n"
     "  <reg name=\"sp\" bitsize=\"32\" type=\"data_ptr\"/>\n"
     "  <reg name=\"lr\" bitsize=\"32\"/>\n  <reg name=\"pc\" bitsize=\"32\" type=\"code_ptr\"/>\n"
     "  <reg name=\"xpsr\" bitsize=\"32\" regnum=\"25\"/>\n</feature>\n"},
    {"system-registers.xml",
     "<feature name=\"org.qemu.gdb.arm.m-system\"><reg name='msp' bitsize='32'/></feature>"},
};

TEST_CASE("target descriptions: registers numbered as GDB numbers them, includes followed") {
    int fetched = 0;
    const auto d = parse_target_description(kQemuArmM.at("target.xml"), [&](const std::string& f) {
        ++fetched;
        return kQemuArmM.at(f);
    });
    CHECK(fetched == 2);
    CHECK(d.architecture == "arm");
    REQUIRE(d.find("pc"));
    CHECK(d.find("pc")->number == 15);
    CHECK(d.find("sp")->number == 13);
    CHECK(d.find("xpsr")->number == 25);  // regnum= moves the count on
    CHECK(d.find("msp")->number == 26);
    CHECK_FALSE(d.find("fake"));  // inside a comment
    CHECK(d.g_offset(15) == 60u);
    CHECK_FALSE(d.g_offset(25));  // 16-24 are not described: no offset is known
}

TEST_CASE("target descriptions: malformed or endless ones are refused") {
    const auto none = [](const std::string&) -> std::string { return ""; };
    CHECK_THROWS_AS(parse_target_description("<target><reg name=\"pc\"/></target>", none),
                    std::runtime_error);
    CHECK_THROWS_AS(parse_target_description("<reg name='pc' bitsize='x32'/>", none),
                    std::runtime_error);
    CHECK_THROWS_AS(parse_target_description("<target><reg name='pc'", none), std::runtime_error);
    // A file that includes itself.
    const auto self = [](const std::string&) { return std::string("<xi:include href='a.xml'/>"); };
    CHECK_THROWS_AS(parse_target_description("<xi:include href='a.xml'/>", self),
                    std::runtime_error);
}

}  // namespace
}  // namespace rackprof::probe
