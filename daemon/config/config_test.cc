#include "daemon/config/config.h"

#include <doctest/doctest.h>

#include "daemon/config/link_uri.h"

namespace rackprof::daemon::config {
namespace {

TEST_CASE("the documented keys parse") {
    const auto c = parse_config(R"(
[server]
listen = "127.0.0.1:8080"
web_root = "/opt/rackprof/web"
[storage]
path = "var/rackprof.db"
[[boards]]
name = "blinky-1"
link = "serial:///dev/ttyUSB0?baud=1500000"
protocol = "legacy"
format = "bin"
addr_bytes = 3
elf = "/path/to/app.elf"
autostart = true
[[boards]]
name = "remote"
link = "tcp://10.0.0.5:3443"
format = "hex"
addr_bytes = 4
tags = ["lab-a", "m0"]
)",
                                "test.toml");
    REQUIRE(c.boards.size() == 2);
    CHECK(c.boards[0].name == "blinky-1");
    CHECK(c.boards[0].addr_bytes == 3);
    CHECK(c.boards[0].elf == "/path/to/app.elf");
    CHECK(c.boards[1].format == "hex");
    CHECK(c.boards[1].tags == std::vector<std::string>{"lab-a", "m0"});
    CHECK(c.storage_path == "var/rackprof.db");
    CHECK(c.web_root == "/opt/rackprof/web");
    CHECK(parse_config("", "empty.toml").web_root.empty());  // found at start-up instead
}

TEST_CASE("errors name the file, line and key") {
    auto error_of = [](const std::string& text) {
        try {
            parse_config(text, "bench.toml");
        } catch (const ConfigError& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    CHECK(error_of("[[boards]]\nname = \"a\"\nlink = \"serial:///dev/x\"\naddr_bytes = 5\n") ==
          "bench.toml:4: boards[0].addr_bytes: must be 3 or 4");
    CHECK(error_of("[storage]\npaht = \"x\"\n") == "bench.toml:2: storage.paht: unknown key");
    CHECK(error_of("[[boards]]\nname = \"a\"\nlink = \"usb://x\"\n")
              .find("bench.toml:3: boards[0].link: unknown link scheme") == 0);
    CHECK(error_of("[[boards]]\nname = \"a\"\nlink = \"serial:///x\"\n[[boards]]\nname = "
                   "\"a\"\nlink = \"serial:///y\"\n")
              .find("duplicate board name") != std::string::npos);
    CHECK(error_of("[server\n").find("bench.toml:1:") == 0);
    CHECK(
        error_of("[[boards]]\nname = \"a\"\nlink = \"serial:///x\"\nprotocol = \"swv\"\n")
            .find("bench.toml:4: boards[0].protocol: must be \"legacy\", \"framed\" or \"itm\"") ==
        0);
    CHECK(error_of("[[boards]]\nname = \"a\"\nlink = \"serial:///x\"\nprotocol = "
                   "\"framed\"\nformat = \"hex\"\n")
              .find("bench.toml:5: boards[0].format: the framed protocol is binary") == 0);
}

TEST_CASE("retention rules: whole days, 0 for forever, anything else refused with its key") {
    const auto c = parse_config(
        "[storage]\nkeep_raw_days = 30\nkeep_sessions_days = 365\n[fleet]\nkeep_sessions_days "
        "= 400\n",
        "r.toml");
    CHECK(c.keep_raw_days == 30);
    CHECK(c.keep_sessions_days == 365);
    CHECK(c.fleet.keep_sessions_days == 400);
    const auto none = parse_config("[storage]\npath = \"x.db\"\n", "r.toml");
    CHECK(none.keep_raw_days == 0);  // absent: forever
    CHECK(none.keep_sessions_days == 0);
    CHECK(none.fleet.keep_sessions_days == 0);
    auto error_of = [](const std::string& text) {
        try {
            parse_config(text, "r.toml");
        } catch (const ConfigError& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    CHECK(error_of("[storage]\nkeep_raw_days = -1\n") ==
          "r.toml:2: storage.keep_raw_days: must be a number of days from 1 to 36500, or 0 to "
          "keep forever");
    CHECK(error_of("[storage]\nkeep_sessions_days = 99999\n")
              .find("r.toml:2: storage.keep_sessions_days: must be a number of days") == 0);
    CHECK(error_of("[storage]\nkeep_raw_days = 1.5\n") ==
          "r.toml:2: storage.keep_raw_days: must be an integer");
    CHECK(error_of("[storage]\nkeep_raw_days = \"30d\"\n") ==
          "r.toml:2: storage.keep_raw_days: must be an integer");
    CHECK(error_of("[fleet]\nkeep_sessions_days = -5\n")
              .find("r.toml:2: fleet.keep_sessions_days: must be a number of days") == 0);
    CHECK(error_of("[storage]\nkeep_raw = 3\n") == "r.toml:2: storage.keep_raw: unknown key");
}

TEST_CASE("a framed board: 4-byte addresses until the HELLO, unless the config says") {
    const auto c = parse_config(
        "[[boards]]\nname = \"f\"\nlink = \"serial:///x\"\nprotocol = \"framed\"\n"
        "[[boards]]\nname = \"g\"\nlink = \"serial:///y\"\nprotocol = \"framed\"\n"
        "addr_bytes = 3\n[[boards]]\nname = \"l\"\nlink = \"serial:///z\"\n",
        "test.toml");
    REQUIRE(c.boards.size() == 3);
    CHECK(c.boards[0].protocol == "framed");
    CHECK(c.boards[0].addr_bytes == 4);
    CHECK(c.boards[1].addr_bytes == 3);
    CHECK(c.boards[2].protocol == "legacy");
    CHECK(c.boards[2].addr_bytes == 3);
    const auto j =
        board_from_json({{"name", "h"}, {"link", "serial:///x"}, {"protocol", "framed"}});
    CHECK(j.addr_bytes == 4);
}

TEST_CASE("a gdb:// board: a probe's GDB server, sampled at a rate, its samples framed") {
    const auto g = parse_link_uri("gdb://127.0.0.1:3333?rate=1000");
    CHECK(g.scheme == "gdb");
    CHECK(g.host == "127.0.0.1");
    CHECK(g.port == 3333);
    CHECK(g.number("rate", 0) == 1000);
    CHECK_THROWS_WITH(parse_link_uri("gdb://127.0.0.1:3333?rate=0"),
                      doctest::Contains("rate must be 1.."));
    CHECK_THROWS(parse_link_uri("gdb://127.0.0.1:3333?rate=20000"));
    CHECK_THROWS_WITH(parse_link_uri("gdb://probe"), doctest::Contains("gdb links need host:port"));
    CHECK_THROWS_WITH(parse_link_uri("gdb://127.0.0.1:22@10.0.0.1:3333"),
                      doctest::Contains("bad gdb host"));
    CHECK_THROWS(parse_link_uri("gdb://127.0.0.1:3333?baud=9600"));
    // Framed unless said otherwise, and nothing else: rackprof makes the samples itself.
    const auto c =
        parse_config("[[boards]]\nname = \"p\"\nlink = \"gdb://127.0.0.1:3333\"\n", "t.toml");
    CHECK(c.boards[0].protocol == "framed");
    CHECK(c.boards[0].addr_bytes == 4);
    CHECK(board_from_json({{"name", "p"}, {"link", "gdb://127.0.0.1:2331"}}).protocol == "framed");
    CHECK_THROWS_WITH(parse_config("[[boards]]\nname = \"p\"\nlink = \"gdb://127.0.0.1:3333\"\n"
                                   "protocol = \"legacy\"\n",
                                   "t.toml"),
                      doctest::Contains("must be \"framed\""));
    CHECK_THROWS_WITH(
        board_from_json({{"name", "p"}, {"link", "gdb://127.0.0.1:2331"}, {"addr_bytes", 3}}),
        doctest::Contains("must be 4"));
}

TEST_CASE("gdb:// options, and gdb+serial:// for a GDB server on a serial port") {
    const auto g =
        parse_link_uri("gdb://127.0.0.1:3333?rate=500&stacks=1&stack_bytes=2048&verify=0");
    CHECK(g.is_probe());
    CHECK(g.number("stacks", 0) == 1);
    CHECK(g.number("stack_bytes", 0) == 2048);
    CHECK(g.number("verify", 1) == 0);
    CHECK_THROWS_WITH(parse_link_uri("gdb://127.0.0.1:3333?stacks=2"),
                      doctest::Contains("stacks must be 0..1"));
    CHECK_THROWS(parse_link_uri("gdb://127.0.0.1:3333?stack_bytes=20"));
    CHECK_THROWS_WITH(parse_link_uri("gdb://127.0.0.1:3333?mode=running"),
                      doctest::Contains("samples by halting only"));
    CHECK(parse_link_uri("gdb://127.0.0.1:3333?mode=halt").is_probe());
    // stacks=1 unwinds with the ELF's CFI: a board without its ELF is refused, key named.
    CHECK_THROWS_WITH(board_from_json({{"name", "p"}, {"link", "gdb://127.0.0.1:2331?stacks=1"}}),
                      doctest::Contains("needs its ELF"));

    const auto s = parse_link_uri("gdb+serial:///dev/ttyACM0?rate=1000&stacks=1");
    CHECK(s.scheme == "gdb+serial");
    CHECK(s.path == "/dev/ttyACM0");
    CHECK(s.is_probe());
    CHECK(s.number("rate", 0) == 1000);
    CHECK_THROWS_WITH(parse_link_uri("gdb+serial://ttyACM0"), doctest::Contains("absolute"));
    CHECK_THROWS(parse_link_uri("gdb+serial:///dev/ttyACM0?baud=115200"));
    CHECK_THROWS(parse_link_uri("gdb+serial:///dev/ttyACM0?rate=0"));
    CHECK(board_from_json({{"name", "p"}, {"link", "gdb+serial:///dev/ttyACM0"}}).protocol ==
          "framed");
}

TEST_CASE("an itm board: the issue's keys, each checked with its key named") {
    const auto c = parse_config(R"([[boards]]
name = "m4-swo"
link = "tcp://127.0.0.1:3443"
protocol = "itm"
tpiu = true
tpiu_stream = 2
framed_port = 1
orbstat_port = 30
console_port = 0
elf = "/path/to/app.elf"
)",
                                "swo.toml");
    REQUIRE(c.boards.size() == 1);
    const BoardConfig& b = c.boards[0];
    CHECK(b.protocol == "itm");
    CHECK(b.tpiu);
    CHECK(b.tpiu_stream == 2);
    CHECK(b.framed_port == 1);
    CHECK(b.orbstat_port == 30);
    CHECK(b.console_port == 0);
    CHECK(b.addr_bytes == 4);
    CHECK(board_from_json(board_to_json(b)) == b);

    auto error_of = [](const std::string& keys) {
        try {
            parse_config("[[boards]]\nname = \"a\"\nlink = \"tcp://h:1\"\n" + keys, "b.toml");
        } catch (const ConfigError& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    CHECK(error_of("protocol = \"itm\"\nconsole_port = 256\n") ==
          "b.toml:5: boards[0].console_port: must be an ITM stimulus port, 0..255");
    CHECK(error_of("protocol = \"itm\"\nframed_port = -3\n") ==
          "b.toml:5: boards[0].framed_port: must be an ITM stimulus port, 0..255");
    CHECK(error_of("protocol = \"itm\"\nframed_port = 1\nconsole_port = 1\n") ==
          "b.toml:6: boards[0].console_port: port 1 already has another use on this board");
    CHECK(error_of("protocol = \"itm\"\ntpiu = true\ntpiu_stream = 112\n") ==
          "b.toml:6: boards[0].tpiu_stream: must be 1..111 (the TPIU's trace source IDs)");
    CHECK(error_of("protocol = \"itm\"\ntpiu_stream = 0\n") ==
          "b.toml:5: boards[0].tpiu_stream: must be 1..111 (the TPIU's trace source IDs)");
    CHECK(error_of("protocol = \"itm\"\nformat = \"hex\"\n") ==
          "b.toml:5: boards[0].format: the itm protocol is binary: must be \"bin\"");
    CHECK(error_of("protocol = \"framed\"\nconsole_port = 0\n") ==
          "b.toml:5: boards[0].console_port: only for protocol = \"itm\"");
    CHECK(error_of("tpiu = true\n") == "b.toml:4: boards[0].tpiu: only for protocol = \"itm\"");
    CHECK(error_of("protocol = \"itm\"\ntpiu = 1\n") ==
          "b.toml:5: boards[0].tpiu: must be true or false");

    nlohmann::json j = {{"name", "s"},
                        {"link", "tcp://h:1"},
                        {"protocol", "itm"},
                        {"orbstat_port", 30},
                        {"console_port", nullptr}};
    const auto from_api = board_from_json(j);
    CHECK(from_api.orbstat_port == 30);
    CHECK_FALSE(from_api.console_port.has_value());
    j["console_port"] = 30;
    try {
        board_from_json(j);
        FAIL("two uses of port 30 accepted");
    } catch (const BoardFieldError& e) {
        CHECK(e.key() == "console_port");
    }
    CHECK_THROWS_AS(board_from_json({{"name", "s"}, {"link", "tcp://h:1"}, {"framed_port", 1}}),
                    BoardFieldError);
}

TEST_CASE("link URIs") {
    const auto s = parse_link_uri("serial:///dev/ttyUSB0?baud=1500000");
    CHECK(s.scheme == "serial");
    CHECK(s.path == "/dev/ttyUSB0");
    CHECK(s.number("baud", 0) == 1500000);
    const auto t = parse_link_uri("tcp://127.0.0.1:3443");
    CHECK(t.host == "127.0.0.1");
    CHECK(t.port == 3443);
    CHECK(parse_link_uri("file:///tmp/cap.txt?pace=realtime&rate=1000").param("pace", "") ==
          "realtime");
    CHECK(parse_link_uri("sim://blinky?rate=5000").path == "blinky");
    CHECK_THROWS_AS(parse_link_uri("tcp://host"), std::invalid_argument);
    CHECK_THROWS_AS(parse_link_uri("serial://relative"), std::invalid_argument);
    CHECK_THROWS_AS(parse_link_uri("serial:///dev/x?baud=fast"), std::invalid_argument);
    CHECK_THROWS_AS(parse_link_uri("serial:///dev/x?parity=odd"), std::invalid_argument);
}

TEST_CASE("the embedded default is a small simulated rack") {
    const auto c = embedded_default_config();
    CHECK(c.boards.size() == 3);
    for (const auto& b : c.boards) {
        CHECK(parse_link_uri(b.link).scheme == "sim");
        CHECK_NOTHROW(validate_board(b));
    }
    CHECK(c.boards[2].protocol == "framed");
}

TEST_CASE("link numbers are bounded where they are parsed") {
    CHECK_THROWS_WITH(parse_link_uri("file:///x?pace=realtime&rate=0"),
                      doctest::Contains("rate must be 1.."));
    CHECK_THROWS(parse_link_uri("sim://blinky?rate=999999999999"));
    CHECK_THROWS(parse_link_uri("sim://blinky?rate=0"));
    CHECK_THROWS(parse_link_uri("sim://blinky?arc_cache=100000000"));
    CHECK_THROWS(parse_link_uri("serial:///dev/ttyUSB0?baud=0"));
    CHECK_THROWS(parse_link_uri("file:///x?chunk=0"));
    CHECK_NOTHROW(parse_link_uri("sim://blinky?rate=10000000"));
    CHECK_NOTHROW(parse_link_uri("file:///x?pace=realtime&rate=1"));
}

TEST_CASE("link paths cannot walk out of a folder or carry control characters") {
    CHECK_THROWS_WITH(parse_link_uri("serial:///dev/rackprof/../../etc/passwd"),
                      doctest::Contains(".."));
    CHECK_THROWS(parse_link_uri("file:///a/..?pace=fast"));
    CHECK_THROWS(parse_link_uri(std::string("sim://blinky\r\n")));
    CHECK_THROWS(parse_link_uri(std::string("serial:///dev/tty\0USB0", 21)));
    CHECK_NOTHROW(parse_link_uri("file:///a/..b/c"));  // a name, not a step up
}

TEST_CASE("the API link policy allows what the configuration lists, nothing else") {
    const LinkPolicy policy{default_api_links()};
    CHECK(policy.allows("serial:///dev/rackprof/A9F3?baud=1500000"));
    CHECK(policy.allows("serial:///dev/ttyUSB3"));
    CHECK(policy.allows("tcp://127.0.0.1:3443"));
    CHECK(policy.allows("tcp://[::1]:3443"));
    CHECK(policy.allows("sim://blinky?rate=20000"));
    CHECK(policy.allows("gdb://127.0.0.1:3333?rate=1000"));  // as tcp://: loopback only
    CHECK(policy.allows("gdb://[::1]:2331"));
    CHECK_FALSE(policy.allows("gdb://10.0.0.5:3333"));
    CHECK_FALSE(policy.allows("file:///etc/passwd?pace=fast"));
    CHECK_FALSE(policy.allows("tcp://10.0.0.5:3443"));
    CHECK_FALSE(policy.allows("serial:///etc/passwd"));
    CHECK_FALSE(policy.allows("serial:///dev/rackprof/../../etc/passwd"));
    // A glob's '*' sees a port, never more host: these name other hosts than 127.0.0.1.
    CHECK_FALSE(policy.allows("tcp://127.0.0.1:1.evil.example:9000"));
    CHECK_FALSE(policy.allows("tcp://127.0.0.1:22@10.0.0.1:80"));
    CHECK_THROWS_WITH(parse_link_uri("tcp://127.0.0.1:22@10.0.0.1:80"),
                      doctest::Contains("bad tcp host '127.0.0.1:22@10.0.0.1'"));
    CHECK_THROWS_AS(parse_link_uri("tcp://[::1:3443"), std::invalid_argument);
    CHECK_THROWS_AS(parse_link_uri("tcp://a b:3443"), std::invalid_argument);
    CHECK_NOTHROW(parse_link_uri("tcp://bench-7.lab.example:3443"));
    CHECK_THROWS_WITH(policy.check("file:///etc/shadow"), doctest::Contains("server.api_links"));
    CHECK_FALSE(LinkPolicy{}.allows("sim://blinky"));  // an empty list: no boards over HTTP

    const auto c = parse_config("[server]\napi_links = [\"file:///srv/captures/*\"]\n", "t.toml");
    CHECK(c.api_links == std::vector<std::string>{"file:///srv/captures/*"});
    CHECK(parse_config("", "t.toml").api_links == default_api_links());
    CHECK_THROWS_AS(parse_config("[server]\napi_links = \"sim://*\"\n", "t.toml"), ConfigError);
}

TEST_CASE("numbers out of range are refused, not narrowed into range") {
    auto board = [](const std::string& extra) {
        return parse_config("[[boards]]\nname = \"b\"\nlink = \"sim://blinky\"\n" + extra,
                            "t.toml");
    };
    CHECK_THROWS_WITH_AS(board("addr_bytes = 4294967299\n"), doctest::Contains("addr_bytes"),
                         ConfigError);
    CHECK_THROWS_AS(board("addr_bytes = -4294967293\n"), ConfigError);
    CHECK_THROWS_AS(board("protocol = \"itm\"\ntpiu_stream = 4294967297\n"), ConfigError);
    auto json_board = [](const nlohmann::json& j) { return board_from_json(j); };
    CHECK_THROWS_AS(json_board({{"name", "b"}, {"link", "sim://x"}, {"addr_bytes", 4294967299ULL}}),
                    BoardFieldError);
    CHECK_THROWS_AS(
        json_board({{"name", "b"}, {"link", "sim://x"}, {"addr_bytes", 18446744073709551615ULL}}),
        BoardFieldError);
    CHECK_THROWS_AS(json_board({{"name", "b"},
                                {"link", "sim://x"},
                                {"protocol", "itm"},
                                {"console_port", 4294967296LL}}),
                    BoardFieldError);
    CHECK_THROWS_WITH_AS(parse_config("[links]\nreconnect_min_ms = 1\nreconnect_max_ms = "
                                      "9223372036854775807\n",
                                      "t.toml"),
                         doctest::Contains("3600000"), ConfigError);
    CHECK_THROWS_AS(parse_config("[server]\nlisten = \"localhost:8080\"\n", "t.toml"), ConfigError);
    CHECK_THROWS_AS(parse_config("[server]\nlisten = \"127.0.0.1:70000\"\n", "t.toml"),
                    ConfigError);
    CHECK_NOTHROW(parse_config("[server]\nlisten = \"[::1]:0\"\n", "t.toml"));
}

TEST_CASE("board names and tags cannot carry header or log injections") {
    auto named = [](const std::string& name) {
        return board_from_json({{"name", name}, {"link", "sim://blinky"}});
    };
    CHECK_THROWS_AS(named("x\r\nSet-Cookie: a=b"), BoardFieldError);
    CHECK_THROWS_AS(named(std::string("x\0y", 3)), BoardFieldError);
    CHECK_THROWS_AS(named("a\"b"), BoardFieldError);
    CHECK_THROWS_AS(named("caf\xc3\xa9"), BoardFieldError);
    CHECK_NOTHROW(named("rack-2.slot_7:m0+@lab"));
    CHECK_THROWS_AS(board_from_json({{"name", "b"}, {"link", "sim://x"}, {"tags", {"a\nb"}}}),
                    BoardFieldError);
    CHECK_NOTHROW(
        board_from_json({{"name", "b"}, {"link", "sim://x"}, {"tags", {"rack=3", "hw/revB"}}}));
    CHECK_THROWS_AS(board_from_json({{"name", "b"}, {"link", "sim://x"}, {"elf", "/a\nb.elf"}}),
                    BoardFieldError);
    CHECK(printable("ok\r\n\\\x01") == "ok\\x0d\\x0a\\x5c\\x01");
}

TEST_CASE("[fleet]: the URL, bench and TLS settings; a password in the URL is refused") {
    const auto c = parse_config(R"([fleet]
url = "postgresql://rackprof@db.lab:5432/fleet?sslmode=verify-full"
bench = "bench-3"
password_file = "/etc/rackprof/fleet-password"
sslrootcert = "/etc/rackprof/ca.pem"
push_interval_ms = 500
)",
                                "bench.toml");
    CHECK(c.fleet.url == "postgresql://rackprof@db.lab:5432/fleet?sslmode=verify-full");
    CHECK(c.fleet.bench == "bench-3");
    CHECK(c.fleet.password_file == "/etc/rackprof/fleet-password");
    CHECK(c.fleet.sslrootcert == "/etc/rackprof/ca.pem");
    CHECK(c.fleet.push_interval == std::chrono::milliseconds(500));
    CHECK(parse_config("", "x.toml").fleet.url.empty());

    auto error_of = [](const std::string& text) {
        try {
            parse_config(text, "bench.toml");
        } catch (const ConfigError& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    const std::string in_userinfo =
        error_of("[fleet]\nurl = \"postgresql://rackprof:hunter2@db/fleet\"\n");
    CHECK(in_userinfo.find("bench.toml:2: fleet.url: holds a password") == 0);
    CHECK(in_userinfo.find("hunter2") == std::string::npos);
    CHECK(error_of("[fleet]\nurl = \"postgresql://db/fleet?sslmode=require&password=x\"\n")
              .find("fleet.url: holds a password") != std::string::npos);
    CHECK(error_of("[fleet]\nurl = \"mysql://db/fleet\"\n").find("fleet.url: must be a") !=
          std::string::npos);
    CHECK(error_of("[fleet]\nbench = \"a b\"\n").find("fleet.bench") != std::string::npos);
    CHECK(error_of("[fleet]\nuser = \"x\"\n") == "bench.toml:2: fleet.user: unknown key");
}

}  // namespace
}  // namespace rackprof::daemon::config
