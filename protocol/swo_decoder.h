// The decoder of a board with protocol = "itm": SWO bytes (raw ITM, or TPIU frames) in,
// records, events and counters out.
//
//   DWT PC sample            -> Record::pc_sample (sleep samples only counted: sleep_samples)
//   ITM overflow             -> stats().overflows
//   console_port bytes       -> ConsoleText events, one per line; the partial rest at finish()
//   framed_port bytes        -> the inner StreamDecoder given to the constructor; its records
//                               and events pass through
//   orbstat_port words       -> Record::arc(call_site, callee) per entry, and FunctionEvent per
//                               entry and exit (three 32-bit words: 0x4/0x5 + 24-bit stamp,
//                               call site, callee)
//   exception trace          -> exceptions(): entries and cycles per exception number
//   local timestamps         -> the target's cycle clock, for exception time
//
// stats() folds the layers together, each counting in its own bytes: bytes_in is wire bytes;
// bytes_discarded and resyncs add the TPIU deframer's, the ITM decoder's, orbstat words
// dropped (their ITM bytes) and the inner decoder's; frames/frames_bad add TPIU frames to the
// inner decoder's frames; arcs, pc_samples, frames_lost, target_dropped, overflows and
// sleep_samples add the inner decoder's to our own. The layers' own counters stay available.
// Records of the inner decoder may reach the sink after ours from the same chunk: order among
// records carries no meaning (they are aggregated); events keep stream order per source.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "protocol/itm_decoder.h"
#include "protocol/legacy_format.h"
#include "protocol/stream_decoder.h"
#include "protocol/tpiu_deframer.h"

namespace rackprof::protocol {

struct SwoOptions {
    bool tpiu = false;             // TPIU formatter frames (OpenOCD "formatter on", trace ports)
    std::uint8_t tpiu_stream = 1;  // the ITM's trace source ID
    std::optional<std::uint16_t> framed_port;   // stimulus port carrying a framed protocol
    std::optional<std::uint16_t> orbstat_port;  // orbuculum's orbstat uses 30
    std::optional<std::uint16_t> console_port;  // commonly 0
    std::optional<AddressRange> code_range;     // PCs and arcs outside it are rejected
};

// Throws std::invalid_argument: a port above 255, two uses of one port, a stream ID outside
// 1..0x6F.
void validate(const SwoOptions& options);

struct SwoStats {
    std::array<std::uint64_t, 13> packets{};  // per ItmPacketKind (kGlobalTimestamp2 is 12)
    std::uint64_t software_ignored = 0;       // packets on ports with no use configured
    std::uint64_t console_bytes = 0;
    std::uint64_t framed_bytes = 0;           // bytes handed to the inner decoder
    std::uint64_t function_events = 0;        // orbstat entries and exits
    std::uint64_t orbstat_words_dropped = 0;  // words not forming an event
    std::uint64_t out_of_range = 0;           // PC samples and arcs outside the code range
    std::uint64_t timestamp_cycles = 0;       // the target's clock from local timestamps

    friend bool operator==(const SwoStats&, const SwoStats&) = default;
};

struct ExceptionStats {
    std::uint64_t entries = 0;
    std::uint64_t cycles = 0;  // time spent in it, not in exceptions it was preempted by
    // Activations that ended (an exit or a return past it), each one's own time: the longest,
    // and the 99th percentile to within an eighth of an octave (a histogram's bucket, as
    // HdrHistogram keeps them: a stream's activations are not all kept).
    std::uint64_t completed = 0;
    std::uint64_t max_cycles = 0;
    std::uint64_t p99_cycles = 0;
    friend bool operator==(const ExceptionStats&, const ExceptionStats&) = default;
};

class SwoDecoder final : public StreamDecoder {
  public:
    // `framed` decodes the bytes of options.framed_port; give both or neither.
    // Throws std::invalid_argument for invalid options.
    explicit SwoDecoder(SwoOptions options, std::unique_ptr<StreamDecoder> framed = nullptr);

