// Streaming decoder for the rackprof framed protocol v1 (framed-protocol.md).
//
// Bytes in any chunking give the same records, events and counters. Each frame is checked as a
// whole (COBS, length, CRC, every item parsing) before anything in it is used, so a damaged
// frame costs exactly its own records: its bytes are counted as discarded, the frame in
// `frames_bad`, and the sequence numbers tell how many frames never arrived (`frames_lost`).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "protocol/decoder_stats.h"
#include "protocol/framed_format.h"
#include "protocol/record_sink.h"
#include "protocol/stream_decoder.h"

namespace rackprof::protocol {

// What the framed decoder counted of enter/exit events (beside DecoderStats, whose counters
// are every session's stored columns): ENTER/EXIT items decoded, and EventsLost markers sent.
struct FramedEventStats {
    std::uint64_t enters = 0;
    std::uint64_t exits = 0;
    std::uint64_t events_lost_markers = 0;  // places where events may be missing
    std::uint64_t events() const { return enters + exits; }
    friend bool operator==(const FramedEventStats&, const FramedEventStats&) = default;
};

struct FramedOptions {
    int addr_bytes = 4;  // 3 or 4: the address width until a HELLO says otherwise
};

class FramedDecoder final : public StreamDecoder {
  public:
    // Throws std::invalid_argument for invalid options.
    explicit FramedDecoder(FramedOptions options);

    void feed(std::span<const std::uint8_t> data, RecordSink& sink) override;
    // A frame cut short by the end of the stream (or a break in it) is a bad frame.
    void finish(RecordSink& sink) override;
    const DecoderStats& stats() const override { return stats_; }
    const FramedEventStats& event_stats() const { return events_; }

  private:
    static constexpr std::size_t kBatchSize = 4096;
    static constexpr std::size_t kMaxEncoded = kMaxFrameBody + 1;

    // The most records one frame can hold: each takes a tag and at least a 3-byte address.
    static constexpr std::size_t kMaxFrameRecords = (kMaxFrameBody - 4) / 4;

    // A frame's item other than a record, parsed but not yet delivered (the frame may still
    // prove bad). Records are staged in the batch itself; `records_before` orders the two.
    struct Item {
        FramedTag tag;
        std::size_t records_before = 0;
        std::uint32_t dropped_total = 0;
        std::size_t hello = 0;        // index into hellos_ for a HELLO
        FunctionEvent event{};        // ENTER, EXIT
        std::size_t held_event = 0;   // index into held_events_: the v3 items, STACK, task items
        std::uint64_t halted_ns = 0;  // HALTED
    };
    void end_frame(RecordSink& sink);
    void end_frame(std::span<const std::uint8_t> encoded, RecordSink& sink);
    static bool fits(std::span<const std::uint8_t> encoded);
    const std::uint8_t* take_whole_frames(const std::uint8_t* p, const std::uint8_t* delimiter,
                                          const std::uint8_t* end, RecordSink& sink);
    void take_frame(const std::uint8_t* body, std::optional<std::size_t> n, std::size_t wire_bytes,
                    RecordSink& sink);
    bool parse_body(std::span<const std::uint8_t> body);
    void deliver(std::uint16_t seq, RecordSink& sink);
    void bad_frame(std::uint64_t wire_bytes);
    void events_lost(std::uint64_t count, RecordSink& sink);
    void flush(RecordSink& sink, std::size_t keep = 0);

    int addr_bytes_;
    int frame_addr_bytes_ = 0;  // the width after the frame being parsed (a HELLO changes it)
    DecoderStats stats_;
    bool in_sync_ = true;
    // Whether the last good frame was nearly all PC samples, so that the next likely holds runs
    // of them: COBS codes and items are then checked four at once (only speed depends on it).
    CodeRuns pc_runs_ = CodeRuns::kUnlikely;

    // The frame being received: its encoded bytes so far, or only their count once it is
    // longer than any valid frame.
    std::array<std::uint8_t, kMaxEncoded> frame_{};
    std::size_t frame_len_ = 0;
    std::uint64_t overlong_bytes_ = 0;

    // Decoded frames: one, or up to kCobsTogether decoded at once.
    std::array<std::array<std::uint8_t, kMaxEncoded + kCobsSlack>, kCobsTogether> bodies_{};
    std::vector<Item> items_;
    std::size_t staged_ = 0;       // records of the frame being parsed, behind batch_len_
    std::size_t staged_arcs_ = 0;  // arcs among them
    std::vector<TargetHello> hellos_;
    std::vector<StreamEvent> held_events_;

    bool have_seq_ = false;
    std::uint16_t expected_seq_ = 0;
    std::uint32_t dropped_total_ = 0;
    // The stream carries enter/exit events (its HELLO says so, or one came): losses in it
    // are reported as EventsLost.
    bool carries_events_ = false;
    FramedEventStats events_;

    static_assert(kBatchSize >= kMaxFrameRecords);
    std::array<Record, kBatchSize> batch_{};
    std::size_t batch_len_ = 0;
};

}  // namespace rackprof::protocol
