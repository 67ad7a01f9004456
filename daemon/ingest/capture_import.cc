#include "daemon/ingest/capture_import.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "gmon/gmon_reader.h"
#include "protocol/wire_format.h"
#include "storage/session_store.h"

namespace rackprof::daemon::ingest {

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
    int get() const { return fd_; }
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

// Passes everything on, keeps the last HELLO, counts the enter/exit events and builds their
// calling-context tree.
class HelloTap : public protocol::RecordSink {
  public:
    explicit HelloTap(protocol::RecordSink& next) : next_(next) {}
    void on_records(std::span<const protocol::Record> batch) override { next_.on_records(batch); }
    void on_event(const protocol::StreamEvent& event) override {
        if (const auto* h = std::get_if<protocol::TargetHello>(&event)) hello = *h;
        calling_context.on_event(event);
        if (std::holds_alternative<protocol::FunctionEvent>(event)) ++function_events;
        if (std::holds_alternative<protocol::EventsLost>(event)) ++events_lost;
        next_.on_event(event);
    }
    // Feeds one chunk, then marks what its loss counters say was lost.
    void feed(protocol::StreamDecoder& decoder, std::span<const std::uint8_t> bytes) {
        decoder.feed(bytes, *this);
        calling_context.after_chunk(decoder.stats());
    }
    std::optional<protocol::TargetHello> hello;
    CallingContextFeed calling_context;
    std::uint64_t function_events = 0;
    std::uint64_t events_lost = 0;

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
    tap.calling_context.after_chunk(decoder.stats());
    Imported out;
    out.kind = InputKind::kCapture;
    out.format = wire.format;
    out.stats = decoder.stats();
    out.hello = tap.hello;
    out.function_events = tap.function_events;
    out.events_lost = tap.events_lost;
    out.exceptions = protocol::exceptions_of(decoder);
    out.calling_context = tap.calling_context.tree();
    return out;
}

// A gmon.out's counts as 32-bit records, in pieces (a count above 2^32-1 becomes several).
class RecordPieces {
  public:
    explicit RecordPieces(protocol::RecordSink& sink) : sink_(sink) { batch_.reserve(kPiece); }
    void arc(std::uint64_t from_pc, std::uint64_t self_pc, std::uint64_t count) {
        push(protocol::Record::arc(narrow(from_pc), narrow(self_pc)), count);
    }
    void pc(std::uint64_t pc, std::uint64_t count) {
        push(protocol::Record::pc_sample(narrow(pc)), count);
    }
    void flush() {
        if (!batch_.empty()) sink_.on_records(batch_);
        batch_.clear();
    }

  private:
    static constexpr std::size_t kPiece = 64 * 1024;

    static std::uint32_t narrow(std::uint64_t address) {
        if (address > 0xFFFFFFFFu)
            throw gmon::GmonFormatError(
                "addresses above 4 GiB: only a 32-bit target's gmon.out can be stored");
        return static_cast<std::uint32_t>(address);
    }
    void push(protocol::Record r, std::uint64_t count) {
        for (; count > 0; count -= r.count) {
            r.count = static_cast<std::uint32_t>(std::min<std::uint64_t>(count, 0xFFFFFFFFu));
            batch_.push_back(r);
            if (batch_.size() == kPiece) flush();
        }
    }

