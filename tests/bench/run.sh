#!/usr/bin/env bash
# Builds rackprof in Release and runs the benchmarks; figures only, no pass/fail.
#   tests/bench/run.sh [--mb N]
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cmake -S "$top" -B "$top/build-bench" -G Ninja -DCMAKE_BUILD_TYPE=Release -DRACKPROF_TESTS=OFF >/dev/null
cmake --build "$top/build-bench" --target core_bench >/dev/null
"$top/build-bench/tests/bench/core_bench" "$@"
