#include "protocol/framed_format.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace rackprof::protocol {

namespace {

// kCrcTables[k][x]: the CRC register after shifting byte x and then k zero bytes through it
// (from zero). The CRC is linear, so sixteen bytes b0..b15 advance the register c to
// kCrcTables[15][hi(c) ^ b0] ^ kCrcTables[14][lo(c) ^ b1] ^ kCrcTables[13][b2] ^ ... ^
// kCrcTables[0][b15]: independent look-ups instead of a chain of sixteen ("slicing by 16",
// 8 KiB of tables), which keeps the check of a frame well below the cost of reading it.
using CrcTables = std::array<std::array<std::uint16_t, 256>, 16>;

constexpr CrcTables make_crc_tables() {
    CrcTables t{};
    for (unsigned i = 0; i < 256; ++i) {
        auto crc = static_cast<std::uint16_t>(i << 8);
        for (int bit = 0; bit < 8; ++bit) {
            crc = static_cast<std::uint16_t>(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
        }
        t[0][i] = crc;
    }
    for (std::size_t k = 1; k < t.size(); ++k) {
        for (unsigned i = 0; i < 256; ++i) {
            const std::uint16_t prev = t[k - 1][i];
            t[k][i] = static_cast<std::uint16_t>((prev << 8) ^ t[0][prev >> 8]);
        }
    }
    return t;
}
constexpr CrcTables kCrcTables = make_crc_tables();

void put_le(std::uint32_t value, int width, std::vector<std::uint8_t>& out) {
    for (int i = 0; i < width; ++i) out.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
}

// The CRC register after `data`, from `crc`.
std::uint16_t crc16_update(std::uint16_t crc, const std::uint8_t* p, std::size_t n) {
    const auto& t = kCrcTables;
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        crc = static_cast<std::uint16_t>(
            t[15][(crc >> 8) ^ p[i]] ^ t[14][(crc & 0xFF) ^ p[i + 1]] ^ t[13][p[i + 2]] ^
            t[12][p[i + 3]] ^ t[11][p[i + 4]] ^ t[10][p[i + 5]] ^ t[9][p[i + 6]] ^ t[8][p[i + 7]] ^
            t[7][p[i + 8]] ^ t[6][p[i + 9]] ^ t[5][p[i + 10]] ^ t[4][p[i + 11]] ^ t[3][p[i + 12]] ^
            t[2][p[i + 13]] ^ t[1][p[i + 14]] ^ t[0][p[i + 15]]);
    }
    if (i + 8 <= n) {
        crc = static_cast<std::uint16_t>(t[7][(crc >> 8) ^ p[i]] ^ t[6][(crc & 0xFF) ^ p[i + 1]] ^
                                         t[5][p[i + 2]] ^ t[4][p[i + 3]] ^ t[3][p[i + 4]] ^
                                         t[2][p[i + 5]] ^ t[1][p[i + 6]] ^ t[0][p[i + 7]]);
        i += 8;
    }
    for (; i < n; ++i) {
        crc = static_cast<std::uint16_t>((crc << 8) ^ t[0][((crc >> 8) ^ p[i]) & 0xFF]);
    }
    return crc;
}

#if defined(__x86_64__)
// x^n mod P over GF(2), P = x^16 + x^12 + x^5 + 1.
constexpr std::uint64_t x_power_mod(unsigned n) {
    std::uint32_t r = 1;
    for (unsigned i = 0; i < n; ++i) {
        r <<= 1;
        if (r & 0x10000u) r ^= 0x11021u;
    }
    return r;
}

// Folding with carry-less multiplies (Intel's "Fast CRC Computation Using PCLMULQDQ"): each
// 16 bytes taken MSB first are a polynomial R of degree < 128; the block after it lies 128
// bits lower, so R * x^128 = R_hi * x^192 + R_lo * x^128 is congruent, mod P, to
// R_hi * (x^192 mod P) + R_lo * (x^128 mod P), a polynomial of degree < 80 added into the next
// block. The 16 bytes left at the end have the frame's CRC and go through the table. The
// CRC's initial 0xFFFF is the same as inverting the first 16 bits. A multiply per 8 bytes,
// none waiting on a table load: several times the tables' speed.
#define RACKPROF_FOLDING __attribute__((target("pclmul,ssse3")))

// 16 bytes as a polynomial, the first byte's top bit its highest coefficient.
RACKPROF_FOLDING __m128i msb_first(const std::uint8_t* p) {
    __m128i bytes;
    std::memcpy(&bytes, p, sizeof bytes);
    return _mm_shuffle_epi8(bytes,
                            _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
}

// (x^(d+64) mod P, x^d mod P): what moves a block d bits further down the message.
template <unsigned D>
RACKPROF_FOLDING __m128i fold_constants() {
    constexpr std::uint64_t high = x_power_mod(D + 64), low = x_power_mod(D);
    return _mm_set_epi64x(static_cast<long long>(high), static_cast<long long>(low));
}

// r * x^d, mod P, as a polynomial of degree < 80 (r_hi * (x^(d+64) mod P) + r_lo * (x^d mod P)).
RACKPROF_FOLDING __m128i fold(__m128i r, __m128i constants) {
    return _mm_xor_si128(_mm_clmulepi64_si128(r, constants, 0x11),
                         _mm_clmulepi64_si128(r, constants, 0x00));
}

// n >= 32. Four blocks are carried at once (each folded 512 bits on), so that the multiplies'
// latency overlaps, then folded into one; a tail of t < 16 bytes joins the last block by
// shifting it t bytes up (its top t bytes folded back in) and putting the tail below.
RACKPROF_FOLDING std::uint16_t crc16_folded(const std::uint8_t* p, std::size_t n) {
    const __m128i by128 = fold_constants<128>();
    const __m128i inverted = _mm_set_epi64x(static_cast<long long>(0xFFFFull << 48), 0);
    __m128i r = _mm_xor_si128(msb_first(p), inverted);
    std::size_t i = 16;
    if (n >= 128) {
        const __m128i by512 = fold_constants<512>();
        __m128i b = msb_first(p + 16), c = msb_first(p + 32), d = msb_first(p + 48);
        for (i = 64; i + 64 <= n; i += 64) {
            r = _mm_xor_si128(msb_first(p + i), fold(r, by512));
            b = _mm_xor_si128(msb_first(p + i + 16), fold(b, by512));
            c = _mm_xor_si128(msb_first(p + i + 32), fold(c, by512));
            d = _mm_xor_si128(msb_first(p + i + 48), fold(d, by512));
        }
        r = _mm_xor_si128(b, fold(r, by128));
        r = _mm_xor_si128(c, fold(r, by128));
        r = _mm_xor_si128(d, fold(r, by128));
    }
    for (; i + 16 <= n; i += 16) r = _mm_xor_si128(msb_first(p + i), fold(r, by128));
    if (const auto t = static_cast<char>(n - i); t > 0) {
        const __m128i iota = _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        const __m128i shift = _mm_set1_epi8(t);
        // Byte j of r * x^8t is byte j - t of r (a negative index selects zero) ...
        const __m128i up = _mm_shuffle_epi8(r, _mm_sub_epi8(iota, shift));
        // ... and what rises past x^128 is byte j + 16 - t of r, for j < t.
        __m128i over_index = _mm_add_epi8(iota, _mm_sub_epi8(_mm_set1_epi8(16), shift));
        over_index = _mm_or_si128(over_index, _mm_cmpgt_epi8(over_index, _mm_set1_epi8(15)));
        const __m128i over = _mm_shuffle_epi8(r, over_index);
        // The tail: the lowest t bytes of the message's last 16.
        const __m128i tail = _mm_and_si128(msb_first(p + n - 16), _mm_cmpgt_epi8(shift, iota));
        r = _mm_xor_si128(_mm_or_si128(up, tail), fold(over, by128));
    }
    std::array<std::uint8_t, 16> last;
    std::memcpy(last.data(), &r, last.size());
    const __m128i in_order = msb_first(last.data());  // back to bytes, first byte first
    std::memcpy(last.data(), &in_order, last.size());
    return crc16_update(0, last.data(), last.size());
}

bool cpu_folds() {
    static const bool supported =
        __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("ssse3");
    return supported;
}
#undef RACKPROF_FOLDING
#endif

}  // namespace

std::uint16_t crc16_ccitt_false_by_table(std::span<const std::uint8_t> data) {
    return crc16_update(0xFFFF, data.data(), data.size());
}

std::uint16_t crc16_ccitt_false(std::span<const std::uint8_t> data) {
#if defined(__x86_64__)
    // Below two blocks folding saves nothing.
    if (data.size() >= 32 && cpu_folds()) return crc16_folded(data.data(), data.size());
#endif
    return crc16_ccitt_false_by_table(data);
}

void cobs_encode(std::span<const std::uint8_t> data, std::vector<std::uint8_t>& out) {
    std::size_t code_at = out.size();
    out.push_back(0);
    std::uint8_t code = 1;
    for (std::uint8_t b : data) {
        if (b != 0) {
            out.push_back(b);
            ++code;
        }
        if (b == 0 || code == 0xFF) {
            out[code_at] = code;
            code_at = out.size();
            out.push_back(0);
            code = 1;
        }
    }
    out[code_at] = code;
}

bool cobs_decode(std::span<const std::uint8_t> encoded, std::vector<std::uint8_t>& out) {
    out.clear();
    if (std::memchr(encoded.data(), 0, encoded.size()) != nullptr) return false;
    out.resize(encoded.size() + kCobsSlack);  // never longer than its encoding
    const auto size = cobs_decode_unchecked(encoded, out.data());
    out.resize(size.value_or(0));
    return size.has_value();
}

namespace {

// Block by block, for encodings with a full block (code 0xFF) before their end.
std::optional<std::size_t> cobs_decode_blocks(std::span<const std::uint8_t> encoded,
                                              std::uint8_t* out) {
    const std::uint8_t* const src = encoded.data();
    const std::size_t n = encoded.size();
    std::size_t pos = 0;
    std::size_t len = 0;
    while (pos < n) {
        const std::uint8_t code = src[pos++];
        const std::size_t run = code - 1u;
        if (code == 0 || run > n - pos) return std::nullopt;
        std::memcpy(out + len, src + pos, run);
        len += run;
        pos += run;
        // A block shorter than 254 bytes stood for a zero, unless it ends the frame.
        if (code != 0xFF && pos < n) out[len++] = 0;
    }
    return len;
}

// One frame's chain of COBS codes, walked a code at a time. Without full blocks every code
// byte after the first stands for a zero in its own place, one byte earlier in the output: the
// frame is copied once, then the zeros are put in along the chain. Runs are short (addresses
// hold zeros), so this beats a copy per run; each step waits on the load of the one before.
template <CodeRuns kRuns>
class CodeChain {
  public:
    enum class State { kWalking, kDone, kInvalid, kFullBlock };