    protocol::RecordSink& sink_;
    std::vector<protocol::Record> batch_;
};

gmon::HistogramSpec shape_of(const gmon::HistogramInPlace& h) {
    return {h.header.low_pc, h.header.high_pc, 2, h.header.prof_rate, h.bins};
}

// Each count of an indexed gmon.out: arcs by address, then every non-zero bin at the address
// binning puts back into it. `done_with(h, end)`: bins below `end` of histogram h are read.
template <typename Arc, typename Pc, typename Done>
void for_each_count(std::span<const std::uint8_t> bytes, const gmon::GmonIndex& index, Arc&& arc,
                    Pc&& pc, Done&& done_with) {
    for (const auto& a : index.arcs) arc(a.from_pc, a.self_pc, a.count);
    for (const auto& h : index.histograms) {
        const auto shape = shape_of(h);
        constexpr std::uint64_t kStride = 1 << 19;  // bins read between two done_with calls
        for (std::uint64_t i = 0; i < h.bins; ++i) {
            if (const std::uint64_t n = gmon::bin_in_place(bytes, h, i, index.layout.order))
                pc(gmon::bin_address(shape, i), n);
            if ((i + 1) % kStride == 0) done_with(h, i + 1);
        }
        done_with(h, h.bins);
    }
}

Imported gmon_info(const gmon::GmonIndex& index, std::uint64_t bytes_in) {
    Imported info;
    info.kind = InputKind::kGmon;
    info.format = "gmon";
    info.stats.bytes_in = bytes_in;
    for (const auto& h : index.histograms) info.histograms.push_back(shape_of(h));
    return info;
}

bool wants_gmon(const ImportSpec& spec, std::span<const std::uint8_t> head) {
    return spec.kind == InputKind::kGmon || (spec.kind == InputKind::kAuto && is_gnu_gmon(head));
}

bool wants_tiva(const ImportSpec& spec, std::span<const std::uint8_t> head) {
    return spec.kind == InputKind::kTiva ||
           (spec.kind == InputKind::kAuto && gmon::looks_like_tiva_report(head));
}

constexpr std::uint64_t kMaxTivaBytes = 64 << 20;

// A capture is read 64 KiB at a time into one buffer, so that what read() copies is still in
// the core's cache when the decoder reads it: into a 1 MiB buffer the copy alone took three
// times as long (each read's destination had left the cache since the one before).
constexpr std::size_t kReadBytes = 64 << 10;
// Progress is told about once per this many bytes read.
constexpr std::uint64_t kProgressBytes = 1 << 20;

gmon::TivaReport parse_tiva_bytes(std::span<const std::uint8_t> bytes,
                                  const gmon::TivaShape& shape) {
    if (bytes.size() > kMaxTivaBytes)
        throw gmon::TivaFormatError("a Tiva binned PC report of more than 64 MiB: not one");
    return gmon::parse_tiva_report({reinterpret_cast<const char*>(bytes.data()), bytes.size()},
                                   shape);
}

// The report (or sum) the spec asks for, emitted, with the whole file's findings beside it.
Imported emit_tiva_file(gmon::TivaReport all, std::uint64_t bytes_in, const ImportSpec& spec,
                        protocol::RecordSink& sink) {
    Imported info = emit_tiva(pick_tiva_report(all, spec.tiva_report), bytes_in, sink);
    info.tiva = std::move(all);
    return info;
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
    const gmon::GmonIndex index = gmon::index_gmon(bytes, layout);
    GmonImport out;
    out.info = gmon_info(index, bytes.size());
    for_each_count(
        bytes, index,
        [&](std::uint64_t from, std::uint64_t self, std::uint64_t n) {
            out.aggregate.add_arc(from, self, n);
            out.info.stats.arcs += n;
        },
        [&](std::uint64_t pc, std::uint64_t n) {
            out.aggregate.add_pc(pc, n);
            out.info.stats.pc_samples += n;
        },
        [](const gmon::HistogramInPlace&, std::uint64_t) {});
    return out;
}

GmonFile::GmonFile(const std::filesystem::path& path, const gmon::TargetLayout& layout)
    : path_(path) {
    FileDescriptor fd(path);
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0)
        throw std::runtime_error("cannot stat " + path.string() + ": " + std::strerror(errno));
    if (!S_ISREG(st.st_mode))
        throw std::runtime_error(path.string() + " is not a regular file: it cannot be mapped");
    if (st.st_size > 0) {
        const auto size = static_cast<std::size_t>(st.st_size);
        void* at = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.get(), 0);
        if (at == MAP_FAILED)
            throw std::runtime_error("cannot map " + path.string() + ": " + std::strerror(errno));
        mapped_ = true;
        bytes_ = {static_cast<const std::uint8_t*>(at), size};
    }
    try {
        index_ = gmon::index_gmon(bytes_, layout);
    } catch (const gmon::GmonFormatError& e) {
        unmap();
        throw gmon::GmonFormatError(path.string() + ": " + e.what());
    }
    release(0, bytes_.size());  // the headers and arcs were read; the bins are read once more
    for (const auto& h : index_.histograms) shapes_.push_back(shape_of(h));
}

GmonFile::~GmonFile() {
    unmap();
}

void GmonFile::unmap() {
    if (mapped_) ::munmap(const_cast<std::uint8_t*>(bytes_.data()), bytes_.size());
    mapped_ = false;
}

