#include "daemon/board.h"

#include <openssl/evp.h>
#include <boost/asio/post.hpp>

#include <atomic>
#include <fstream>

namespace rackprof::daemon {

const char* to_string(LinkState state) {
    switch (state) {
        case LinkState::kConnecting:
            return "connecting";
        case LinkState::kConnected:
            return "connected";
        case LinkState::kDisconnected:
            return "disconnected";
        case LinkState::kFinished:
            return "finished";
        case LinkState::kStopped:
            return "stopped";
    }
    return "?";
}

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

Board::Board(boost::asio::io_context& io, BoardConfig config, storage::StorageWriter& writer,
             std::shared_ptr<spdlog::logger> log, std::chrono::milliseconds reconnect_min,
             std::chrono::milliseconds reconnect_max, BoardEventSink events)
    : io_(io),
      config_(std::move(config)),
      uri_(parse_link_uri(config_.link)),
      writer_(writer),
      log_(std::move(log)),
      reconnect_min_(reconnect_min),
      reconnect_max_(reconnect_max),
      backoff_(reconnect_min),
      retry_timer_(io),
      events_(std::move(events)) {}

Board::~Board() = default;

void Board::start() {
    if (!config_.elf.empty()) {
        try {
            elf_ = gmon::Symbolizer::load(config_.elf);
            elf_sha256_ = file_sha256(config_.elf);
        } catch (const std::exception& e) {
            // The board still captures; without the ELF, decoding cannot check the code range.
            log_->warn("[{}] firmware ELF unusable, capturing without it: {}", config_.name,
                       e.what());
        }
    }
    if (uri_.scheme == "sim") {
        PtyBoardOptions o;
        o.simulator.model = uri_.path;
        o.simulator.seed = uri_.number("seed", 1);
        o.simulator.max_iterations = 0;
        o.simulator.addr_bytes = config_.addr_bytes;
        o.simulator.encoding = config_.format == "hex" ? protocol::LegacyEncoding::kHex
                                                       : protocol::LegacyEncoding::kBinary;
        o.rate = uri_.number("rate", 20000);
        o.simulator.piece_bytes = std::max<std::size_t>(64, o.rate / 50);
        simulated_ = std::make_unique<PtyBoard>(o);
        simulated_->start();
        link_ = make_link(io_, parse_link_uri("serial://" + simulated_->device().string()));
    } else {
        link_ = make_link(io_, uri_);
    }
    log_->info("[{}] link {}", config_.name, config_.link);
    connect();
}

void Board::connect() {
    if (stopping_) return;
    set_state(LinkState::kConnecting);
    link_->open([this](std::span<const std::uint8_t> bytes) { on_data(bytes); },
                [this](const LinkClosed& closed) { on_closed(closed); });
    // Serial and file links open synchronously; a failure arrives as a posted on_closed.
    if (uri_.scheme != "tcp") {
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
    if (!session_->on_chunk(bytes, unix_now_ns())) {
        log_->warn("[{}] session {}: storage queue full, {} bytes lost (counted)", config_.name,
                   session_->handle(), bytes.size());
    }
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
        ++reconnects_;
        connect();
    });
}

void Board::set_state(LinkState state, const std::string& why) {
    if (!why.empty()) last_error_ = why;
    if (state == state_) return;
    log_->debug("[{}] {} -> {}", config_.name, to_string(state_), to_string(state));
    if (state == LinkState::kConnected) log_->info("[{}] connected", config_.name);
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
    protocol::LegacyOptions options;
    options.addr_bytes = config_.addr_bytes;
    options.encoding = config_.format == "hex" ? protocol::LegacyEncoding::kHex
                                               : protocol::LegacyEncoding::kBinary;
    if (elf_) {
        spec.elf_path = config_.elf;
        spec.elf_build_id = elf_->build_id();
        spec.elf_sha256 = elf_sha256_;
        if (elf_->code_high() <= 0x100000000ull) {
            options.code_range =
                protocol::AddressRange{static_cast<std::uint32_t>(elf_->code_low()),
                                       static_cast<std::uint32_t>(elf_->code_high())};
        }
    }
    session_.emplace(new_session_handle(), spec, options, writer_);
    if (events_) events_({config_.name, "session_started", "capturing", "", session_->handle()});
    log_->info("[{}] session {} capturing", config_.name, session_->handle());
    return true;
}

void Board::stop_session() {
    if (!session_) return;
    session_->end("completed", unix_now_ns());
    const auto& c = session_->counters();
    log_->info(
        "[{}] session {} completed: {} bytes, {} arcs, {} PC samples, {} bytes discarded, {} gaps, "
        "{} records lost",
        config_.name, session_->handle(), c.bytes_in, c.arcs, c.pc_samples, c.bytes_discarded,
        c.gaps, c.records_lost);
    if (events_) events_({config_.name, "session_stopped", "completed", "", session_->handle()});
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

BoardStatus Board::status() const {
    BoardStatus s;
    s.name = config_.name;
    s.link = config_.link;
    s.state = state_;
    s.last_error = last_error_;
    s.reconnects = reconnects_;
    if (session_) {
        s.session = session_->handle();
        s.counters = session_->counters();
    }
    return s;
}

}  // namespace rackprof::daemon
