#include "daemon/capture/board.h"

#include <openssl/evp.h>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <atomic>
#include <fstream>

namespace rackprof::daemon::capture {

std::string file_sha256(const std::filesystem::path& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return {};
    std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
    EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
    std::vector<char> buffer(1 << 16);
    while (f.read(buffer.data(), static_cast<std::streamsize>(buffer.size())) || f.gcount() > 0) {
        EVP_DigestUpdate(ctx.get(), buffer.data(), static_cast<std::size_t>(f.gcount()));
    }
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int size = 0;
    EVP_DigestFinal_ex(ctx.get(), digest, &size);
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    for (unsigned int i = 0; i < size; ++i) {
        out += kHex[digest[i] >> 4];
        out += kHex[digest[i] & 0xF];
    }
    return out;
}

Board::Board(boost::asio::io_context& io, config::BoardConfig config,
             storage::StorageWriter& writer, std::shared_ptr<spdlog::logger> log,
             std::chrono::milliseconds reconnect_min, std::chrono::milliseconds reconnect_max,
             std::filesystem::path firmware_dir, BoardEventSink events, LiveSnapshots* live)
    : io_(io),
      config_(std::move(config)),
      uri_(config::parse_link_uri(config_.link)),
      writer_(writer),
      log_(std::move(log)),
      reconnect_min_(reconnect_min),
      reconnect_max_(reconnect_max),
      backoff_(reconnect_min),
      retry_timer_(io),
      firmware_dir_(std::move(firmware_dir)),
      events_(std::move(events)),
      live_(live) {}

Board::~Board() = default;

void Board::start() {
    if (!config_.elf.empty()) load_elf(config_.elf);
    if (uri_.scheme == "sim") {
        sim::PtyBoardOptions o;
        o.simulator.model = uri_.path;
        o.simulator.seed = uri_.number("seed", 1);
        o.simulator.max_iterations = 0;
        o.simulator.addr_bytes = config_.addr_bytes;
        o.simulator.encoding = config_.format == "hex" ? protocol::LegacyEncoding::kHex
                                                       : protocol::LegacyEncoding::kBinary;
        o.simulator.protocol =
            sim::simulated_protocol(config_.protocol).value_or(sim::WireProtocol::kLegacy);
        if (o.simulator.protocol == sim::WireProtocol::kFramed) {
            o.simulator.arc_cache = uri_.number("arc_cache", 0);
            o.simulator.pc_cache = uri_.number("pc_cache", 0);
        }
        o.rate = uri_.number("rate", 20000);
        // In real time: PC samples at the rate the profile assumes, so a session's sampled
        // seconds are the seconds it ran (a faster wire does not make the target run faster).
        o.sample_hz = o.simulator.sample_hz;
        // 20 ms of bytes per piece, within bounds whatever the rate (parse_link_uri bounds it).
        o.simulator.piece_bytes = std::clamp<std::size_t>(o.rate / 50, 64, 256u << 10);
        simulated_ = std::make_unique<sim::PtyBoard>(o);
        simulated_->start();
        link_ = make_link(io_, config::parse_link_uri("serial://" + simulated_->device().string()));
    } else {
        link_ = make_link(io_, uri_, config_.elf);
    }
    link_->set_backpressure([this] { return writer_.has_room(); });
    log_->info("[{}] link {}", config_.name, config_.link);
    connect();
}

void Board::load_elf(const std::filesystem::path& path) {
    try {
        elf_ = gmon::Symbolizer::load(path);
        elf_path_ = path;
        elf_sha256_ = file_sha256(path);
    } catch (const std::exception& e) {
        // The board still captures; without the ELF, decoding cannot check the code range.
        log_->warn("[{}] firmware ELF unusable, capturing without it: {}", config_.name, e.what());
    }
}

// A framed target introduced itself: check the configured ELF against its build-id, or find
// the uploaded one with that build-id (the session records it with what the target said).
PickedFirmware Board::firmware_for(const protocol::TargetHello& hello) {
    const std::string id = ingest::build_id_hex(hello.build_id);
    log_->info(
        "[{}] target: protocol v{}, {}-byte addresses, text {:#x}-{:#x}, {} Hz sampling, "
        "{} Hz core, build-id {}{}",
        config_.name, hello.version, hello.addr_bytes, hello.text_lo, hello.text_hi,
        hello.sample_hz, hello.core_clock_hz, id.empty() ? "(none)" : id,
        hello.flags & protocol::kHelloArcCache ? ", arc cache on" : "");
    PickedFirmware picked;
    const storage::TargetInfo said = ingest::target_info_of(hello);
    if (elf_) {
        if (const std::string conflict = ingest::arch_conflict(said, *elf_); !conflict.empty()) {
            // Symbols of another core's code would be wrong everywhere: addresses only.
            log_->error("[{}] {}: not using that ELF for this target", config_.name, conflict);
            elf_.reset();
            elf_path_.clear();
            picked.refused = true;
            return picked;
        }
    }
    if (!config_.elf.empty()) {
        if (elf_ && !id.empty() && !elf_->build_id().empty() && elf_->build_id() != id) {
            log_->warn(
                "[{}] the configured ELF {} has build-id {}, but the target runs {}: "
                "symbols may be wrong (upload the right image or fix 'elf')",
                config_.name, config_.elf, elf_->build_id(), id);
        }
    } else if (!id.empty() && (!elf_ || elf_->build_id() != id)) {
        const auto path = firmware_dir_ / (id + ".elf");
        if (std::filesystem::exists(path)) {
            load_elf(path);
            if (elf_ && elf_path_ == path) {
                log_->info("[{}] firmware picked by build-id: {}", config_.name, path.string());
                picked = {path.string(), elf_->build_id(), elf_sha256_};
            }
        } else {
            log_->warn(
                "[{}] no uploaded firmware has build-id {} (PUT /api/v1/firmware): "
                "profiles will show addresses only",
                config_.name, id);
            elf_.reset();  // one picked for an earlier image is not this one's
            elf_path_.clear();
        }
    }
    return picked;
}

void Board::connect() {
    if (stopping_) return;
    set_state(LinkState::kConnecting);
    link_->open([this](std::span<const std::uint8_t> bytes) { on_data(bytes); },
                [this](const LinkClosed& closed) { on_closed(closed); });
    // Serial and file links open synchronously; a failure arrives as a posted on_closed. A
    // TCP or GDB server is connected once its first bytes come.
    if (uri_.scheme != "tcp" && !uri_.is_probe()) {
        boost::asio::post(io_, [this] {
            if (state_ == LinkState::kConnecting && !stopping_) {
                set_state(LinkState::kConnected);
                if (session_ && session_->in_gap()) session_->gap_ended(unix_now_ns());
                if (!session_ && config_.autostart) start_session();
            }
        });
    }
}

void Board::on_data(std::span<const std::uint8_t> bytes) {
    if (state_ != LinkState::kConnected) {  // TCP: the first bytes prove the connection
        set_state(LinkState::kConnected);
        if (session_ && session_->in_gap()) session_->gap_ended(unix_now_ns());
        if (!session_ && config_.autostart) start_session();
    }
    backoff_ = reconnect_min_;
    failed_attempts_ = 0;
    if (!session_) return;  // no session: bytes are not kept
    const std::uint64_t lost_before = session_->counters().bytes_lost;
    if (!session_->on_chunk(bytes, unix_now_ns())) said_lost(lost_before);
}

void Board::said_lost(std::uint64_t lost_before) {
    log_->warn("[{}] session {}: storage queue full, {} bytes lost (counted)", config_.name,
               session_->id(), session_->counters().bytes_lost - lost_before);
}

void Board::on_closed(const LinkClosed& closed) {
    if (stopping_) return;
    link_->close();
    if (closed.final) {
        log_->info("[{}] link finished: {}", config_.name, closed.reason);
        set_state(LinkState::kFinished, closed.reason);
        stop_session();
        return;
    }
    const bool was_connected = state_ == LinkState::kConnected;
    if (was_connected) {
        log_->warn("[{}] disconnected: {}", config_.name, closed.reason);
        if (session_) session_->gap_started(closed.reason, unix_now_ns());
    } else if (failed_attempts_ == 0 || closed.reason != last_error_) {
        log_->warn("[{}] cannot connect: {}", config_.name,
                   closed.reason);  // logged once per new reason
    }
    ++failed_attempts_;
    set_state(LinkState::kDisconnected, closed.reason);
    schedule_reconnect();
}

void Board::schedule_reconnect() {
    retry_timer_.expires_after(backoff_);
    backoff_ = std::min(backoff_ * 2, reconnect_max_);
    retry_timer_.async_wait([this](const boost::system::error_code& ec) {
        if (ec || stopping_) return;
        connect();
    });
}

void Board::set_state(LinkState state, const std::string& why) {
    if (!why.empty()) last_error_ = why;
    if (state == state_) return;
    log_->debug("[{}] {} -> {}", config_.name, to_string(state_), to_string(state));
    if (state == LinkState::kConnected) {
        log_->info("[{}] connected", config_.name);
        // A reconnect is a connection made again after one was had, not an attempt; and a
        // connected link has no error now (the last one was the reason it was down).
        if (connected_once_) ++reconnects_;
        connected_once_ = true;
        last_error_.clear();
    }
    state_ = state;
    if (events_) events_({config_.name, "link", to_string(state), last_error_, std::nullopt});
}

bool Board::start_session() {
    if (session_) stop_session();
    storage::NewSession spec;
    spec.board = config_.name;
    spec.link = config_.link;
    spec.protocol = config_.protocol;
    spec.format = config_.format;
    spec.addr_bytes = config_.addr_bytes;
    spec.started_ns = unix_now_ns();
    protocol::WireSpec wire = ingest::wire_spec_of(config_);
    spec.wire_options = ingest::wire_options_json(wire);
    if (elf_) {
        spec.elf_path = elf_path_.string();
        spec.elf_build_id = elf_->build_id();
        spec.elf_sha256 = elf_sha256_;
        spec.arch = elf_->arch();
    }
    wire.code_range = ingest::decode_range_of(elf_.get());
    session_.emplace(writer_.reserve_session_id(), spec, wire, writer_,
                     [this](const protocol::TargetHello& hello) { return firmware_for(hello); });
    publish_live();  // readable as soon as it exists
    if (events_) events_({config_.name, "session_started", "capturing", "", session_->id()});
    log_->info("[{}] session {} capturing", config_.name, session_->id());
    return true;
}

void Board::stop_session() {
    if (!session_) return;
    session_->end("completed", unix_now_ns());
    // Storage losses as known now; the writer reports the final count when the close commits.
    const auto c = writer_.with_storage_losses(session_->id(), session_->counters());
    log_->info(
        "[{}] session {} completed: {} bytes, {} arcs, {} PC samples, {} bytes discarded, {} gaps, "
        "{} records lost to a full queue, {} to failed commits",
        config_.name, session_->id(), c.bytes_in, c.arcs, c.pc_samples, c.bytes_discarded, c.gaps,
        c.records_lost, c.records_lost_storage);
    const auto& traits = protocol::wire_format(config_.protocol).traits;
    if (traits.frames && !traits.swo) {
        log_->info(
            "[{}] session {} frames: {} good, {} bad, {} lost; {} records dropped on the "
            "target",
            config_.name, session_->id(), c.frames, c.frames_bad, c.frames_lost, c.target_dropped);
    }
    if (traits.swo) {
        log_->info("[{}] session {}: {} ITM overflows, {} sleep samples", config_.name,
                   session_->id(), c.overflows, c.sleep_samples);
    }
    if (events_) events_({config_.name, "session_stopped", "completed", "", session_->id()});
    if (live_) live_->retire(session_->id());
    session_.reset();
}

void Board::shutdown() {
    stopping_ = true;
    retry_timer_.cancel();
    if (simulated_) simulated_->stop();
    if (link_) link_->close();
    stop_session();
    simulated_.reset();
    set_state(LinkState::kStopped);
}

void Board::publish_live() {
    if (!session_) return;
    // What the session gathered since the last publish goes to storage and into the changes
    // published below.
    const std::uint64_t lost_before = session_->counters().bytes_lost;
    if (!session_->hand_over()) said_lost(lost_before);
    if (!live_) return;
    LiveState state;
    state.board = config_.name;
    state.link_state = to_string(state_);
    state.newest_arcs.assign(session_->newest_arcs().begin(), session_->newest_arcs().end());
    state.newest_console.assign(session_->newest_console().begin(),
                                session_->newest_console().end());
    state.elf = elf_;
    state.announced_range = ingest::announced_range(session_->target());
    state.counters = writer_.with_storage_losses(session_->id(), session_->counters());
    state.storage_error = storage_error();
    live_->publish(session_->id(), std::move(state), session_->take_changes());
}

std::string Board::storage_error() {
    const storage::StorageHealth health = writer_.health();
    return health.failing && session_ ? health.error : "";
}

BoardStatus Board::status() {
    BoardStatus s;
    s.name = config_.name;
    s.link = config_.link;
    s.state = state_;
    s.last_error = last_error_;
    s.reconnects = reconnects_;
    if (session_) {
        s.session = session_->id();
        s.counters = writer_.with_storage_losses(session_->id(), session_->counters());
        s.storage_error = storage_error();
    }
    return s;
}

}  // namespace rackprof::daemon::capture