// The pages of [from, to) leave this process's memory (they are the file's: read again if
// touched again), so reading the file whole never makes it resident whole.
void GmonFile::release(std::size_t from, std::size_t to) {
    if (!mapped_ || to <= from) return;
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    const std::size_t start = from / page * page;
    ::madvise(const_cast<std::uint8_t*>(bytes_.data()) + start, std::min(to, bytes_.size()) - start,
              MADV_DONTNEED);
}

Imported GmonFile::emit(protocol::RecordSink& sink) {
    const std::span<const std::uint8_t> bytes = bytes_;
    Imported info = gmon_info(index_, bytes_.size());
    std::uint64_t released = 0;  // bins of the histogram being read that were let go
    const auto done_with = [&](const gmon::HistogramInPlace& h, std::uint64_t end) {
        for (const auto& copy : h.copies)
            release(copy.offset + 2 * released, copy.offset + 2 * end);
        released = end == h.bins ? 0 : end;
    };
    try {
        if (auto* into = dynamic_cast<gmon::AggregateSink*>(&sink)) {
            gmon::Aggregate counts;  // kept wide: counts and 64-bit addresses as they are
            for_each_count(
                bytes, index_,
                [&](std::uint64_t from, std::uint64_t self, std::uint64_t n) {
                    counts.add_arc(from, self, n);
                    info.stats.arcs += n;
                },
                [&](std::uint64_t pc, std::uint64_t n) {
                    counts.add_pc(pc, n);
                    info.stats.pc_samples += n;
                },
                done_with);
            into->add(counts);
            return info;
        }
        RecordPieces pieces(sink);
        for_each_count(
            bytes, index_,
            [&](std::uint64_t from, std::uint64_t self, std::uint64_t n) {
                pieces.arc(from, self, n);
                info.stats.arcs += n;
            },
            [&](std::uint64_t pc, std::uint64_t n) {
                pieces.pc(pc, n);
                info.stats.pc_samples += n;
            },
            done_with);
        pieces.flush();
    } catch (const gmon::GmonFormatError& e) {
        throw gmon::GmonFormatError(path_.string() + ": " + e.what());
    }
    return info;
}

Imported emit_tiva(const gmon::TivaReport& report, std::uint64_t bytes_in,
                   protocol::RecordSink& sink) {
    Imported info;
    info.kind = InputKind::kTiva;
    info.format = "tiva";
    info.stats.bytes_in = bytes_in;
    info.histograms = {report.shape};
    RecordPieces pieces(sink);
    for (std::uint64_t bin = 0; bin < report.counts.size(); ++bin) {
        if (report.counts[bin] == 0) continue;
        pieces.pc(gmon::bin_address(report.shape, bin), report.counts[bin]);
        info.stats.pc_samples += report.counts[bin];
    }
    pieces.flush();
    return info;
}

gmon::TivaReport pick_tiva_report(const gmon::TivaReport& all, std::optional<std::size_t> which) {
    if (!which) return all;
    if (*which >= all.reports)
        throw gmon::TivaFormatError("no report " + std::to_string(*which + 1) +
                                    ": the file holds " + std::to_string(all.reports));
    return gmon::only_report(all, *which);
}

gmon::TivaReport read_tiva_file(const std::filesystem::path& path, const gmon::TivaShape& shape) {
    FileDescriptor fd(path);
    std::vector<std::uint8_t> bytes;
    std::vector<std::uint8_t> buffer(1 << 16);
    while (const std::size_t n = fd.read(buffer.data(), buffer.size(), path)) {
        bytes.insert(bytes.end(), buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(n));
        if (bytes.size() > kMaxTivaBytes) break;  // refused by the parse, unread past this
    }
    try {
        return parse_tiva_bytes(bytes, shape);
    } catch (const gmon::TivaFormatError& e) {
        throw gmon::TivaFormatError(path.string() + ": " + e.what());
    }
}

