#!/usr/bin/env bash
# Installs what rackprof needs to build and test on Debian (bookworm or later).
# Safe to run again: it installs only what is missing.
set -euo pipefail

packages=(
    build-essential cmake ninja-build pkg-config
    libboost1.81-dev nlohmann-json3-dev libsqlite3-dev libspdlog-dev libtomlplusplus-dev
    doctest-dev libelf-dev libdw-dev libssl-dev libsystemd-dev
    binutils-arm-none-eabi      # arm-none-eabi-gprof: the oracle the tests compare against
    gcc-arm-none-eabi           # target-fw: the Cortex-M runtime and example firmware
    qemu-system-arm             # target-fw: the examples run on emulated boards in the e2e tests
    python3                     # tests/e2e drive QEMU and rackprof convert
    systemd                     # systemd-analyze: the deploy tests verify the unit
    dpkg-dev fakeroot file      # cpack builds the .deb; its tests inspect it
    curl                        # the API tests fetch gmon.out as CI jobs do
)

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]}"
    sudo_cmd=()
    [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
    "${sudo_cmd[@]}" apt-get update -q
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
else
    echo "setup: all build and test dependencies present"
fi
