#include "protocol/swo_decoder.h"

#include "protocol/itm_decoder_inline.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace rackprof::protocol {

namespace {

constexpr std::uint32_t kOrbstatEnter = 0x4;  // top nibble of an event's first word
constexpr std::uint32_t kOrbstatExit = 0x5;
constexpr std::uint64_t kOrbstatWordBytes = 5;  // ITM header and 4 payload bytes
constexpr std::uint8_t kMaxStreamId = 0x6F;     // 0x70..0x7F are reserved
static_assert(std::tuple_size_v<decltype(SwoStats::packets)> ==
              static_cast<std::size_t>(ItmPacketKind::kGlobalTimestamp2) + 1);

}  // namespace

void validate(const SwoOptions& options) {
    if (options.tpiu && (options.tpiu_stream == 0 || options.tpiu_stream > kMaxStreamId)) {
        throw std::invalid_argument("tpiu_stream must be 1..111");
    }
    std::vector<std::uint16_t> ports;
    for (const auto& port : {options.framed_port, options.orbstat_port, options.console_port}) {
        if (!port) continue;
        if (*port > 255) throw std::invalid_argument("ITM stimulus ports are 0..255");
        if (std::find(ports.begin(), ports.end(), *port) != ports.end()) {
            throw std::invalid_argument("one ITM port cannot serve two uses");
        }
        ports.push_back(*port);
    }
}

SwoDecoder::SwoDecoder(SwoOptions options, std::unique_ptr<StreamDecoder> framed)
    : options_(options), framed_(std::move(framed)), tpiu_(options.tpiu_stream) {
    validate(options_);
    if (options_.framed_port.has_value() != (framed_ != nullptr)) {
        throw std::invalid_argument("framed_port needs a decoder for its bytes, and vice versa");
    }
    // Without a sync the deframer tries the 16 frame alignments: the right one gives a stream
    // the ITM decoder reads with the fewest discards.
    tpiu_.set_stream_check([](std::span<const std::uint8_t> stream) {
        struct Ignore : ItmPacketSink {
            void on_packet(const ItmPacket&) override {}
        } ignore;
        ItmDecoder trial;
        trial.feed(stream, ignore);
        return trial.stats().bytes_discarded;
    });
    if (options_.framed_port) port_use_[*options_.framed_port] = PortUse::kFramed;
    if (options_.orbstat_port) port_use_[*options_.orbstat_port] = PortUse::kOrbstat;
    if (options_.console_port) port_use_[*options_.console_port] = PortUse::kConsole;
}

void SwoDecoder::feed(std::span<const std::uint8_t> data, RecordSink& sink) {
    sink_ = &sink;
    own_.bytes_in += data.size();
    PacketHandler handler{*this};
    if (options_.tpiu) {
        // The deframed bytes go to a buffer that only grows: no vector's zero fill per chunk.
        const std::size_t room = data.size() + TpiuDeframer::kOutputSlack;
        if (room > itm_capacity_) {
            itm_bytes_ = std::make_unique_for_overwrite<std::uint8_t[]>(room);
            itm_capacity_ = room;
        }
        const std::size_t n = tpiu_.feed(data, itm_bytes_.get());
        itm_.feed_inline(std::span<const std::uint8_t>(itm_bytes_.get(), n), handler);
    } else {
        itm_.feed_inline(data, handler);
    }
    flush();
    feed_framed();
    fold_stats();
    sink_ = nullptr;
}

void SwoDecoder::finish(RecordSink& sink) {
    sink_ = &sink;
    if (options_.tpiu) tpiu_.finish();
    itm_.finish();
    drop_orbstat_words(orbstat_count_);  // an event cut off by the end
    if (console_len_ > 0) end_console_line(*options_.console_port);
    flush();
    feed_framed();
    if (framed_) framed_->finish(sink);
    fold_stats();
    sink_ = nullptr;
}

