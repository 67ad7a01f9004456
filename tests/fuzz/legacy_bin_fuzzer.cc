// libFuzzer target: the legacy binary wire format (legacy_fuzz.h has the settings bits).
#include "tests/fuzz/legacy_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    rackprof::fuzz::fuzz_legacy(data, size, false);
    return 0;
}
