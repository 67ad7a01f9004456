// The systemd notify protocol (sd_notify): READY=1 once the daemon is capturing, WATCHDOG=1
// from the capture loop while WatchdogSec= is set, RELOADING=1 around a SIGHUP reload,
// STOPPING=1 on shutdown. Outside systemd (no NOTIFY_SOCKET) every call does nothing.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace rackprof::daemon::app {

class SystemdNotifier {
  public:
    void ready(const std::string& status);
    void reloading();
    void stopping();
    void watchdog();
    // How often systemd expects WATCHDOG=1 (WatchdogSec=), if it does.
    std::optional<std::chrono::microseconds> watchdog_interval() const;
};

}  // namespace rackprof::daemon::app
