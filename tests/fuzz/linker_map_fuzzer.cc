// libFuzzer target: the linker map reader (gmon/linker_map.h), GNU ld and TI layouts. The input
// is a map's text. Refusals are LinkerMapError; what is read names code symbols in address
// order, each with a name, inside the code range it reports, and a .text section of some size.
#include <string>

#include "gmon/linker_map.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace rackprof;
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    gmon::LinkerMap map;
    try {
        map = gmon::parse_linker_map(text);
    } catch (const gmon::LinkerMapError&) {
        return 0;  // refused with a message: what a bad map must get
    }
    FUZZ_CHECK(!map.symbols.empty());
    FUZZ_CHECK(map.flavor == "GNU ld" || map.flavor == "TI");
    FUZZ_CHECK(map.code_low < map.code_high);
    for (std::size_t i = 0; i < map.symbols.size(); ++i) {
        const gmon::ElfSymbol& s = map.symbols[i];
        FUZZ_CHECK(!s.name.empty());
        FUZZ_CHECK(s.function && s.defined);
        FUZZ_CHECK(i == 0 || map.symbols[i - 1].addr <= s.addr);
        FUZZ_CHECK(s.addr >= map.code_low && s.addr < map.code_high);
        FUZZ_CHECK(s.addr + s.size <= map.code_high);
    }
    return 0;
}