[[gnu::always_inline]] inline void SwoDecoder::on_packet(const ItmPacket& packet) {
    ++swo_.packets[static_cast<std::size_t>(packet.kind)];
    switch (packet.kind) {
        case ItmPacketKind::kPcSample: {
            const auto pc = static_cast<std::uint32_t>(packet.value);
            if (in_range(pc)) {
                emit(Record::pc_sample(pc));
            } else {
                ++swo_.out_of_range;
            }
            return;
        }
        case ItmPacketKind::kPcSleep:
            ++own_.sleep_samples;
            return;
        case ItmPacketKind::kOverflow:
            // Trace was lost: a partly received orbstat event cannot be trusted.
            ++own_.overflows;
            drop_orbstat_words(orbstat_count_);
            return;
        case ItmPacketKind::kLocalTimestamp:
            swo_.timestamp_cycles += packet.value;
            return;
        case ItmPacketKind::kException:
            return on_exception(packet.channel, packet.flags);
        case ItmPacketKind::kSoftware:
            return on_software(packet);
        default:
            return;  // counted in packets[]; nothing for a profile
    }
}

// Inline, the common cases only: a console byte, an orbstat word that does not end its event.
// The sizes are known where this is inlined (one call site per size), so each site keeps just
// its own test; the rest goes to software_packet().
[[gnu::always_inline]] inline void SwoDecoder::on_software(const ItmPacket& packet) {
    // Pages from long extension packets reach past port 255, where nothing is configured.
    const PortUse use =
        packet.channel < port_use_.size() ? port_use_[packet.channel] : PortUse::kIgnored;
    if (packet.size == 1 && use == PortUse::kConsole && console_len_ + 1 < kMaxLine) {
        const auto c = static_cast<char>(packet.value);
        console_line_[console_len_++] = c;
        ++swo_.console_bytes;
        if (c == '\n') end_console_line(packet.channel);
        return;
    }
    const auto word = static_cast<std::uint32_t>(packet.value);
    if (packet.size == 4 && use == PortUse::kOrbstat &&
        orbstat_count_ + 1 < orbstat_words_.size() &&
        (orbstat_count_ != 0 || word >> 28 == kOrbstatEnter || word >> 28 == kOrbstatExit)) {
        orbstat_words_[orbstat_count_++] = word;
        return;
    }
    software_packet(packet.channel, packet.size, packet.value, use);
}

// By value, not by reference: the inlined caller need not store a packet for this call.
void SwoDecoder::software_packet(std::uint16_t port, std::uint8_t size, std::uint64_t value,
                                 PortUse use) {
    const ItmPacket packet{ItmPacketKind::kSoftware, size, 0, port, value};
    switch (use) {
        case PortUse::kFramed: {
            bool frame_ended = false;
            for (unsigned i = 0; i < packet.size; ++i) {
                const auto byte = static_cast<std::uint8_t>(packet.value >> (8 * i));
                framed_bytes_.push_back(byte);
                frame_ended = frame_ended || byte == 0;
            }
            swo_.framed_bytes += packet.size;
            framed_frame_pending_ = framed_frame_pending_ || frame_ended;
            return;
        }
        case PortUse::kOrbstat:
            return on_orbstat(packet);
        case PortUse::kConsole:
            return on_console(packet);
        case PortUse::kIgnored:
            ++swo_.software_ignored;
            return;
    }
}

// Into a fixed buffer: a byte is a store, not a string's capacity check (console text comes a
// byte a packet, as ITM_SendChar sends it).
void SwoDecoder::on_console(const ItmPacket& packet) {
    if (packet.size == 1 && console_len_ + 1 < kMaxLine) [[likely]] {
        const auto c = static_cast<char>(packet.value);
        console_line_[console_len_++] = c;
        ++swo_.console_bytes;
        if (c == '\n') end_console_line(packet.channel);
        return;
    }
    std::uint64_t value = packet.value;
    for (unsigned i = 0; i < packet.size; ++i, value >>= 8) {
        const auto c = static_cast<char>(value);
        console_line_[console_len_++] = c;
        if (c == '\n' || console_len_ == kMaxLine) end_console_line(packet.channel);
    }
    swo_.console_bytes += packet.size;
}

