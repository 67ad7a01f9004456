// What every fuzz target shares: how an input is cut into settings, a chunking and a payload,
// and how a broken promise ends the run (an abort, which libFuzzer reports as a crash and
// keeps the input of).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string_view>
#include <vector>

namespace rackprof::fuzz {

using Bytes = std::span<const std::uint8_t>;

// Stops the run: the input broke a promise of the code under test.
[[noreturn]] inline void violated(const char* what, const char* file, int line) {
    std::fprintf(stderr, "\n%s:%d: fuzz invariant violated: %s\n", file, line, what);
    std::abort();
}
#define FUZZ_CHECK(cond) \
    ((cond) ? static_cast<void>(0) : ::rackprof::fuzz::violated(#cond, __FILE__, __LINE__))

// An input with settings (the decoders, gmon.out):
//   byte 0         settings, whose bits each target documents
//   byte 1         low 4 bits: n, how many chunk lengths follow
//   bytes 2..2+n   chunk lengths in bytes (0 is an empty chunk), used in turn over the payload
//   the rest       the payload (wire bytes, a file)
// Shorter inputs leave the missing parts empty. Seeds are a payload behind a two-byte header
// (tests/fuzz/README.md).
struct SettingsInput {
    std::uint8_t settings = 0;
    std::vector<std::uint8_t> chunk_lengths;
    Bytes payload;
};

inline SettingsInput split_input(const std::uint8_t* data, std::size_t size) {
    SettingsInput in;
    const Bytes all(data, size);
    if (all.empty()) return in;
    in.settings = all[0];
    if (all.size() < 2) return in;
    const std::size_t n = std::min<std::size_t>(all[1] & 0x0F, all.size() - 2);
    in.chunk_lengths.assign(all.begin() + 2, all.begin() + 2 + static_cast<std::ptrdiff_t>(n));
    in.payload = all.subspan(2 + n);
    return in;
}

// The payload cut by the chunk lengths, cycled; one chunk when there are none (or all are 0).
inline std::vector<Bytes> chunks_of(Bytes payload, const std::vector<std::uint8_t>& lengths) {
    bool any = false;
    for (const auto n : lengths) any = any || n > 0;
    if (!any) return {payload};
    std::vector<Bytes> chunks;
    std::size_t pos = 0;
    for (std::size_t i = 0; pos < payload.size(); ++i) {
        const std::size_t n =
            std::min<std::size_t>(lengths[i % lengths.size()], payload.size() - pos);
        chunks.push_back(payload.subspan(pos, n));
        pos += n;
    }
    return chunks;
}

// The payload one byte per chunk: the hardest chunking for a streaming decoder.
inline std::vector<Bytes> single_bytes(Bytes payload) {
    std::vector<Bytes> chunks;
    for (std::size_t i = 0; i < payload.size(); ++i) chunks.push_back(payload.subspan(i, 1));
    return chunks;
}

inline std::string_view as_text(Bytes bytes) {
    return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

}  // namespace rackprof::fuzz
