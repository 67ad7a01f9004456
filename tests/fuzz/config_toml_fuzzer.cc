// libFuzzer target: the daemon's TOML configuration (toml++ and rackprof's checks). Bad text
// must be refused with a ConfigError (the daemon exits 2 with its message); a configuration
// that is accepted holds only boards that pass the same checks as the API's.
#include <set>
#include <string>

#include "daemon/config/config.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace rackprof;
    daemon::config::DaemonConfig config;
    try {
        config =
            daemon::config::parse_config(std::string(fuzz::as_text({data, size})), "fuzz.toml");
    } catch (const daemon::config::ConfigError& e) {
        FUZZ_CHECK(std::string(e.what()).rfind("fuzz.toml:", 0) == 0);
        return 0;
    }
    FUZZ_CHECK(config.reconnect_min.count() > 0 && config.reconnect_min <= config.reconnect_max);
    std::set<std::string> names;
    for (const daemon::config::BoardConfig& board : config.boards) {
        FUZZ_CHECK(names.insert(board.name).second);
        daemon::config::validate_board(
            board);  // throws (a crash here) if the file let a bad one in
        FUZZ_CHECK(daemon::config::board_from_json(daemon::config::board_to_json(board)) == board);
    }
    return 0;
}
