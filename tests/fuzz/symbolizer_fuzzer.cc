// libFuzzer target: the ELF symbolizer (libelf symbols and notes, libdw line tables) and the
// gprof symbol table and profile built on it, as `convert` and the API use them. The input is
// the whole file, written to a memfd that Symbolizer::load opens by its /proc path.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "gmon/profile_pipeline.h"
#include "gmon/symbolizer.h"
#include "tests/fuzz/fuzz_input.h"

namespace rackprof::fuzz {
namespace {

// One memfd for the whole run, rewritten for each input.
std::string elf_path(const std::uint8_t* data, std::size_t size) {
    static const int fd = memfd_create("fuzz-elf", MFD_CLOEXEC);
    FUZZ_CHECK(fd >= 0);
    FUZZ_CHECK(ftruncate(fd, 0) == 0);
    for (std::size_t done = 0; done < size;) {
        const ssize_t n = pwrite(fd, data + done, size - done, static_cast<off_t>(done));
        FUZZ_CHECK(n > 0);
        done += static_cast<std::size_t>(n);
    }
    return "/proc/self/fd/" + std::to_string(fd);
}

// A few samples and calls at the ELF's own symbols, profiled as the API would.
void profile(const std::shared_ptr<const gmon::Symbolizer>& elf) {
    auto aggregate = std::make_shared<gmon::Aggregate>();
    const auto& symbols = elf->symbols();
    const std::size_t n = std::min<std::size_t>(symbols.size(), 16);
    for (std::size_t i = 0; i < n; ++i) {
        aggregate->add_pc(symbols[i].addr, i + 1);
        if (i > 0) aggregate->add_arc(symbols[i - 1].addr + 2, symbols[i].addr, i);
        (void)elf->source_of(symbols[i].addr);
    }
    (void)elf->source_of(elf->code_low());
    gmon::ProfileSource source;
    source.aggregate = aggregate;
    source.elf = elf;
    try {
        const gmon::Profile p = gmon::profile_of(source);
        FUZZ_CHECK(p.nodes.size() == p.symbols.size());
    } catch (const std::invalid_argument&) {
        // Not profilable (no usable symbols): refused with a message.
    }
}

}  // namespace
}  // namespace rackprof::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace rackprof;
    std::shared_ptr<const gmon::Symbolizer> elf;
    try {
        elf = gmon::Symbolizer::load(fuzz::elf_path(data, size));
    } catch (const gmon::ElfError&) {
        return 0;  // not a usable ELF, said so
    }
    FUZZ_CHECK(elf->code_low() < elf->code_high());
    try {
        (void)gmon::gprof_symbol_table(*elf);
        (void)gmon::gprof_line_symbol_table(*elf);  // the DWARF line programs, as gprof -l
    } catch (const std::invalid_argument&) {
        return 0;  // no .text or no function: said so
    }
    fuzz::profile(elf);
    return 0;
}