    void feed(std::span<const std::uint8_t> data, RecordSink& sink) override;
    void finish(RecordSink& sink) override;
    const DecoderStats& stats() const override { return stats_; }

    const SwoStats& swo_stats() const { return swo_; }
    const ItmStats& itm_stats() const { return itm_.stats(); }
    const TpiuStats& tpiu_stats() const { return tpiu_.stats(); }
    // By exception number (ARMv7-M: 1 reset ... 15 SysTick, 16+ external interrupts).
    const std::map<std::uint16_t, ExceptionStats>& exceptions() const;

  private:
    static constexpr std::size_t kBatchSize = 4096;
    static constexpr std::size_t kMaxLine = 4096;  // console text longer than this is split

    // What a stimulus port is used for: one look-up per software packet instead of a chain
    // of comparisons with the optional ports.
    enum class PortUse : std::uint8_t { kIgnored, kFramed, kOrbstat, kConsole };

    // What ItmDecoder::feed_inline calls per packet: SwoDecoder's handling, inlined there.
    struct PacketHandler {
        SwoDecoder& decoder;
        void on_packet(const ItmPacket& packet) { decoder.on_packet(packet); }
    };

    void on_packet(const ItmPacket& packet);
    void on_software(const ItmPacket& packet);
    void software_packet(std::uint16_t port, std::uint8_t size, std::uint64_t value, PortUse use);
    void on_orbstat(const ItmPacket& packet);
    void on_exception(std::uint16_t number, std::uint8_t fn);
    void on_console(const ItmPacket& packet);
    void end_console_line(std::uint16_t port);
    void drop_orbstat_words(std::uint64_t words);
    void emit(const Record& record);
    void event(const StreamEvent& event);
    void flush();
    void feed_framed();
    void fold_stats();
    bool in_range(std::uint32_t address) const;

    SwoOptions options_;
    std::unique_ptr<StreamDecoder> framed_;
    TpiuDeframer tpiu_;
    ItmDecoder itm_;
    DecoderStats stats_;
    DecoderStats own_;  // what this layer itself counted
    SwoStats swo_;
    // By exception number (9 bits in the packet): an array while decoding, the map on request
    // (the numbers entered at least once, as the map would hold them).
    std::array<ExceptionStats, 512> exception_table_{};
    mutable std::map<std::uint16_t, ExceptionStats> exceptions_;
    std::array<PortUse, 256> port_use_{};

    RecordSink* sink_ = nullptr;                 // during feed() and finish()
    std::unique_ptr<std::uint8_t[]> itm_bytes_;  // TPIU output
    std::size_t itm_capacity_ = 0;
    std::vector<std::uint8_t> framed_bytes_;  // for the inner decoder
    // A framed frame ended since the inner decoder was last fed: it is decoded before the next
    // record of our own (a DWT PC sample), so its items (an RTOS's task switch) keep their
    // place among the samples around them, to within a frame.
    bool framed_frame_pending_ = false;
    std::array<char, kMaxLine> console_line_{};  // the console line so far
    // The events sent, reused (see end_console_line).
    StreamEvent console_event_{std::in_place_type<ConsoleText>};
    StreamEvent function_event_{std::in_place_type<FunctionEvent>};
    std::size_t console_len_ = 0;
    std::array<std::uint32_t, 3> orbstat_words_{};
    std::size_t orbstat_count_ = 0;
    struct Activation {
        std::uint16_t number;
        std::uint64_t cycles;  // its own so far
    };
    void end_activation(const Activation& activation);
    std::vector<Activation> active_exceptions_;  // innermost last
    // Per exception entered: activations by duration bucket (16 exact, then 8 per octave).
    std::map<std::uint16_t, std::vector<std::uint64_t>> durations_;
    std::uint64_t exception_clock_ = 0;  // timestamp_cycles at the last change

    std::array<Record, kBatchSize> batch_{};
    std::size_t batch_len_ = 0;
};

}  // namespace rackprof::protocol
