#!/usr/bin/env bash
# Installs what rackprof needs to build and test on Debian (bookworm or later).
# Safe to run again: it installs only what is missing.
set -euo pipefail

packages=(
    build-essential cmake ninja-build pkg-config
    ccache mold                 # every build: a warm compiler cache and a fast linker (tests/run.sh)
    libcli11-dev                # the command line: options, ranges and help from declarations
    libboost1.81-dev nlohmann-json3-dev libsqlite3-dev libspdlog-dev libtomlplusplus-dev
    doctest-dev libelf-dev libdw-dev libssl-dev libsystemd-dev
    libzstd-dev                 # storage: raw chunks and record batches are kept compressed
    binutils-arm-none-eabi      # arm-none-eabi-gprof: the oracle the tests compare against
    gcc-arm-none-eabi           # target-fw: the Cortex-M runtime and example firmware
    qemu-system-arm             # target-fw: the examples run on emulated boards in the e2e tests
    gcc-riscv64-unknown-elf binutils-riscv64-unknown-elf  # target-fw/riscv: the RISC-V (rv32) runtime and firmware
    qemu-system-misc            # qemu-system-riscv32: target-fw/riscv's boards (virt, sifive_e)
    gdb-multiarch               # tests/bench/probe_bench: the baseline a gdb:// board is measured against
    python3                     # tests/e2e drive QEMU and rackprof convert
    systemd                     # systemd-analyze: the deploy tests verify the unit
    dpkg-dev fakeroot file      # cpack builds the .deb; its tests inspect it
    curl                        # the API tests fetch gmon.out as CI jobs do
    chromium                    # /usr/bin/chromium: the dashboard's browser tests
    prometheus                  # promtool: the tests check /metrics with it
    clang libclang-rt-14-dev    # tests/fuzz: clang++ and libFuzzer with the sanitizer runtimes
    libprotobuf-dev protobuf-compiler  # the pprof export: profile.proto compiled by protoc
    golang-github-google-pprof-dev     # pprof's proto/profile.proto, which the build compiles
    zlib1g-dev                  # the pprof export is gzip-compressed
    golang-go                   # `go tool pprof`: the oracle the pprof export is tested against
    valgrind                    # callgrind_annotate: the oracle of the callgrind export
    libgraphviz-dev             # gmon/svg_render: the svg export laid out by libgvc
    graphviz                    # dot: the tests check the dot export with Graphviz itself
    libcapstone-dev             # gmon/disassembler: instructions beside their samples (annotate)
    python3-jsonschema          # tests: the speedscope export against speedscope's JSON schema
    libpq-dev                   # storage/fleet: the fleet store speaks to PostgreSQL through libpq
    postgresql                  # fleet_pg_tests start a PostgreSQL 15 server of their own
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

# The dashboard (web/ui -> web/dist) and the browser tests' playwright-core, from the npm
# registry with the pinned lockfiles. Node.js 20 or later (Vite 7) must be on the machine;
# Debian's nodejs is installed only when there is none. Each step runs only when its inputs
# are newer than its output, so a second run takes a moment.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "setup: installing nodejs and npm"
    sudo_cmd=()
    [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends nodejs npm
fi
if ! node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a===20&&b>=19)?0:1)'; then
    echo "setup: Node.js $(node --version) is too old for Vite 7 (needs 20.19+ or 22.12+): the dashboard is not built" >&2
    exit 1
fi
# `npm install --no-save` installs exactly what package-lock.json pins. (Not `npm ci`: the
# registry this is built against lacks the other platforms' optional packages of rollup, so
# the lockfile cannot list them and `npm ci` refuses it as out of sync.)
npm_install() {  # $1: a folder with package-lock.json
    if [[ ! -f $1/node_modules/.package-lock.json || $1/package-lock.json -nt $1/node_modules/.package-lock.json ]]; then
        echo "setup: npm install (from package-lock.json) in ${1#"$here"/}"
        (cd "$1" && npm install --no-save --no-audit --no-fund --loglevel=error)
    fi
}
npm_install "$here/web/ui"
npm_install "$here/tests/browser"
if [[ ! -f $here/web/dist/index.html ]] ||
    [[ -n $(find "$here/web/ui" "$here/web/api/openapi.json" -path "$here/web/ui/node_modules" -prune \
        -o -type f ! -name api-schema.d.ts -newer "$here/web/dist/index.html" -print -quit) ]]; then
    echo "setup: building the dashboard into web/dist"
    (cd "$here/web/ui" && npm run --silent build >/dev/null)
else
    echo "setup: the dashboard in web/dist is up to date"
fi