void SwoDecoder::end_console_line(std::uint16_t port) {
    // The same event object every line: its string keeps its capacity (no allocation per line
    // longer than the short-string buffer) and nothing is built or destroyed per line.
    auto& text = std::get<ConsoleText>(console_event_);
    text.port = port;
    text.text.assign(console_line_.data(), console_len_);
    event(console_event_);
    console_len_ = 0;
}

// orbstat: three words per event, the first marking entry or exit; anything out of step is
// dropped word by word until a word that can start an event.
void SwoDecoder::on_orbstat(const ItmPacket& packet) {
    if (packet.size != 4) {
        drop_orbstat_words(orbstat_count_);
        own_.bytes_discarded += 1U + packet.size;
        ++swo_.orbstat_words_dropped;
        return;
    }
    const auto word = static_cast<std::uint32_t>(packet.value);
    if (orbstat_count_ == 0 && word >> 28 != kOrbstatEnter && word >> 28 != kOrbstatExit) {
        drop_orbstat_words(1);
        return;
    }
    orbstat_words_[orbstat_count_++] = word;
    if (orbstat_count_ < orbstat_words_.size()) return;
    orbstat_count_ = 0;
    const bool enter = orbstat_words_[0] >> 28 == kOrbstatEnter;
    FunctionEvent& fe = std::get<FunctionEvent>(function_event_);
    fe = FunctionEvent{enter, orbstat_words_[1], orbstat_words_[2], orbstat_words_[0] & 0xFFFFFF};
    if (!in_range(fe.call_site) || !in_range(fe.callee)) {
        ++swo_.out_of_range;
        return;
    }
    if (enter) emit(Record::arc(fe.call_site, fe.callee));
    ++swo_.function_events;
    event(function_event_);
}

void SwoDecoder::drop_orbstat_words(std::uint64_t words) {
    if (words == 0) return;
    orbstat_count_ = 0;
    swo_.orbstat_words_dropped += words;
    own_.bytes_discarded += words * kOrbstatWordBytes;
    ++own_.resyncs;
}

namespace {
// Duration buckets: 0..15 exact, then 8 per octave (the bucket's low bound: value with its 4
// leading bits kept).
constexpr std::size_t kDurationBuckets = 16 + 60 * 8;
std::size_t duration_bucket(std::uint64_t v) {
    if (v < 16) return static_cast<std::size_t>(v);
    const int octave = 63 - __builtin_clzll(v);  // >= 4
    const auto sub = static_cast<std::size_t>((v >> (octave - 3)) & 7);
    return std::min<std::size_t>(16 + static_cast<std::size_t>(octave - 4) * 8 + sub,
                                 kDurationBuckets - 1);
}
// The largest value of a bucket.
std::uint64_t bucket_high(std::size_t bucket) {
    if (bucket < 16) return bucket;
    const auto octave = static_cast<int>((bucket - 16) / 8) + 4;
    const std::uint64_t sub = (bucket - 16) % 8;
    return ((8 + sub + 1) << (octave - 3)) - 1;
}
}  // namespace

const std::map<std::uint16_t, ExceptionStats>& SwoDecoder::exceptions() const {
    exceptions_.clear();
    for (std::size_t n = 0; n < exception_table_.size(); ++n) {
        // Only an entered exception is ever active, so only those have cycles.
        if (exception_table_[n].entries > 0) {
            ExceptionStats stats = exception_table_[n];
            if (const auto it = durations_.find(static_cast<std::uint16_t>(n));
                it != durations_.end() && stats.completed > 0) {
                // Nearest rank: the bucket holding the ceil(0.99 n)-th activation.
                const std::uint64_t rank = (stats.completed * 99 + 99) / 100;
                std::uint64_t seen = 0;
                for (std::size_t b = 0; b < it->second.size(); ++b) {
                    seen += it->second[b];
                    if (seen >= rank) {
                        stats.p99_cycles = std::min(bucket_high(b), stats.max_cycles);
                        break;
                    }
                }
            }
            exceptions_.emplace(static_cast<std::uint16_t>(n), stats);
        }
    }
    return exceptions_;
}