    CodeChain() = default;  // an empty frame
    CodeChain(std::span<const std::uint8_t> encoded, std::uint8_t* out)
        : src_(encoded.data()), n_(encoded.size()), out_(out) {
        if (n_ == 0) return;
        state_ = State::kWalking;
        std::memcpy(out, src_ + 1, n_ - 1);
    }
    // One code further; false once the chain has ended (result() says how).
    bool step() {
        const std::uint8_t code = src_[pos_];
        // Four codes alike are taken at once. The three further codes are loaded side by side
        // from addresses known after the first, so the chain waits on one load per four codes.
        // Only where runs are likely: elsewhere the check mostly fails, a mispredicted branch.
        if (const std::size_t next4 = pos_ + 4 * std::size_t{code};
            kRuns == CodeRuns::kLikely && next4 < n_ &&
            (static_cast<std::uint8_t>(code + 1) >= 2) & (src_[pos_ + code] == code) &
                (src_[pos_ + 2 * code] == code) & (src_[pos_ + 3 * code] == code)) {
            out_[pos_ + code - 1] = 0;
            out_[pos_ + 2 * code - 1] = 0;
            out_[pos_ + 3 * code - 1] = 0;
            out_[next4 - 1] = 0;
            pos_ = next4;
            return true;
        }
        const std::size_t next = pos_ + code;
        // One branch for the three ways a chain ends (code 0 or 0xFF: 0xFF + 1 and 0 + 1 wrap
        // to below 2), the common step needing no more.
        if ((next >= n_) | (static_cast<std::uint8_t>(code + 1) < 2)) return end(code, next);
        out_[next - 1] = 0;
        pos_ = next;
        return true;
    }
    bool walking() const { return state_ == State::kWalking; }
    // The decoded length, or nothing when a code points past the end.
    std::optional<std::size_t> result(std::span<const std::uint8_t> encoded) const {
        switch (state_) {
            case State::kDone:
                return n_ == 0 ? 0 : n_ - 1;
            case State::kFullBlock:
                return cobs_decode_blocks(encoded, out_);
            default:
                return std::nullopt;
        }
    }

