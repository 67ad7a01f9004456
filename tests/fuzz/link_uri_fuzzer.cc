// libFuzzer target: link URIs (serial://, tcp://, gdb://, file://, sim://). Refusals are
// std::invalid_argument with a message; what is accepted has a known scheme and what it needs.
#include <stdexcept>
#include <string>

#include "daemon/config/link_uri.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace rackprof;
    const std::string text(fuzz::as_text({data, size}));
    daemon::config::LinkUri uri;
    try {
        uri = daemon::config::parse_link_uri(text);
    } catch (const std::invalid_argument& e) {
        FUZZ_CHECK(*e.what() != '\0');
        return 0;
    }
    FUZZ_CHECK(uri.scheme == "serial" || uri.scheme == "tcp" || uri.scheme == "gdb" ||
               uri.scheme == "gdb+serial" || uri.scheme == "file" || uri.scheme == "sim");
    if (uri.scheme == "tcp" || uri.scheme == "gdb") {
        FUZZ_CHECK(uri.port > 0 && !uri.host.empty());
    } else {
        FUZZ_CHECK(!uri.path.empty());
    }
    // Numbers were checked when parsed: reading them again cannot throw.
    for (const char* key : {"baud", "rate", "seed"}) (void)uri.number(key, 0);
    return 0;
}
