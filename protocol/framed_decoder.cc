#include "protocol/framed_decoder.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace rackprof::protocol {

namespace {

std::uint32_t read_le(const std::uint8_t* p, int width) {
    std::uint32_t v = 0;
    for (int i = width - 1; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

// Four bytes, little-endian, whatever the host's byte order.
inline std::uint32_t load_le32(const std::uint8_t* p) {
    return std::uint32_t{p[0]} | std::uint32_t{p[1]} << 8 | std::uint32_t{p[2]} << 16 |
           std::uint32_t{p[3]} << 24;
}

constexpr std::uint32_t address_mask(int width) {
    return width == 4 ? 0xFFFFFFFF : 0xFFFFFF;
}

// Reads the LEB128 count at body[pos]: 1 to 2^32-1 in at most 5 bytes. False if malformed.
bool read_count(std::span<const std::uint8_t> body, std::size_t& pos, std::uint32_t& count) {
    std::uint64_t value = 0;
    for (int i = 0; i < 5; ++i) {
        if (pos >= body.size()) return false;
        const std::uint8_t b = body[pos++];
        value |= static_cast<std::uint64_t>(b & 0x7F) << (7 * i);
        if ((b & 0x80) == 0) {
            if (value == 0 || value > 0xFFFFFFFFull) return false;
            count = static_cast<std::uint32_t>(value);
            return true;
        }
    }
    return false;
}

// Reads an unsigned LEB128 value of up to 64 bits (at most 10 bytes). False if malformed.
bool read_leb128(std::span<const std::uint8_t> body, std::size_t& pos, std::uint64_t& value) {
    value = 0;
    for (int i = 0; i < 10; ++i) {
        if (pos >= body.size()) return false;
        const std::uint8_t b = body[pos++];
        if (i == 9 && b > 1) return false;  // beyond 64 bits
        value |= static_cast<std::uint64_t>(b & 0x7F) << (7 * i);
        if ((b & 0x80) == 0) return true;
    }
    return false;
}

// The counts of the counters in `mask`, in bit order.
bool read_counter_values(std::span<const std::uint8_t> body, std::size_t& pos, std::uint8_t mask,
                         CounterValues& out) {
    if (mask >= (1u << kPrimaryCounters)) return false;
    for (int c = 0; c < kPrimaryCounters; ++c) {
        if ((mask & (1u << c)) && !read_leb128(body, pos, out[static_cast<std::size_t>(c)]))
            return false;
    }
    return true;
}

constexpr std::size_t kHelloFixedBytes = 3 + 4 * 4 + 1;  // version..core_clock_hz, build_id_len

// The ARC and PC items from body[pos] on, nearly every item of a stream, staged at
// `out[staged]`; stops at any other item, or one cut short, for parse_body to read (or refuse).
// Returns where it stopped. Its own loop, with every variable in a register: a frame's items
// are a chain (each starts where the one before ends), and the loop's speed is that chain's.
// A `body` lies in one of the decoder's bodies_, followed by the CRC and the slack, so a
// 3-byte address is read as four bytes, masked, and a PC's unused second address is read too.
template <CodeRuns kRuns>
std::size_t stage_arcs_and_pcs(std::span<const std::uint8_t> body, std::size_t pos, std::size_t w,
                               std::uint32_t mask, Record* out, std::size_t& staged,
                               std::size_t& staged_arcs) {
    constexpr auto kArcTag = static_cast<std::uint8_t>(FramedTag::kArc);
    constexpr auto kPcTag = static_cast<std::uint8_t>(FramedTag::kPc);
    const std::uint8_t* const b = body.data();
    const std::size_t size = body.size();
    const std::size_t pc_len = 1 + w;
    std::size_t n = staged, arcs = staged_arcs;
    while (pos < size) {
        // Four PCs in a row (a sampler's run) are taken at once: their tags are checked side
        // by side, so the chain moves four items per step. Only where the frame before was
        // nearly all PCs: where calls and samples mix, the check would be mispredicted.
        if (kRuns == CodeRuns::kLikely && size - pos >= 4 * pc_len &&
            (b[pos] == kPcTag) & (b[pos + pc_len] == kPcTag) & (b[pos + 2 * pc_len] == kPcTag) &
                (b[pos + 3 * pc_len] == kPcTag)) {
            for (std::size_t k = 0; k < 4; ++k)
                out[n + k] = Record::pc_sample(load_le32(b + pos + 1 + k * pc_len) & mask);
            n += 4;
            pos += 4 * pc_len;
            continue;
        }
        // One ARC or PC, with no branch on which of the two: where calls and samples mix, it
        // would be mispredicted about as often as not.
        const std::uint8_t t = b[pos];
        if (t != kArcTag && t != kPcTag) break;
        const bool arc = t == kArcTag;
        const std::size_t len = arc ? 2 * w : w;
        if (size - pos - 1 < len) break;
        const std::uint32_t first = load_le32(b + pos + 1) & mask;
        const std::uint32_t second = load_le32(b + pos + 1 + w) & mask;
        out[n++] = Record{arc ? RecordKind::kArc : RecordKind::kPcSample, 1, arc ? first : 0,
                          arc ? second : first};
        arcs += arc ? 1 : 0;
        pos += 1 + len;
    }
    staged = n;
    staged_arcs = arcs;
    return pos;
}

}  // namespace

FramedDecoder::FramedDecoder(FramedOptions options) : addr_bytes_(options.addr_bytes) {
    if (addr_bytes_ != 3 && addr_bytes_ != 4) {
        throw std::invalid_argument("address width must be 3 or 4 bytes, not " +
                                    std::to_string(addr_bytes_));
    }
}

void FramedDecoder::feed(std::span<const std::uint8_t> data, RecordSink& sink) {
    stats_.bytes_in += data.size();
    const std::uint8_t* p = data.data();
    const std::uint8_t* const end = p + data.size();
    while (p < end) {
        const auto* delimiter =
            static_cast<const std::uint8_t*>(std::memchr(p, kFrameDelimiter, end - p));
        const std::uint8_t* stop = delimiter ? delimiter : end;
        const auto n = static_cast<std::size_t>(stop - p);
        if (delimiter && frame_len_ == 0 && overlong_bytes_ == 0) {
            p = take_whole_frames(p, delimiter, end, sink);
            continue;
        }
        if (overlong_bytes_ == 0 && n <= kMaxEncoded - frame_len_) {
            std::memcpy(frame_.data() + frame_len_, p, n);
            frame_len_ += n;
        } else {
            // Longer than any valid frame: only its length is kept, to count it.
            overlong_bytes_ += frame_len_ + n;
            frame_len_ = 0;
        }
        if (!delimiter) break;
        end_frame(sink);
        p = delimiter + 1;
    }
    flush(sink);
}

void FramedDecoder::finish(RecordSink& sink) {
    if (frame_len_ > 0 || overlong_bytes_ > 0) {
        bad_frame(frame_len_ + overlong_bytes_);  // cut short: no delimiter to count
        frame_len_ = 0;
        overlong_bytes_ = 0;
    }
    flush(sink);
}

// The frame held back across chunks has met its delimiter.
void FramedDecoder::end_frame(RecordSink& sink) {
    if (overlong_bytes_ > 0) {
        const std::uint64_t wire_bytes = overlong_bytes_ + 1;
        overlong_bytes_ = 0;
        bad_frame(wire_bytes);
        return;
    }
    const std::size_t len = frame_len_;
    frame_len_ = 0;
    end_frame({frame_.data(), len}, sink);
}

// A frame that may be valid: not empty and no longer than the longest valid frame.
bool FramedDecoder::fits(std::span<const std::uint8_t> encoded) {
    return !encoded.empty() && encoded.size() <= kMaxEncoded;
}

// `encoded`: the bytes between two delimiters (none of them zero), the second one not included.
void FramedDecoder::end_frame(std::span<const std::uint8_t> encoded, RecordSink& sink) {
    if (encoded.empty()) {
        // A lone delimiter (a sender flushing the line) is no frame; its byte carried nothing.
        ++stats_.bytes_discarded;
        return;
    }
    if (encoded.size() > kMaxEncoded) {
        bad_frame(encoded.size() + 1);
        return;
    }
    take_frame(bodies_[0].data(), cobs_decode_unchecked(encoded, bodies_[0].data(), pc_runs_),
               encoded.size() + 1, sink);
}

// Whole frames in the chunk (the common case), the first ending at `delimiter`: decoded where
// they lie, up to kCobsTogether at once while they follow each other and fit(). Returns where
// the bytes after them begin.
const std::uint8_t* FramedDecoder::take_whole_frames(const std::uint8_t* p,
                                                     const std::uint8_t* delimiter,
                                                     const std::uint8_t* end, RecordSink& sink) {
    std::array<std::span<const std::uint8_t>, kCobsTogether> frames;
    frames[0] = {p, delimiter};
    std::size_t count = 1;
    if (fits(frames[0])) {
        for (; count < frames.size(); ++count) {
            const std::uint8_t* next = delimiter + 1;
            const auto* after = static_cast<const std::uint8_t*>(std::memchr(
                next, kFrameDelimiter, std::min<std::size_t>(end - next, kMaxEncoded + 1)));
            if (!after || !fits({next, after})) break;
            frames[count] = {next, after};
            delimiter = after;
        }
    }
    if (count == 1) {
        end_frame(frames[0], sink);
        return delimiter + 1;
    }
    std::array<std::uint8_t*, kCobsTogether> out;
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = bodies_[i].data();
    std::array<std::optional<std::size_t>, kCobsTogether> sizes;
    cobs_decode_unchecked_together({frames.data(), count}, out, sizes, pc_runs_);
    for (std::size_t i = 0; i < count; ++i)
        take_frame(out[i], sizes[i], frames[i].size() + 1, sink);
    return delimiter + 1;
}

// A decoded frame (its length, or nothing if it was not valid COBS) at `body`: checked, parsed
// and delivered, or counted as bad.
void FramedDecoder::take_frame(const std::uint8_t* body, std::optional<std::size_t> n,
                               std::size_t wire_bytes, RecordSink& sink) {
    if (!n || *n < kMinFrameBody || *n > kMaxFrameBody) {
        bad_frame(wire_bytes);
        return;
    }
    if (kBatchSize - batch_len_ < kMaxFrameRecords) flush(sink);  // room to stage the frame
    const auto crc = static_cast<std::uint16_t>(body[*n - 2] | (body[*n - 1] << 8));
    const std::span<const std::uint8_t> checked(body, *n - 2);
    if (crc16_ccitt_false(checked) != crc || !parse_body(checked.subspan(2))) {
        bad_frame(wire_bytes);
        return;
    }
    ++stats_.frames;
    in_sync_ = true;
    // At least 7 of 8 records PCs (a frame holds about 60): the next frame likely holds runs.
    pc_runs_ = staged_ >= 8 && (staged_ - staged_arcs_) * 8 >= staged_ * 7 ? CodeRuns::kLikely
                                                                           : CodeRuns::kUnlikely;
    deliver(static_cast<std::uint16_t>(body[0] | (body[1] << 8)), sink);
}

// Parses every item of a frame (after its sequence number): records are staged in the batch
// behind what is already there, other items go to items_. False if any is malformed, in
// which case the whole frame is bad and nothing staged counts.
bool FramedDecoder::parse_body(std::span<const std::uint8_t> body) {
    items_.clear();
    hellos_.clear();
    held_events_.clear();
    staged_ = 0;
    staged_arcs_ = 0;
    // Counted in locals (registers) while parsing, stored when the frame parsed whole.
    std::size_t staged = 0;
    std::size_t staged_arcs = 0;
    Record* const staging = batch_.data() + batch_len_;
    int width = addr_bytes_;
    std::uint32_t mask = address_mask(width);
    std::size_t pos = 0;
    auto have = [&](std::size_t bytes) { return body.size() - pos >= bytes; };
    // A 3-byte address is read as four bytes, masked: `body` lies in one of bodies_,
    // followed by the CRC and the slack, so the fourth byte is always there to read.
    auto address = [&] {
        const std::uint32_t a = load_le32(body.data() + pos) & mask;
        pos += static_cast<std::size_t>(width);
        return a;
    };
    // The count of ARC_N and PC_N: nearly always one byte.
    auto count = [&](std::uint32_t& n) {
        if (pos < body.size() && body[pos] < 0x80) {
            n = body[pos++];
            return n != 0;
        }
        return read_count(body, pos, n);
    };
    while (pos < body.size()) {
        const auto w = static_cast<std::size_t>(width);
        pos = pc_runs_ == CodeRuns::kLikely ? stage_arcs_and_pcs<CodeRuns::kLikely>(
                                                  body, pos, w, mask, staging, staged, staged_arcs)
                                            : stage_arcs_and_pcs<CodeRuns::kUnlikely>(
                                                  body, pos, w, mask, staging, staged, staged_arcs);
        if (pos == body.size()) break;
        const auto tag = static_cast<FramedTag>(body[pos++]);
        // The other records, staged straight into the batch.
        switch (tag) {
            case FramedTag::kPc:
            case FramedTag::kPcN: {
                if (!have(w)) return false;
                Record& r = staging[staged++];
                r = Record::pc_sample(address());
                if (tag == FramedTag::kPcN && !count(r.count)) return false;
                continue;
            }
            case FramedTag::kArc:
            case FramedTag::kArcN: {
                if (!have(2 * w)) return false;
                Record& r = staging[staged++];
                ++staged_arcs;
                const std::uint32_t from = address();
                r = Record::arc(from, address());
                if (tag == FramedTag::kArcN && !count(r.count)) return false;
                continue;
            }
            default:
                break;
        }
        Item item{tag, staged};
        switch (item.tag) {
            case FramedTag::kHello: {
                if (!have(kHelloFixedBytes)) return false;
                const std::uint8_t* h = body.data() + pos;
                TargetHello hello{h[0],
                                  h[1],
                                  h[2],
                                  read_le(h + 3, 4),
                                  read_le(h + 7, 4),
                                  read_le(h + 11, 4),
                                  read_le(h + 15, 4),
                                  {}};
                const std::size_t id_len = h[19];
                pos += kHelloFixedBytes;
                if (!is_version_known(hello.version) ||
                    (hello.addr_bytes != 3 && hello.addr_bytes != 4) || id_len > kMaxBuildIdBytes ||
                    !have(id_len)) {
                    return false;
                }
                hello.build_id.assign(body.data() + pos, body.data() + pos + id_len);
                pos += id_len;
                if (hello.flags & kHelloArch) {
                    if (!have(1)) return false;
                    hello.arch = body[pos++];
                }
                width = hello.addr_bytes;
                mask = address_mask(width);
                item.hello = hellos_.size();
                hellos_.push_back(std::move(hello));
                break;
            }
            case FramedTag::kDropped:
                if (!have(4)) return false;
                item.dropped_total = read_le(body.data() + pos, 4);
                pos += 4;
                break;
            case FramedTag::kStart:
            case FramedTag::kStop:
                break;
            case FramedTag::kEnter:
            case FramedTag::kExit:
            case FramedTag::kEnterInHandler:
            case FramedTag::kExitInHandler: {
                const bool in_handler =
                    item.tag == FramedTag::kEnterInHandler || item.tag == FramedTag::kExitInHandler;
                if (!have(2 * w + 4 + (in_handler ? 2 : 0))) return false;
                FunctionEvent& e = item.event;
                e.enter = item.tag == FramedTag::kEnter || item.tag == FramedTag::kEnterInHandler;
                e.callee = address();
                e.call_site = address();
                e.timestamp = load_le32(body.data() + pos);
                e.stamp_bits = 32;
                pos += 4;
                if (in_handler) {
                    e.exception = static_cast<std::uint16_t>(body[pos] | (body[pos + 1] << 8));
                    pos += 2;
                }
                if (e.enter) {
                    // An entry is also the call's arc, as -pg would have sent it: the profile
                    // of an enter/exit capture has its call counts.
                    staging[staged++] = Record::arc(e.call_site, e.callee);
                    ++staged_arcs;
                    item.records_before = staged;
                }
                break;
            }
            case FramedTag::kCounters: {
                if (!have(2) || body[pos] >= (1u << kPrimaryCounters)) return false;
                item.held_event = held_events_.size();
                held_events_.push_back(CounterCapabilities{body[pos], body[pos + 1]});
                pos += 2;
                break;
            }
            case FramedTag::kCounterConfig: {
                if (!have(4)) return false;
                CounterConfig c;
                c.run = static_cast<std::uint16_t>(body[pos] | (body[pos + 1] << 8));
                c.counters = body[pos + 2];
                const std::size_t n = body[pos + 3];
                pos += 4;
                if (c.counters >= (1u << kPrimaryCounters) || n > kMaxConfigFunctions ||
                    !have(n * w))
                    return false;
                for (std::size_t i = 0; i < n; ++i) c.functions.push_back(address());
                item.held_event = held_events_.size();
                held_events_.push_back(std::move(c));
                break;
            }
            case FramedTag::kFunctionCounts: {
                if (!have(3 + w)) return false;
                FunctionCounts c;
                c.run = static_cast<std::uint16_t>(body[pos] | (body[pos + 1] << 8));
                c.counters = body[pos + 2];
                pos += 3;
                c.function = address();
                if (!read_leb128(body, pos, c.calls) ||
                    !read_counter_values(body, pos, c.counters, c.counts))
                    return false;
                item.held_event = held_events_.size();
                held_events_.push_back(c);
                break;
            }
            case FramedTag::kRunTotals: {
                if (!have(4)) return false;
                RunTotals t;
                t.run = static_cast<std::uint16_t>(body[pos] | (body[pos + 1] << 8));
                t.counters = body[pos + 2];
                t.functions = body[pos + 3];
                pos += 4;
                if (!read_counter_values(body, pos, t.counters, t.counts)) return false;
                item.held_event = held_events_.size();
                held_events_.push_back(t);
                break;
            }
            case FramedTag::kHalted:
                if (!read_leb128(body, pos, item.halted_ns)) return false;
                break;
            case FramedTag::kStack: {
                if (!have(3 + w + 1)) return false;
                StackSample s;
                s.truncated = (body[pos] & 1) != 0;
                s.exception = static_cast<std::uint16_t>(body[pos + 1] | (body[pos + 2] << 8));
                pos += 3;
                s.pc = address();
                const std::size_t n = body[pos++];
                if (n > kMaxStackFrames || !have(n * w)) return false;
                for (std::size_t i = 0; i < n; ++i) s.functions.push_back(address());
                // The sample is also a PC record: a stack's flat profile is its samples'.
                staging[staged++] = Record::pc_sample(s.pc);
                item.records_before = staged;
                item.held_event = held_events_.size();
                held_events_.push_back(std::move(s));
                break;
            }
            case FramedTag::kTaskSwitch: {
                if (!have(w + 5)) return false;
                TaskSwitch t;
                t.task = address();
                t.stamp = load_le32(body.data() + pos);
                const std::size_t n = body[pos + 4];
                pos += 5;
                if (n > kMaxTaskName || !have(n)) return false;
                t.name.assign(reinterpret_cast<const char*>(body.data() + pos), n);
                pos += n;
                item.held_event = held_events_.size();
                held_events_.push_back(std::move(t));
                break;
            }
            case FramedTag::kTaskDeleted: {
                if (!have(w + 4)) return false;
                TaskDeleted t;
                t.task = address();
                t.stamp = load_le32(body.data() + pos);
                pos += 4;
                item.held_event = held_events_.size();
                held_events_.push_back(t);
                break;
            }
            default:
                return false;  // an unknown tag: the rest of the frame cannot be parsed
        }
        items_.push_back(item);
    }
    staged_ = staged;
    staged_arcs_ = staged_arcs;
    frame_addr_bytes_ = width;
    return true;
}

// A good frame: sequence accounting, then its items in order.
void FramedDecoder::deliver(std::uint16_t seq, RecordSink& sink) {
    // A HELLO in frame 0 is a target reset: numbering starts again, and the jump is not a
    // loss. A HELLO repeated later is numbered on, so it hides no loss before it.
    const bool reset = !hellos_.empty() && seq == 0;
    if (have_seq_ && !reset) {
        const auto lost = static_cast<std::uint16_t>(seq - expected_seq_);
        stats_.frames_lost += lost;
        events_lost(lost, sink);
    }
    have_seq_ = true;
    expected_seq_ = static_cast<std::uint16_t>(seq + 1);
    if (reset) dropped_total_ = 0;  // the target's DROPPED total counts since its reset
    if (items_.empty()) {           // records only (the common case): all of them at once
        batch_len_ += staged_;
        stats_.arcs += staged_arcs_;
        stats_.pc_samples += staged_ - staged_arcs_;
        addr_bytes_ = frame_addr_bytes_;
        return;
    }
    std::size_t committed = 0;  // of the staged records
    auto commit_until = [&](std::size_t end) {
        for (; committed < end; ++committed) {
            if (batch_[batch_len_].kind == RecordKind::kArc) {
                ++stats_.arcs;
            } else {
                ++stats_.pc_samples;
            }
            ++batch_len_;
        }
    };
    for (const Item& item : items_) {
        commit_until(item.records_before);
        switch (item.tag) {
            case FramedTag::kHello:
                flush(sink, staged_ - committed);
                carries_events_ = (hellos_[item.hello].flags & (kHelloEvents | kHelloTasks)) != 0;
                sink.on_event(hellos_[item.hello]);
                break;
            case FramedTag::kDropped: {
                // Cumulative on the target (wrapping at 2^32): only the increase is new.
                const auto dropped =
                    static_cast<std::uint32_t>(item.dropped_total - dropped_total_);
                stats_.target_dropped += dropped;
                dropped_total_ = item.dropped_total;
                events_lost(dropped, sink);
                break;
            }
            case FramedTag::kEnter:
            case FramedTag::kExit:
            case FramedTag::kEnterInHandler:
            case FramedTag::kExitInHandler:
                // Not flushed before: records are aggregated, their order with events carries
                // nothing, and a flush per event would cost a batch per event.
                carries_events_ = true;
                ++(item.event.enter ? events_.enters : events_.exits);
                sink.on_event(item.event);
                break;
            case FramedTag::kCounters:
            case FramedTag::kCounterConfig:
            case FramedTag::kFunctionCounts:
            case FramedTag::kRunTotals:
                flush(sink, staged_ - committed);
                sink.on_event(held_events_[item.held_event]);
                break;
            case FramedTag::kTaskSwitch:
            case FramedTag::kTaskDeleted:
                // Flushed before: the records before a switch are the previous task's.
                carries_events_ = true;
                flush(sink, staged_ - committed);
                sink.on_event(held_events_[item.held_event]);
                break;
            case FramedTag::kHalted:
                stats_.samples_halted_ns += item.halted_ns;
                break;
            case FramedTag::kStack: {
                const auto& sample = std::get<StackSample>(held_events_[item.held_event]);
                stats_.stack_unwind_failures += sample.truncated ? 1 : 0;
                sink.on_event(sample);  // not flushed before, as ENTER and EXIT
                break;
            }
            default:  // START, STOP
                flush(sink, staged_ - committed);
                sink.on_event(ProfilingMarker{item.tag == FramedTag::kStart});
        }
    }
    commit_until(staged_);
    addr_bytes_ = frame_addr_bytes_;
}

// Frames lost or items dropped where events may have been: a marker at this point of the
// event stream, so a consumer knows the calling contexts open across it are incomplete.
void FramedDecoder::events_lost(std::uint64_t count, RecordSink& sink) {
    if (count == 0 || !carries_events_) return;
    ++events_.events_lost_markers;
    sink.on_event(
        EventsLost{static_cast<std::uint32_t>(std::min<std::uint64_t>(count, 0xFFFFFFFF))});
}

void FramedDecoder::bad_frame(std::uint64_t wire_bytes) {
    stats_.bytes_discarded += wire_bytes;
    ++stats_.frames_bad;
    if (in_sync_) {
        ++stats_.resyncs;
        in_sync_ = false;
    }
}

// Hands the batch to the sink; `keep` staged records behind it move to the front.
void FramedDecoder::flush(RecordSink& sink, std::size_t keep) {
    if (batch_len_ == 0) return;
    sink.on_records(std::span<const Record>(batch_.data(), batch_len_));
    std::copy_n(batch_.begin() + static_cast<std::ptrdiff_t>(batch_len_), keep, batch_.begin());
    batch_len_ = 0;
}

}  // namespace rackprof::protocol
