#include "daemon/capture_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace rackprof::daemon {

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

std::vector<std::uint8_t> head(const std::filesystem::path& path, std::size_t size) {
    FileDescriptor fd(path);
    std::vector<std::uint8_t> buffer(size);
    std::size_t got = 0;
    while (got < size) {
        const std::size_t n = fd.read(buffer.data() + got, size - got, path);
        if (n == 0) break;
        got += n;
    }
    buffer.resize(got);
    return buffer;
}

}  // namespace

protocol::LegacyEncoding detect_encoding(const std::filesystem::path& path) {
    const auto start = head(path, 4096);
    std::size_t digits = 0;
    for (std::uint8_t c : start) {
        if (std::isxdigit(c)) {
            ++digits;
        } else if (!std::isspace(c)) {
            return protocol::LegacyEncoding::kBinary;
        }
    }
    return digits > 0 ? protocol::LegacyEncoding::kHex : protocol::LegacyEncoding::kBinary;
}

bool is_gnu_gmon(const std::filesystem::path& path) {
    const auto start = head(path, 4);
    return start.size() == 4 && std::memcmp(start.data(), "gmon", 4) == 0;
}

DecodedCapture decode_capture(const std::filesystem::path& path, const WireSpec& wire,
                              gmon::Aggregate& aggregate, const ProgressCallback& progress,
                              const ConsoleCallback& console) {
    FileDescriptor fd(path);
    std::error_code ec;
    const std::uint64_t total = std::filesystem::file_size(path, ec);
    const auto decoder = make_decoder(wire);
    CaptureSink sink(aggregate, console);
    std::vector<std::uint8_t> buffer(1 << 20);
    std::uint64_t done = 0;
    while (const std::size_t n = fd.read(buffer.data(), buffer.size(), path)) {
        decoder->feed(std::span<const std::uint8_t>(buffer.data(), n), sink);
        done += n;
        if (progress) progress(done, ec ? 0 : total);
    }
    decoder->finish(sink);
    return {decoder->stats(), sink.hello, exceptions_of(*decoder)};
}

}  // namespace rackprof::daemon
