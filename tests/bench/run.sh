#!/usr/bin/env bash
# Builds rackprof in Release and runs the benchmarks; figures only, no pass/fail.
#   tests/bench/run.sh [core|swo|ingest|all] [options for that benchmark]
#   core:   [--mb N] [--arcs N,...] [--only profile]    decode, gmon.out, profile and report speed
#   swo:    [--mb N]                                     SWO (ITM, ITM+TPIU) decode speed, and
#                                                        convert with and without a console port
#   ingest: [--boards N] [--seconds D] [--file-mb M]     the daemon: a rack, and one fast file
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
which=${1:-all}
[ $# -gt 0 ] && shift
cmake -S "$top" -B "$top/build-bench" -G Ninja -DCMAKE_BUILD_TYPE=Release -DRACKPROF_TESTS=OFF >/dev/null
cmake --build "$top/build-bench" --target core_bench swo_bench ingest_bench rackprof >/dev/null
case "$which" in
    core) "$top/build-bench/tests/bench/core_bench" "$@" ;;
    swo) "$top/build-bench/tests/bench/swo_bench" --rackprof "$top/build-bench/rackprof" "$@" ;;
    ingest) "$top/build-bench/tests/bench/ingest_bench" "$top/build-bench/rackprof" "$@" ;;
    all)
        "$top/build-bench/tests/bench/core_bench"
        "$top/build-bench/tests/bench/swo_bench" --rackprof "$top/build-bench/rackprof"
        "$top/build-bench/tests/bench/ingest_bench" "$top/build-bench/rackprof"
        ;;
    *) echo "usage: $0 [core|swo|ingest|all] [options]" >&2; exit 2 ;;
esac
