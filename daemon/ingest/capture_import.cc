#include "daemon/ingest/capture_import.h"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "gmon/gmon_reader.h"
#include "protocol/wire_format.h"
#include "storage/session_store.h"

namespace rackprof::ingest {

namespace {

class FileDescriptor {
  public:
    explicit FileDescriptor(const std::filesystem::path& path)
        : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
        if (fd_ < 0)
            throw std::runtime_error("cannot open " + path.string() + ": " + std::strerror(errno));
        if (std::filesystem::is_directory(path)) {
            ::close(fd_);
            throw std::runtime_error(path.string() + " is a directory, not a capture file");
        }
    }
    ~FileDescriptor() { ::close(fd_); }
    FileDescriptor(const FileDescriptor&) = delete;
    FileDescriptor& operator=(const FileDescriptor&) = delete;

    // Reads up to size bytes; 0 at end of file.
    std::size_t read(std::uint8_t* buffer, std::size_t size, const std::filesystem::path& path) {
        while (true) {
            const ssize_t n = ::read(fd_, buffer, size);
            if (n >= 0) return static_cast<std::size_t>(n);
            if (errno != EINTR)
                throw std::runtime_error("cannot read " + path.string() + ": " +
                                         std::strerror(errno));
        }
    }

  private:
    int fd_;
};

// Passes everything on and keeps the last HELLO.
class HelloTap : public protocol::RecordSink {
  public:
    explicit HelloTap(protocol::RecordSink& next) : next_(next) {}
    void on_records(std::span<const protocol::Record> batch) override { next_.on_records(batch); }
    void on_event(const protocol::StreamEvent& event) override {
        if (const auto* h = std::get_if<protocol::TargetHello>(&event)) hello = *h;
        next_.on_event(event);
    }
    std::optional<protocol::TargetHello> hello;

  private:
    protocol::RecordSink& next_;
};

// The wire with its format decided: "auto" becomes hex or bin by the first bytes.
WireSpec decided_wire(const WireSpec& wire, std::span<const std::uint8_t> head) {
    WireSpec decided = wire;
    if (decided.format == "auto") {
        const bool text = protocol::wire_format(wire.protocol).traits.text_encoding &&
                          detect_encoding(head) == protocol::LegacyEncoding::kHex;
        decided.format = text ? "hex" : "bin";
    }
    return decided;
}

Imported finished(protocol::StreamDecoder& decoder, HelloTap& tap, const WireSpec& wire) {
    decoder.finish(tap);
    Imported out;
    out.kind = InputKind::kCapture;
    out.format = wire.format;
    out.stats = decoder.stats();
    out.hello = tap.hello;
    out.exceptions = protocol::exceptions_of(decoder);
    return out;
}

// Wide counts and addresses as 32-bit records (a count above 2^32-1 becomes several).
void emit_records(const gmon::Aggregate& aggregate, protocol::RecordSink& sink) {
    if (auto* into = dynamic_cast<gmon::AggregateSink*>(&sink)) {
        into->add(aggregate);  // as it is: wide counts, 64-bit addresses
        return;
    }
    std::vector<protocol::Record> batch;
    auto push = [&](protocol::Record r, std::uint64_t count) {
        for (; count > 0; count -= r.count) {
            r.count = static_cast<std::uint32_t>(std::min<std::uint64_t>(count, 0xFFFFFFFFu));
            batch.push_back(r);
        }
    };
    auto narrow = [](std::uint64_t address) {
        if (address > 0xFFFFFFFFu)
            throw gmon::GmonFormatError(
                "addresses above 4 GiB: only a 32-bit target's gmon.out can be stored");
        return static_cast<std::uint32_t>(address);
    };
    for (const auto& a : aggregate.arcs())
        push(protocol::Record::arc(narrow(a.from_pc), narrow(a.self_pc)), a.count);
    for (const auto& p : aggregate.pc_samples())
        push(protocol::Record::pc_sample(narrow(p.pc)), p.count);
    if (!batch.empty()) sink.on_records(batch);
}

bool wants_gmon(const ImportSpec& spec, std::span<const std::uint8_t> head) {
    return spec.kind == InputKind::kGmon || (spec.kind == InputKind::kAuto && is_gnu_gmon(head));
}

}  // namespace

std::string build_id_hex(const std::vector<std::uint8_t>& build_id) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    for (std::uint8_t b : build_id) {
        out += kHex[b >> 4];
        out += kHex[b & 0xF];
    }
    return out;
}