// Time is charged to the innermost active exception between consecutive exception packets,
// at the resolution of the local timestamps seen so far.
// `number` is 9 bits (ItmDecoder masks it): within exception_table_.
void SwoDecoder::on_exception(std::uint16_t number, std::uint8_t fn) {
    if (!active_exceptions_.empty()) {
        const std::uint64_t elapsed = swo_.timestamp_cycles - exception_clock_;
        exception_table_[active_exceptions_.back().number].cycles += elapsed;
        active_exceptions_.back().cycles += elapsed;
    }
    exception_clock_ = swo_.timestamp_cycles;
    if (fn == kExceptionEnter) {
        ++exception_table_[number].entries;
        active_exceptions_.push_back({number, 0});
        if (active_exceptions_.size() > 512) active_exceptions_.erase(active_exceptions_.begin());
    } else if (fn == kExceptionExit) {
        if (!active_exceptions_.empty() && active_exceptions_.back().number == number) {
            end_activation(active_exceptions_.back());
            active_exceptions_.pop_back();
        }
    } else {
        // Returned to `number` (0: thread mode): whatever was above it has ended.
        while (!active_exceptions_.empty() && active_exceptions_.back().number != number) {
            end_activation(active_exceptions_.back());
            active_exceptions_.pop_back();
        }
    }
}

void SwoDecoder::end_activation(const Activation& activation) {
    ExceptionStats& stats = exception_table_[activation.number];
    ++stats.completed;
    stats.max_cycles = std::max(stats.max_cycles, activation.cycles);
    auto& buckets = durations_[activation.number];
    if (buckets.empty()) buckets.resize(kDurationBuckets);
    ++buckets[duration_bucket(activation.cycles)];
}

inline bool SwoDecoder::in_range(std::uint32_t address) const {
    return !options_.code_range || options_.code_range->contains(address);
}

inline void SwoDecoder::emit(const Record& record) {
    if (record.kind == RecordKind::kArc) {
        ++own_.arcs;
    } else {
        ++own_.pc_samples;
    }
    if (framed_frame_pending_) [[unlikely]] {
        flush();
        feed_framed();
    }
    batch_[batch_len_++] = record;
    if (batch_len_ == kBatchSize) flush();
}

void SwoDecoder::event(const StreamEvent& e) {
    flush();  // events keep their place among the records around them
    sink_->on_event(e);
}

void SwoDecoder::flush() {
    if (batch_len_ == 0) return;
    sink_->on_records(std::span<const Record>(batch_.data(), batch_len_));
    batch_len_ = 0;
}

void SwoDecoder::feed_framed() {
    framed_frame_pending_ = false;
    if (!framed_ || framed_bytes_.empty()) return;
    framed_->feed(framed_bytes_, *sink_);
    framed_bytes_.clear();
}

void SwoDecoder::fold_stats() {
    const ItmStats& itm = itm_.stats();
    const TpiuStats& tpiu = tpiu_.stats();
    DecoderStats s = own_;
    s.bytes_discarded += itm.bytes_discarded + tpiu.bytes_discarded;
    s.resyncs += itm.resyncs + tpiu.resyncs;
    s.frames += tpiu.frames;
    s.frames_bad += tpiu.frames_bad;
    if (framed_) {
        const DecoderStats& inner = framed_->stats();
        s.bytes_discarded += inner.bytes_discarded;
        s.resyncs += inner.resyncs;
        s.arcs += inner.arcs;
        s.pc_samples += inner.pc_samples;
        s.frames += inner.frames;
        s.frames_bad += inner.frames_bad;
        s.frames_lost += inner.frames_lost;
        s.target_dropped += inner.target_dropped;
        s.overflows += inner.overflows;
        s.sleep_samples += inner.sleep_samples;
    }
    stats_ = s;
}

}  // namespace rackprof::protocol
