// Streaming deframer for the CoreSight TPIU formatter (SWO or parallel trace with the
// formatter on): 16-byte frames in, the bytes of one trace source ID out.
//
// Frame alignment comes from a full sync (FF FF FF 7F), or from the lock-on below; until then
// every byte is discarded and counted. Half-syncs (FF 7F on a pair boundary) are dropped. In a
// frame, an even byte with bit 0 set changes the stream ID (bits 7:1); with bit 0 clear it is data
// whose bit 0 is that pair's aux bit in byte 15; odd bytes are always data. The aux bit of an ID
// change says whether the odd byte after it is still the old ID's (1) or the new one's (0).
// ID 0 is padding. Alignment is lost when a full sync arrives mid-frame (realigned on it) or a
// frame holds the reserved ID 0x7F (a full sync or a lock-on realigns). Data whose ID is not known
// yet (after alignment is gained, until an ID change) is discarded and counted.
//
// Some formatter modes send no sync at all (a logic analyzer's capture of SWO with the
// formatter on starts on a frame boundary and never syncs). Unaligned, the deframer also keeps
// the last kHuntBytes and, when no sync came in them, tries the 16 frame alignments: it locks
// on the one alignment whose frames are all valid (no reserved ID, no ID change in the last
// slot claiming an odd byte after it), that names our stream, and whose stream bytes pass the
// StreamCheck (the ITM decoder's: fewest bytes it must discard) clearly better than any other.
// The bytes before the lock stay counted as discarded; the window is decoded from the lock on.
// A later full sync mid-frame realigns on it, as always.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

namespace rackprof::protocol {

struct TpiuStats {
    std::uint64_t bytes_in = 0;
    std::uint64_t bytes_out = 0;        // data of the selected stream
    std::uint64_t bytes_skipped = 0;    // data of other streams
    std::uint64_t bytes_padding = 0;    // data of stream 0 (null)
    std::uint64_t bytes_format = 0;     // ID-change and aux bytes of good frames
    std::uint64_t bytes_sync = 0;       // full and half syncs
    std::uint64_t bytes_discarded = 0;  // unaligned, cut-off or bad frames, data of unknown ID
    std::uint64_t frames = 0;           // good frames
    std::uint64_t frames_bad = 0;       // frames cut by a sync or holding the reserved ID
    std::uint64_t full_syncs = 0;
    std::uint64_t half_syncs = 0;
    std::uint64_t resyncs = 0;  // times alignment was lost
    std::uint64_t locks = 0;    // alignments found without a sync (by trying the 16)

    friend bool operator==(const TpiuStats&, const TpiuStats&) = default;
};

class TpiuDeframer {
  public:
    explicit TpiuDeframer(std::uint8_t stream_id) : stream_id_(stream_id) {}

    // Unaligned bytes kept for the lock-on: 64 frames at each of the 16 alignments.
    static constexpr std::size_t kHuntBytes = 64 * 16 + 15;
    // What feed() may write beyond its output: the window a lock-on decodes, a frame held from
    // the last chunk and the slack of 16-byte stores.
    static constexpr std::size_t kOutputSlack = kHuntBytes + 32;

    // How many of a candidate alignment's stream bytes fail to decode: the lock-on keeps the
    // alignment whose stream decodes cleanly. Without one, frame validity alone decides.
    using StreamCheck = std::function<std::uint64_t(std::span<const std::uint8_t>)>;
    void set_stream_check(StreamCheck check) { check_ = std::move(check); }

    // Appends the selected stream's bytes to `out`.
    void feed(std::span<const std::uint8_t> data, std::vector<std::uint8_t>& out);
    // The same into `out`, which has room for data.size() + kOutputSlack bytes; returns how
    // many bytes are the stream's (the rest is scratch).
    std::size_t feed(std::span<const std::uint8_t> data, std::uint8_t* out);
    // End of stream or a break in it: a partial frame is discarded and alignment is lost.
    void finish();

    const TpiuStats& stats() const { return stats_; }

  private:
    static constexpr int kUnknownId = -1;

    bool plain_frame(const std::uint8_t* p) const;
    static std::uint32_t last_four(const std::uint8_t* frame);
    std::size_t our_frames(const std::uint8_t* p, std::size_t n);
    void run(const std::uint8_t* p, std::size_t n);
    void unaligned_byte(std::uint8_t byte);
    void hunt(std::uint8_t byte);
    std::optional<std::size_t> lock_offset() const;
    std::optional<std::uint64_t> candidate_errors(std::size_t offset) const;
    void lock_on(std::size_t offset);
    void full_sync();
    void decode_frame(const std::uint8_t* frame);
    bool repeats_our_id(const std::uint8_t* frame) const;
    void lose_alignment(const std::uint8_t* frame);

    std::uint8_t stream_id_;
    TpiuStats stats_;
    bool aligned_ = false;
    unsigned ff_run_ = 0;        // unaligned: trailing FF bytes held back (at most 3)
    std::uint32_t monitor_ = 0;  // the last four raw bytes
    int current_ = kUnknownId;   // the stream ID the next data byte belongs to
    std::array<std::uint8_t, 16> frame_{};
    unsigned count_ = 0;
    std::uint8_t* out_ = nullptr;       // during feed(): where the next output byte goes
    bool hunting_ = true;               // false in the scratch deframers that try an alignment
    std::vector<std::uint8_t> window_;  // unaligned: the last bytes, for the lock-on
    StreamCheck check_;
};

}  // namespace rackprof::protocol
