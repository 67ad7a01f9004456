// libFuzzer target: a board as JSON (the API's POST/PUT bodies and the database's stored
// boards). Refusals are BoardFieldError; an accepted board survives to_json/from_json.
#include <string>

#include "daemon/config/config.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace rackprof;
    const auto json = nlohmann::json::parse(fuzz::as_text({data, size}), nullptr, false);
    if (json.is_discarded()) return 0;
    daemon::config::BoardConfig board;
    try {
        board = daemon::config::board_from_json(json);
    } catch (const daemon::config::BoardFieldError&) {
        return 0;
    }
    const auto again = daemon::config::board_to_json(board);
    FUZZ_CHECK(daemon::config::board_from_json(again) == board);
    FUZZ_CHECK(daemon::config::board_from_json(nlohmann::json::parse(again.dump())) == board);
    return 0;
}