Imported import_bytes(std::span<const std::uint8_t> bytes, const ImportSpec& spec,
                      protocol::RecordSink& sink) {
    if (!wants_gmon(spec, bytes) && wants_tiva(spec, bytes))
        return emit_tiva_file(parse_tiva_bytes(bytes, spec.tiva), bytes.size(), spec, sink);
    if (wants_gmon(spec, bytes)) {
        auto gmon = import_gmon(bytes, spec.layout);
        if (auto* into = dynamic_cast<gmon::AggregateSink*>(&sink)) {
            into->add(gmon.aggregate);  // as it is: wide counts, 64-bit addresses
        } else {
            RecordPieces pieces(sink);
            for (const auto& a : gmon.aggregate.arcs()) pieces.arc(a.from_pc, a.self_pc, a.count);
            for (const auto& p : gmon.aggregate.pc_samples()) pieces.pc(p.pc, p.count);
            pieces.flush();
        }
        return std::move(gmon.info);
    }
    const WireSpec wire = decided_wire(spec.wire, bytes);
    const auto decoder = protocol::make_decoder(wire);
    HelloTap tap(sink);
    tap.feed(*decoder, bytes);
    return finished(*decoder, tap, wire);
}

Imported import_file(const std::filesystem::path& path, const ImportSpec& spec,
                     protocol::RecordSink& sink, const ProgressCallback& progress,
                     const PieceCallback& piece) {
    FileDescriptor fd(path);
    std::vector<std::uint8_t> buffer(kReadBytes);
    std::size_t got = 0;
    while (got < 4096) {  // enough to tell what the file is
        const std::size_t n = fd.read(buffer.data() + got, 4096 - got, path);
        if (n == 0) break;
        got += n;
    }
    const std::span<const std::uint8_t> head(buffer.data(), got);
    if (!wants_gmon(spec, head) && wants_tiva(spec, head)) {
        // Read on from here (a pipe cannot be read twice): a report is small.
        std::vector<std::uint8_t> bytes(head.begin(), head.end());
        while (const std::size_t n = fd.read(buffer.data(), buffer.size(), path)) {
            bytes.insert(bytes.end(), buffer.begin(),
                         buffer.begin() + static_cast<std::ptrdiff_t>(n));
            if (bytes.size() > kMaxTivaBytes) break;
        }
        try {
            return emit_tiva_file(parse_tiva_bytes(bytes, spec.tiva), bytes.size(), spec, sink);
        } catch (const gmon::TivaFormatError& e) {
            throw gmon::TivaFormatError(path.string() + ": " + e.what());
        }
    }
    if (wants_gmon(spec, head)) {
        if (std::filesystem::is_regular_file(path)) return GmonFile(path, spec.layout).emit(sink);
        // A pipe or a device can be neither mapped nor read twice: read whole, as it comes.
        std::vector<std::uint8_t> bytes(head.begin(), head.end());
        while (const std::size_t n = fd.read(buffer.data(), buffer.size(), path))
            bytes.insert(bytes.end(), buffer.begin(),
                         buffer.begin() + static_cast<std::ptrdiff_t>(n));
        try {
            return import_bytes(bytes, spec, sink);
        } catch (const gmon::GmonFormatError& e) {
            throw gmon::GmonFormatError(path.string() + ": " + e.what());
        }
    }
    std::error_code ec;
    const std::uint64_t total = std::filesystem::file_size(path, ec);
    const WireSpec wire = decided_wire(spec.wire, head);
    const auto decoder = protocol::make_decoder(wire);
    HelloTap tap(sink);
    tap.feed(*decoder, head);
    if (piece && !head.empty()) piece(head);
    std::uint64_t done = got;
    if (progress) progress(done, ec ? 0 : total);
    while (const std::size_t n = fd.read(buffer.data(), buffer.size(), path)) {
        const std::span<const std::uint8_t> bytes(buffer.data(), n);
        tap.feed(*decoder, bytes);
        if (piece) piece(bytes);
        const std::uint64_t before = done;
        done += n;
        if (progress && before / kProgressBytes != done / kProgressBytes)
            progress(done, ec ? 0 : total);
    }
    if (progress && done % kProgressBytes != 0) progress(done, ec ? 0 : total);
    return finished(*decoder, tap, wire);
}

Imported redecode_session(storage::SessionStore& store, std::int64_t session, const WireSpec& wire,
                          protocol::RecordSink& sink) {
    const auto decoder = protocol::make_decoder(wire);
    HelloTap tap(sink);
    store.for_each_chunk(
        session, [&](std::int64_t, std::span<const std::uint8_t> raw) { tap.feed(*decoder, raw); });
    return finished(*decoder, tap, wire);
}

}  // namespace rackprof::daemon::ingest