  private:
    bool end(std::uint8_t code, std::size_t next) {
        if (code == 0 || next > n_)
            state_ = State::kInvalid;
        else if (next == n_)
            state_ = State::kDone;
        else
            state_ = State::kFullBlock;  // no zero: the rest shifts
        return false;
    }
    const std::uint8_t* src_ = nullptr;
    std::size_t n_ = 0;
    std::uint8_t* out_ = nullptr;
    std::size_t pos_ = 0;
    State state_ = State::kDone;
};

}  // namespace

namespace {

template <CodeRuns kRuns>
std::optional<std::size_t> decode_alone(std::span<const std::uint8_t> encoded, std::uint8_t* out) {
    CodeChain<kRuns> chain(encoded, out);
    while (chain.walking() && chain.step()) {
    }
    return chain.result(encoded);
}

// One step of each chain (all walking); whether all of them still walk.
template <typename Chains, std::size_t... I>
bool step_each(Chains& chains, std::index_sequence<I...>) {
    return (static_cast<int>(chains[I].step()) & ...) != 0;
}

template <CodeRuns kRuns>
void decode_together(std::span<const std::span<const std::uint8_t>> encoded,
                     std::span<std::uint8_t* const> out,
                     std::span<std::optional<std::size_t>> sizes) {
    // The chains are locals, stepped side by side while all of them walk, so that the stores of
    // zeros (bytes, which may alias anything) do not force their positions out to memory and
    // back at every step; then each walks on alone.
    std::array<CodeChain<kRuns>, kCobsTogether> chains;
    for (std::size_t i = 0; i < kCobsTogether; ++i)
        chains[i] = CodeChain<kRuns>(encoded[i], out[i]);
    bool all_walking = std::all_of(chains.begin(), chains.end(),
                                   [](const CodeChain<kRuns>& c) { return c.walking(); });
    while (all_walking) all_walking = step_each(chains, std::make_index_sequence<kCobsTogether>{});
    for (std::size_t i = 0; i < kCobsTogether; ++i) {
        while (chains[i].walking() && chains[i].step()) {
        }
        sizes[i] = chains[i].result(encoded[i]);
    }
}

}  // namespace

std::optional<std::size_t> cobs_decode_unchecked(std::span<const std::uint8_t> encoded,
                                                 std::uint8_t* out, CodeRuns runs) {
    return runs == CodeRuns::kLikely ? decode_alone<CodeRuns::kLikely>(encoded, out)
                                     : decode_alone<CodeRuns::kUnlikely>(encoded, out);
}

void cobs_decode_unchecked_together(std::span<const std::span<const std::uint8_t>> encoded,
                                    std::span<std::uint8_t* const> out,
                                    std::span<std::optional<std::size_t>> sizes, CodeRuns runs) {
    const std::size_t n = std::min({encoded.size(), out.size(), sizes.size()});
    if (n != kCobsTogether) {
        for (std::size_t i = 0; i < n; ++i)
            sizes[i] = cobs_decode_unchecked(encoded[i], out[i], runs);
        return;
    }
    if (runs == CodeRuns::kLikely) {
        decode_together<CodeRuns::kLikely>(encoded, out, sizes);
    } else {
        decode_together<CodeRuns::kUnlikely>(encoded, out, sizes);
    }
}

void put_leb128(std::uint64_t value, std::vector<std::uint8_t>& out) {
    while (value >= 0x80) {
        out.push_back(static_cast<std::uint8_t>(value | 0x80));
        value >>= 7;
    }
    out.push_back(static_cast<std::uint8_t>(value));
}

FramedEncoder::FramedEncoder(int addr_bytes, std::size_t max_body)
    : addr_bytes_(addr_bytes), max_body_(max_body) {
    if (addr_bytes != 3 && addr_bytes != 4)
        throw std::invalid_argument("address width must be 3 or 4 bytes");
    if (max_body < kMinFrameBody || max_body > kMaxFrameBody)
        throw std::invalid_argument("frame body size must be 5..254 bytes");
}

void FramedEncoder::hello(const TargetHello& hello) {
    if (!is_version_known(hello.version) || (hello.addr_bytes != 3 && hello.addr_bytes != 4) ||
        hello.build_id.size() > kMaxBuildIdBytes) {
        throw std::invalid_argument(
            "a HELLO needs version 1, 2 or 3, 3 or 4 address bytes and a build-id "
            "of at most 20 bytes");
    }
    flush();
    item_.clear();
    item_.push_back(static_cast<std::uint8_t>(FramedTag::kHello));
    item_.insert(item_.end(), {hello.version, hello.addr_bytes, hello.flags});
    for (std::uint32_t v : {hello.text_lo, hello.text_hi, hello.sample_hz, hello.core_clock_hz}) {
        put_le(v, 4, item_);
    }
    item_.push_back(static_cast<std::uint8_t>(hello.build_id.size()));
    item_.insert(item_.end(), hello.build_id.begin(), hello.build_id.end());
    if (hello.arch != 0) {
        item_[3] |= kHelloArch;
        item_.push_back(hello.arch);
    }
    add_item(item_);
    addr_bytes_ = hello.addr_bytes;
}

void FramedEncoder::put_address(std::uint32_t addr, std::vector<std::uint8_t>& out) const {
    put_le(addr, addr_bytes_, out);
}

void FramedEncoder::record(const Record& record) {
    if (record.count == 0) return;  // nothing observed: the wire cannot say so
    const bool arc = record.kind == RecordKind::kArc;
    const bool single = record.count == 1;
    item_.clear();
    item_.push_back(static_cast<std::uint8_t>(arc ? (single ? FramedTag::kArc : FramedTag::kArcN)
                                                  : (single ? FramedTag::kPc : FramedTag::kPcN)));
    if (arc) put_address(record.from_pc, item_);
    put_address(record.self_pc, item_);
    if (!single) put_leb128(record.count, item_);
    add_item(item_);
}

void FramedEncoder::dropped(std::uint32_t total) {
    item_.clear();
    item_.push_back(static_cast<std::uint8_t>(FramedTag::kDropped));
    put_le(total, 4, item_);
    add_item(item_);
}

void FramedEncoder::marker(const ProfilingMarker& marker) {
    const auto tag = static_cast<std::uint8_t>(marker.start ? FramedTag::kStart : FramedTag::kStop);
    add_item(std::span<const std::uint8_t>(&tag, 1));
}

void FramedEncoder::function_event(const FunctionEvent& event) {
    const bool in_handler = event.exception != 0;
    const FramedTag tag = event.enter
                              ? (in_handler ? FramedTag::kEnterInHandler : FramedTag::kEnter)
                              : (in_handler ? FramedTag::kExitInHandler : FramedTag::kExit);
    item_.clear();
    item_.push_back(static_cast<std::uint8_t>(tag));
    put_address(event.callee, item_);
    put_address(event.call_site, item_);
    put_le(event.timestamp, 4, item_);
    if (in_handler) put_le(event.exception, 2, item_);
    add_item(item_);
}

namespace {

void check_counter_mask(std::uint8_t counters) {
    if (counters >= (1u << kPrimaryCounters))
        throw std::invalid_argument("a counter mask has bits 0..5 only");
}

}  // namespace

void FramedEncoder::counter_capabilities(const CounterCapabilities& capabilities) {
    check_counter_mask(capabilities.counters);
    item_.clear();
    item_.push_back(static_cast<std::uint8_t>(FramedTag::kCounters));
    item_.insert(item_.end(), {capabilities.counters, capabilities.slots});
    add_item(item_);
}

void FramedEncoder::counter_config(const CounterConfig& config) {
    check_counter_mask(config.counters);
    if (config.functions.size() > kMaxConfigFunctions)
        throw std::invalid_argument("a COUNTER_CONFIG names at most " +
                                    std::to_string(kMaxConfigFunctions) + " functions");
    item_.clear();
    item_.push_back(static_cast<std::uint8_t>(FramedTag::kCounterConfig));
    put_le(config.run, 2, item_);
    item_.push_back(config.counters);
    item_.push_back(static_cast<std::uint8_t>(config.functions.size()));
    for (std::uint32_t f : config.functions) put_address(f, item_);
    add_item(item_);
}

void FramedEncoder::function_counts(const FunctionCounts& counts) {
    check_counter_mask(counts.counters);
    item_.clear();
    item_.push_back(static_cast<std::uint8_t>(FramedTag::kFunctionCounts));
    put_le(counts.run, 2, item_);
    item_.push_back(counts.counters);
    put_address(counts.function, item_);
    put_leb128(counts.calls, item_);
    for (int c = 0; c < kPrimaryCounters; ++c) {
        if (counts.counters & (1u << c))
            put_leb128(counts.counts[static_cast<std::size_t>(c)], item_);
    }
    add_item(item_);
}

void FramedEncoder::run_totals(const RunTotals& totals) {
    check_counter_mask(totals.counters);
    item_.clear();
    item_.push_back(static_cast<std::uint8_t>(FramedTag::kRunTotals));
    put_le(totals.run, 2, item_);
    item_.insert(item_.end(), {totals.counters, totals.functions});
    for (int c = 0; c < kPrimaryCounters; ++c) {
        if (totals.counters & (1u << c))
            put_leb128(totals.counts[static_cast<std::size_t>(c)], item_);
    }
    add_item(item_);
}

void FramedEncoder::halted(std::uint64_t nanoseconds) {
    item_.clear();
    item_.push_back(static_cast<std::uint8_t>(FramedTag::kHalted));
    put_leb128(nanoseconds, item_);
    add_item(item_);
}

void FramedEncoder::stack(const StackSample& sample) {
    const std::size_t n = std::min(sample.functions.size(), kMaxStackFrames);
    const bool truncated = sample.truncated || n < sample.functions.size();
    item_.clear();
    item_.push_back(static_cast<std::uint8_t>(FramedTag::kStack));
    item_.push_back(truncated ? 1 : 0);
    put_le(sample.exception, 2, item_);
    put_address(sample.pc, item_);
    item_.push_back(static_cast<std::uint8_t>(n));
    for (std::size_t i = 0; i < n; ++i) put_address(sample.functions[i], item_);
    add_item(item_);
}

void FramedEncoder::task_switch(const TaskSwitch& task) {
    if (task.name.size() > kMaxTaskName)
        throw std::invalid_argument("a task name of " + std::to_string(task.name.size()) +
                                    " bytes (at most " + std::to_string(kMaxTaskName) + ")");
    item_.clear();
    item_.push_back(static_cast<std::uint8_t>(FramedTag::kTaskSwitch));
    put_address(task.task, item_);
    put_le(task.stamp, 4, item_);
    item_.push_back(static_cast<std::uint8_t>(task.name.size()));
    item_.insert(item_.end(), task.name.begin(), task.name.end());
    add_item(item_);
}

void FramedEncoder::task_deleted(const TaskDeleted& task) {
    item_.clear();
    item_.push_back(static_cast<std::uint8_t>(FramedTag::kTaskDeleted));
    put_address(task.task, item_);
    put_le(task.stamp, 4, item_);
    add_item(item_);
}

void FramedEncoder::add_item(std::span<const std::uint8_t> item) {
    if (!body_.empty() && body_.size() + item.size() + 2 > max_body_) flush();
    if (body_.empty()) put_le(seq_, 2, body_);
    if (body_.size() + item.size() + 2 > max_body_)
        throw std::invalid_argument("an item does not fit in a frame of " +
                                    std::to_string(max_body_) + " bytes");
    body_.insert(body_.end(), item.begin(), item.end());
}

void FramedEncoder::flush() {
    if (body_.empty()) return;
    put_le(crc16_ccitt_false(body_), 2, body_);
    cobs_encode(body_, wire_);
    wire_.push_back(kFrameDelimiter);
    body_.clear();
    ++seq_;
    ++frames_;
}

void FramedEncoder::reset() {
    flush();
    seq_ = 0;
}

std::vector<std::uint8_t> FramedEncoder::take_wire() {
    std::vector<std::uint8_t> out;
    out.swap(wire_);
    return out;
}

const char* arch_name(std::uint8_t code) {
    switch (static_cast<TargetArch>(code)) {
        case TargetArch::kArmv6m:
            return "armv6-m";
        case TargetArch::kArmv7m:
            return "armv7-m";
        case TargetArch::kArmv7em:
            return "armv7e-m";
        case TargetArch::kArmv8mBase:
            return "armv8-m.base";
        case TargetArch::kArmv8mMain:
            return "armv8-m.main";
        case TargetArch::kRv32imc:
            return "rv32imc";
        case TargetArch::kRv32imac:
            return "rv32imac";
        case TargetArch::kUnknown:
            break;
    }
    return "";
}

std::uint8_t arch_code(std::string_view name) {
    for (unsigned code = 1; code < 0x100; ++code) {
        const char* known = arch_name(static_cast<std::uint8_t>(code));
        if (*known && name == known) return static_cast<std::uint8_t>(code);
    }
    return 0;
}

const char* arch_family(std::string_view arch) {
    if (arch.rfind("arm", 0) == 0) return "arm";
    if (arch.rfind("rv", 0) == 0) return "riscv";
    return "";
}

}  // namespace rackprof::protocol
