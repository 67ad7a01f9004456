// Opening a serial device the way a capture needs it. Kept apart from the rest of the links
// because Linux's termios2 (any baud rate) cannot share a translation unit with <termios.h>.
#include <asm/termbits.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <system_error>

namespace rackprof::daemon::capture {

int open_serial_device(const std::string& path, std::uint32_t baud) {
    const int fd = ::open(path.c_str(), O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) throw std::system_error(errno, std::generic_category(), path);
    auto fail = [&](const char* what) {
        const int err = errno;
        ::close(fd);
        throw std::system_error(err, std::generic_category(), path + ": " + what);
    };
    // Exclusive: a terminal program opened later cannot steal bytes.
    if (::ioctl(fd, TIOCEXCL) != 0) fail("TIOCEXCL");
    struct termios2 tio {};
    if (::ioctl(fd, TCGETS2, &tio) != 0) fail("TCGETS2 (not a serial device?)");
    tio.c_iflag &= ~static_cast<tcflag_t>(IGNBRK | BRKINT | PARMRK | ISTRIP | INLCR | IGNCR |
                                          ICRNL | IXON | IXOFF | IXANY);
    tio.c_oflag &= ~static_cast<tcflag_t>(OPOST);
    tio.c_lflag &= ~static_cast<tcflag_t>(ECHO | ECHONL | ICANON | ISIG | IEXTEN);
    tio.c_cflag &= ~static_cast<tcflag_t>(CSIZE | PARENB | CSTOPB | CRTSCTS);
    tio.c_cflag |= CS8 | CREAD | CLOCAL;
    if (baud != 0) {
        // BOTHER: the exact rate, including non-standard ones such as 1 500 000.
        tio.c_cflag &= ~static_cast<tcflag_t>(CBAUD);
        tio.c_cflag |= BOTHER;
        tio.c_ispeed = baud;
        tio.c_ospeed = baud;
    }
    tio.c_cc[VMIN] = 1;
    tio.c_cc[VTIME] = 0;
    if (::ioctl(fd, TCSETS2, &tio) != 0) fail("TCSETS2");
    return fd;
}

}  // namespace rackprof::daemon::capture