protocol::LegacyEncoding detect_encoding(std::span<const std::uint8_t> head) {
    std::size_t digits = 0;
    for (std::uint8_t c : head.first(std::min<std::size_t>(head.size(), 4096))) {
        if (std::isxdigit(c)) {
            ++digits;
        } else if (!std::isspace(c)) {
            return protocol::LegacyEncoding::kBinary;
        }
    }
    return digits > 0 ? protocol::LegacyEncoding::kHex : protocol::LegacyEncoding::kBinary;
}

bool is_gnu_gmon(std::span<const std::uint8_t> head) {
    return head.size() >= 4 && std::memcmp(head.data(), "gmon", 4) == 0;
}

GmonImport import_gmon(std::span<const std::uint8_t> bytes, const gmon::TargetLayout& layout) {
    const gmon::GmonData data = gmon::merge_duplicates(gmon::parse_gmon(bytes, layout));
    GmonImport out;
    out.info.kind = InputKind::kGmon;
    out.info.format = "gmon";
    out.info.stats.bytes_in = bytes.size();
    for (const auto& a : data.arcs) {
        out.aggregate.add_arc(a.from_pc, a.self_pc, a.count);
        out.info.stats.arcs += a.count;
    }
    for (const auto& h : data.histograms) {
        const auto shape = gmon::shape_of(h);
        out.info.histograms.push_back(shape);
        for (std::size_t i = 0; i < h.bins.size(); ++i) {
            if (!h.bins[i]) continue;
            out.aggregate.add_pc(gmon::bin_address(shape, i), h.bins[i]);
            out.info.stats.pc_samples += h.bins[i];
        }
    }
    return out;
}

Imported import_bytes(std::span<const std::uint8_t> bytes, const ImportSpec& spec,
                      protocol::RecordSink& sink) {
    if (wants_gmon(spec, bytes)) {
        auto gmon = import_gmon(bytes, spec.layout);
        emit_records(gmon.aggregate, sink);
        return std::move(gmon.info);
    }
    const WireSpec wire = decided_wire(spec.wire, bytes);
    const auto decoder = protocol::make_decoder(wire);
    HelloTap tap(sink);
    decoder->feed(bytes, tap);
    return finished(*decoder, tap, wire);
}

Imported import_file(const std::filesystem::path& path, const ImportSpec& spec,
                     protocol::RecordSink& sink, const ProgressCallback& progress,
                     const PieceCallback& piece) {
    FileDescriptor fd(path);
    std::vector<std::uint8_t> buffer(1 << 20);
    std::size_t got = 0;
    while (got < 4096) {  // enough to tell what the file is
        const std::size_t n = fd.read(buffer.data() + got, 4096 - got, path);
        if (n == 0) break;
        got += n;
    }
    const std::span<const std::uint8_t> head(buffer.data(), got);
    if (wants_gmon(spec, head)) {
        std::vector<std::uint8_t> bytes(head.begin(), head.end());
        while (const std::size_t n = fd.read(buffer.data(), buffer.size(), path))
            bytes.insert(bytes.end(), buffer.begin(),
                         buffer.begin() + static_cast<std::ptrdiff_t>(n));
        try {
            auto gmon = import_gmon(bytes, spec.layout);
            emit_records(gmon.aggregate, sink);
            return std::move(gmon.info);
        } catch (const gmon::GmonFormatError& e) {
            throw gmon::GmonFormatError(path.string() + ": " + e.what());
        }
    }
    std::error_code ec;
    const std::uint64_t total = std::filesystem::file_size(path, ec);
    const WireSpec wire = decided_wire(spec.wire, head);
    const auto decoder = protocol::make_decoder(wire);
    HelloTap tap(sink);
    decoder->feed(head, tap);
    if (piece && !head.empty()) piece(head);
    std::uint64_t done = got;
    if (progress) progress(done, ec ? 0 : total);
    while (const std::size_t n = fd.read(buffer.data(), buffer.size(), path)) {
        const std::span<const std::uint8_t> bytes(buffer.data(), n);
        decoder->feed(bytes, tap);
        if (piece) piece(bytes);
        done += n;
        if (progress) progress(done, ec ? 0 : total);
    }
    return finished(*decoder, tap, wire);
}

Imported redecode_session(storage::SessionStore& store, std::int64_t session, const WireSpec& wire,
                          protocol::RecordSink& sink) {
    const auto decoder = protocol::make_decoder(wire);
    HelloTap tap(sink);
    store.for_each_chunk(
        session, [&](std::int64_t, std::span<const std::uint8_t> raw) { decoder->feed(raw, tap); });
    return finished(*decoder, tap, wire);
}

}  // namespace rackprof::ingest
