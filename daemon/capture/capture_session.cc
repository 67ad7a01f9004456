#include "daemon/capture/capture_session.h"

namespace rackprof::daemon::capture {

std::int64_t unix_now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

CaptureSession::CaptureSession(storage::SessionId id, storage::NewSession spec,
                               const protocol::WireSpec& wire, storage::StorageWriter& writer,
                               FirmwareForHello firmware_for)
    : id_(id),
      spec_(std::move(spec)),
      writer_(writer),
      decoder_(protocol::make_decoder(wire)),
      raw_codec_(storage::raw_codec_of(wire)),
      firmware_for_(std::move(firmware_for)) {
    writer_.submit(storage::OpenSessionOp{id_, spec_});
}

void CaptureSession::refresh_counters() {
    storage::set_decoder_counters(counters_, decoder_->stats());
}

std::vector<storage::ConsoleLine> CaptureSession::take_console(std::int64_t received_ns) {
    constexpr std::size_t kNewest = 20;
    std::vector<storage::ConsoleLine> lines;
    lines.reserve(collector_.console.size());
    for (auto& c : collector_.console) {
        lines.push_back({received_ns, c.port, std::move(c.text)});
        newest_console_.push_back(lines.back());
    }
    collector_.console.clear();
    while (newest_console_.size() > kNewest) newest_console_.pop_front();
    return lines;
}

std::vector<storage::ExceptionCount> CaptureSession::changed_exceptions() {
    std::vector<storage::ExceptionCount> now;
    for (const auto& [number, e] : protocol::exceptions_of(*decoder_)) {
        now.push_back({number, e.entries, e.cycles});
    }
    if (now == exceptions_) return {};
    exceptions_ = now;
    return now;
}

std::vector<storage::TaskSummary> task_summaries(const gmon::TaskSplit& split) {
    std::vector<storage::TaskSummary> list;
    for (const auto& t : split.tasks()) {
        if (t.number <= gmon::kUnknownTask) continue;  // the pseudo-tasks
        list.push_back({t.number, t.handle, t.name, t.samples, t.switches, t.deleted});
    }
    return list;
}

std::vector<storage::TaskSummary> CaptureSession::changed_tasks(std::int64_t received_ns,
                                                                bool now) {
    if (!collector_.tasks.has_tasks()) return {};
    constexpr std::int64_t kInterval = 1'000'000'000;
    if (!now && received_ns - tasks_stored_ns_ < kInterval) return {};
    std::vector<storage::TaskSummary> list = task_summaries(collector_.tasks);
    if (list == tasks_) return {};
    tasks_ = list;
    tasks_stored_ns_ = received_ns;
    return list;
}

void CaptureSession::on_hello(const protocol::TargetHello& hello) {
    target_ = ingest::target_info_of(hello);
    storage::TargetOp op{id_, target_, "", "", ""};
    if (firmware_for_) {
        const PickedFirmware picked = firmware_for_(hello);
        if (picked.refused) {
            spec_.elf_path.clear();
            spec_.elf_build_id.clear();
            spec_.elf_sha256.clear();
            op.clear_elf = true;
        } else if (!picked.elf_path.empty()) {
            spec_.elf_path = op.elf_path = picked.elf_path;
            spec_.elf_build_id = op.elf_build_id = picked.build_id;
            spec_.elf_sha256 = op.elf_sha256 = picked.sha256;
        }
    }
    writer_.submit(std::move(op));
}

gmon::Aggregate CaptureSession::take_changes() {
    return std::exchange(changes_, {});
}

bool CaptureSession::submit_records(std::vector<std::uint8_t> raw, std::int64_t received_ns,
                                    std::size_t held_back) {
    refresh_counters();
    // The live view's newest arcs: only the chunk's tail is looked at.
    constexpr std::size_t kNewest = 8;
    std::size_t found = 0;
    auto first = collector_.records.end();
    while (first != collector_.records.begin() && found < kNewest) {
        --first;
        if (first->kind == protocol::RecordKind::kArc) ++found;
    }
    for (auto it = first; it != collector_.records.end(); ++it) {
        if (it->kind == protocol::RecordKind::kArc) newest_arcs_.push_back(*it);
    }
    while (newest_arcs_.size() > kNewest) newest_arcs_.pop_front();
    const std::size_t records = collector_.records.size();
    const std::size_t bytes = raw.size();
    // The tree goes to storage at most once a second (each copy replaces the last one); a
    // refused chunk loses only a copy the next one (or the close) makes good.
    std::shared_ptr<const gmon::CallingContextTree> tree;
    constexpr std::int64_t kTreeInterval = 1'000'000'000;
    if (received_ns - calling_context_stored_ns_ >= kTreeInterval) {
        tree = collector_.calling_context.take_changed();
        if (tree) calling_context_stored_ns_ = received_ns;
    }
    storage::ChunkOp op{id_,
                        received_ns,
                        {},
                        {},
                        counters_,
                        take_console(received_ns),
                        changed_exceptions(),
                        std::nullopt,
                        std::move(tree)};
    op.tasks = changed_tasks(received_ns, std::exchange(tasks_due_, false));
    // The next chunk is likely as large: room for it now, not grown copy by copy, in a buffer
    // the writer is done with when it has one (its pages are mapped already).
    if (gathered_.empty() && gathered_.capacity() < raw.size()) {
        gathered_ = writer_.raw_buffer();
        gathered_.reserve(raw.size());
    }
    op.counters.bytes_in -= held_back;  // the row holds what it says it holds
    op.raw = std::move(raw);
    op.raw_codec = raw_codec_;
    // This thread sums every chunk's records, whatever the writer's load: the live view needs
    // the sums, and storage adds them as they are (ChunkOp::delta).
    gmon::Aggregate sums;
    sums.add(collector_.records);
    op.delta = sums;
    if (writer_.behind()) {
        // The writer is behind: this thread also encodes the chunk's records (their
        // compression is about as much work as the raw bytes', which the writer keeps, unless
        // the records rebuild them: then they are stored as such from here), and their buffer
        // stays here for the next chunk.
        const bool rebuilt = raw_codec_ != storage::RawCodec::kVerbatim;
        op.encoded = std::make_shared<const storage::EncodedChunk>(storage::encode_chunk(
            received_ns,
            rebuilt ? std::span<const std::uint8_t>(op.raw) : std::span<const std::uint8_t>(),
            collector_.records, raw_codec_));
        if (rebuilt) op.raw.clear();
        collector_.records.clear();
    } else {
        op.records = std::move(collector_.records);
        collector_.records = writer_.record_buffer();
        collector_.records.reserve(op.records.size());
    }
    if (writer_.submit(std::move(op))) {
        changes_.merge(sums);  // the live view shows what went to storage
        return true;
    }
    counters_.records_lost += records;
    counters_.bytes_lost += bytes;
    return false;
}

bool CaptureSession::on_chunk(std::span<const std::uint8_t> raw, std::int64_t received_ns) {
    if (gathered_.empty()) gathered_since_ns_ = received_ns;
    last_chunk_ns_ = received_ns;
    gathered_.insert(gathered_.end(), raw.begin(), raw.end());
    decoder_->feed(raw, collector_);
    collector_.calling_context.after_chunk(decoder_->stats());
    refresh_counters();  // bytes in and decoded are current between hand-overs too
    if (collector_.hello) on_hello(*std::exchange(collector_.hello, std::nullopt));
    return gathered_.size() < kHandOverBytes || hand_over();
}

bool CaptureSession::hand_over() {
    // The decoder's undecided tail stays for the next hand-over, with the records it becomes:
    // stored raw bytes decode, to their end, to exactly the stored records, whenever the
    // daemon dies (protocol/stream_decoder.h, pending_bytes).
    const std::size_t pending = std::min(decoder_->pending_bytes(), gathered_.size());
    if (gathered_.size() == pending && collector_.empty()) return true;
    std::vector<std::uint8_t> tail(gathered_.end() - static_cast<std::ptrdiff_t>(pending),
                                   gathered_.end());
    gathered_.resize(gathered_.size() - pending);
    const std::int64_t since = std::exchange(gathered_since_ns_, last_chunk_ns_);
    return submit_records(std::exchange(gathered_, std::move(tail)), since, pending);
}

void CaptureSession::hand_over_decided(std::int64_t at_ns) {
    if (gathered_.empty() && !collector_.empty()) gathered_since_ns_ = at_ns;  // no bytes came
    hand_over();
}

void CaptureSession::gap_started(const std::string& reason, std::int64_t at_ns) {
    if (open_gap_) return;
    decoder_->finish(collector_);            // what was held back across the break
    collector_.calling_context.mark_lost();  // whatever ran across the break is not seen
    tasks_due_ = true;                       // the task list as it stands, not a second old
    hand_over_decided(at_ns);
    refresh_counters();
    open_gap_ = storage::Gap{at_ns, 0, reason, {}, {}};  // a link knows only the time
}

void CaptureSession::gap_ended(std::int64_t at_ns) {
    if (!open_gap_) return;
    open_gap_->ended_ns = at_ns;
    ++counters_.gaps;
    writer_.submit(storage::GapOp{id_, *open_gap_, counters_});
    open_gap_.reset();
}

void CaptureSession::end(const std::string& state, std::int64_t at_ns) {
    decoder_->finish(collector_);
    collector_.calling_context.after_chunk(decoder_->stats());
    hand_over_decided(at_ns);
    if (open_gap_) gap_ended(at_ns);
    refresh_counters();
    writer_.submit(storage::CloseSessionOp{id_, state, at_ns, counters_,
                                           collector_.calling_context.tree(),
                                           changed_tasks(at_ns, true)});
}

}  // namespace rackprof::daemon::capture
