// The legacy decoder (binary or hex-ASCII) through the registry. Settings bits:
//   bit 0     address width 4 (else 3)
//   bit 1     a code range from the ELF is known (tightens resync)
//   bits 2-3  which range: the thesis' small flash, its upper half, a 64 KiB flash, an STM32's
#pragma once

#include <algorithm>
#include <array>

#include "tests/fuzz/decoder_runs.h"

namespace rackprof::fuzz {

inline protocol::WireSpec legacy_spec(std::uint8_t settings, bool hex) {
    static constexpr std::array<protocol::AddressRange, 4> kRanges = {
        {{0x0000, 0x2000}, {0x1000, 0x2000}, {0x0000, 0x10000}, {0x08000000, 0x08100000}}};
    std::optional<protocol::AddressRange> range;
    if (settings & 2) range = kRanges[(settings >> 2) & 3];
    return {"legacy", hex ? "hex" : "bin", settings & 1 ? 4 : 3, range};
}

inline void fuzz_legacy(const std::uint8_t* data, std::size_t size, bool hex) {
    const SettingsInput in = split_input(data, size);
    const protocol::WireSpec spec = legacy_spec(in.settings, hex);
    const auto runs = run_chunkings(spec, in);
    for (const DecoderRun& run : runs) FUZZ_CHECK(run.records == runs.front().records);

    // Every byte is in a record or discarded; in text, white space between digits carries no
    // data and is neither.
    const DecoderRun& run = runs.front();
    const auto width = static_cast<std::uint64_t>(spec.addr_bytes);
    const std::uint64_t record_bytes =
        (1 + 2 * width) * run.stats.arcs + (1 + width) * run.stats.pc_samples;
    std::uint64_t spaces = 0;
    if (hex) {
        spaces = static_cast<std::uint64_t>(
            std::count_if(in.payload.begin(), in.payload.end(),
                          [](std::uint8_t c) { return c == ' ' || (c >= '\t' && c <= '\r'); }));
    }
    FUZZ_CHECK(run.stats.bytes_in ==
               run.stats.bytes_discarded + (hex ? 2 : 1) * record_bytes + spaces);
    FUZZ_CHECK(run.events.empty());
    for (const protocol::Record& r : run.records) {
        FUZZ_CHECK(r.count == 1);
        if (spec.code_range) {
            FUZZ_CHECK(spec.code_range->contains(r.self_pc));
            FUZZ_CHECK(r.kind != protocol::RecordKind::kArc ||
                       spec.code_range->contains(r.from_pc));
        }
    }
}

}  // namespace rackprof::fuzz
