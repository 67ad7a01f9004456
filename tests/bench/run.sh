#!/usr/bin/env bash
# Builds rackprof in Release and runs the benchmarks; figures only, no pass/fail.
#   tests/bench/run.sh [core|swo|ingest|serving|fleet|probe|all] [options for that benchmark]
#   core:   [--mb N] [--arcs N,...] [--only profile]    decode, gmon.out, profile and report speed
#   swo:    [--mb N]                                     SWO (ITM, ITM+TPIU) decode speed, and
#                                                        convert with and without a console port
#   ingest: [--boards N] [--seconds D] [--idle-seconds I] [--file-mb M] [--baseline OLD_RACKPROF]
#                                                        the daemon: a rack, and one fast file
#   serving: [--arcs N,...] [--records N] [--fleet-sessions N] [--fleet-boards N]
#            [--baseline OLD_RACKPROF] [--dir DIR --keep]
#                                                        profile, gmon.out and window requests
#                                                        to a daemon: first, p50 and p99
#   fleet:  [--benches N] [--boards N] [--sessions N] [--arcs N] [--pcs N]
#                                                        the fleet store on a PostgreSQL it starts:
#                                                        push latency, bytes per session, a
#                                                        build's fleet profile (SKIP without PG)
#   probe:  [--seconds N]                                sampling through QEMU's gdbstub: rackprof's
#                                                        GDB client (pc, stacks) against a
#                                                        gdb-multiarch -batch loop
#   all:    every benchmark; each takes the options it knows (e.g. --mb 50 --seconds 20)
# Each benchmark also prints TABLE|benchmark|input|figure|baseline|ratio rows
# (tests/bench/table.h); they are held back from the live output and printed at the end as
# one summary table (Markdown), with the date and the machine.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
which=${1:-all}
[ $# -gt 0 ] && shift
bin=$top/build-bench
cmake -S "$top" -B "$bin" -G Ninja -DCMAKE_BUILD_TYPE=Release -DRACKPROF_TESTS=OFF >/dev/null
cmake --build "$bin" --target core_bench swo_bench ingest_bench serving_bench fleet_bench probe_bench \
    rackprof >/dev/null

rows=$(mktemp)
trap 'rm -f "$rows"' EXIT

# Runs one benchmark: its figures go to the terminal as they come, its TABLE rows to $rows.
run() {
    stdbuf -oL "$@" | while IFS= read -r line; do
        case "$line" in
            TABLE\|*) printf '%s\n' "${line#TABLE|}" >>"$rows" ;;
            *) printf '%s\n' "$line" ;;
        esac
    done
}

summary() {
    [ -s "$rows" ] || return 0
    echo
    echo "Summary ($(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores, $(uname -m)," \
        "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1);" \
        "load average $(cut -d' ' -f1-3 /proc/loadavg) at the end)."
    echo "Ratio = figure / baseline, both measured in this run on the same input."
    echo
    echo "| benchmark | input | figure | baseline (same run) | ratio |"
    echo "|---|---|---|---|---|"
    sed 's/|/ | /g; s/^/| /; s/$/ |/' "$rows"
}

case "$which" in
    core) run "$bin/tests/bench/core_bench" "$@" ;;
    swo) run "$bin/tests/bench/swo_bench" --rackprof "$bin/rackprof" "$@" ;;
    ingest) run "$bin/tests/bench/ingest_bench" "$bin/rackprof" "$@" ;;
    serving) run "$bin/tests/bench/serving_bench" "$bin/rackprof" "$@" ;;
    fleet) run "$bin/tests/bench/fleet_bench" "$bin/rackprof" "$@" ;;
    probe) run "$bin/tests/bench/probe_bench" --fw "$bin/target-fw" "$@" ;;
    all)
        run "$bin/tests/bench/core_bench" "$@"
        run "$bin/tests/bench/swo_bench" --rackprof "$bin/rackprof" "$@"
        run "$bin/tests/bench/ingest_bench" "$bin/rackprof" "$@"
        run "$bin/tests/bench/serving_bench" "$bin/rackprof" "$@"
        run "$bin/tests/bench/fleet_bench" "$bin/rackprof" "$@"
        run "$bin/tests/bench/probe_bench" --fw "$bin/target-fw"
        ;;
    *) echo "usage: $0 [core|swo|ingest|serving|fleet|probe|all] [options]" >&2; exit 2 ;;
esac
summary
