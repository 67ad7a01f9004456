#include "daemon/app/systemd_notifier.h"

#include <systemd/sd-daemon.h>

namespace rackprof::daemon::app {

void SystemdNotifier::ready(const std::string& status) {
    sd_notify(0, ("READY=1\nSTATUS=" + status).c_str());
}

void SystemdNotifier::reloading() {
    sd_notify(0, "RELOADING=1\nSTATUS=reloading the configuration");
}

void SystemdNotifier::stopping() {
    sd_notify(0, "STOPPING=1\nSTATUS=stopping: committing every session");
}

void SystemdNotifier::watchdog() {
    sd_notify(0, "WATCHDOG=1");
}

std::optional<std::chrono::microseconds> SystemdNotifier::watchdog_interval() const {
    std::uint64_t usec = 0;
    if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) return std::chrono::microseconds(usec);
    return std::nullopt;
}

}  // namespace rackprof::daemon::app
