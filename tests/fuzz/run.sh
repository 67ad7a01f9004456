#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) in build-fuzz/ (or $RACKPROF_FUZZ_BUILD,
# a folder configured with RACKPROF_FUZZ=ON) and runs each for a fixed
# time, as many at once as there are cores. Exits non-zero when any target crashes, leaks,
# times out or breaks an invariant; the input is kept in build-fuzz/fuzz-artifacts/.
#
#   tests/fuzz/run.sh [SECONDS_PER_TARGET] [TARGET...]     default: 15 s, every target
#   FUZZ_JOBS=2 tests/fuzz/run.sh 3600 api                 an hour, 2 processes (-jobs/-workers)
#
# New inputs accumulate in build-fuzz/fuzz-corpus/<target>/ from run to run.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
here=$top/tests/fuzz
build=$top/build-fuzz
seconds=${1:-15}
shift || true
cores=$(nproc 2>/dev/null || echo 2)
fuzz_jobs=${FUZZ_JOBS:-1}

# Longest input per target: enough for a few frames, files and requests, small enough to
# mutate well.
declare -A max_len=(
    [legacy_bin]=4096 [legacy_hex]=8192 [framed]=4096 [tpiu]=4096 [itm]=4096 [swo]=4096
    [gmon]=8192 [tiva]=16384 [symbolizer]=16384 [linker_map]=8192 [config_toml]=4096 [board_json]=2048 [link_uri]=512 [gdb_rsp]=4096
    [api]=16384 [storage_blocks]=8192
)
all_targets=(legacy_bin legacy_hex framed tpiu itm swo gmon tiva symbolizer linker_map config_toml
             board_json link_uri gdb_rsp api storage_blocks)
targets=("$@")
((${#targets[@]})) || targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
    [[ -n ${max_len[$t]:-} ]] || { echo "fuzz: no target '$t' (${all_targets[*]})" >&2; exit 2; }
done

started=$SECONDS
# RACKPROF_FUZZ_BUILD: a build folder configured with RACKPROF_FUZZ=ON already (tests/run.sh's
# sanitizer build, which also builds the fuzz targets); otherwise build-fuzz/ is configured here.
if [[ -n ${RACKPROF_FUZZ_BUILD:-} ]]; then
    build=$RACKPROF_FUZZ_BUILD
else
    echo "== fuzz build (clang, libFuzzer, ASan + UBSan) in build-fuzz/"
    # OSS-Fuzz's flags: -O1 and line tables only (enough for stack traces) build faster than
    # -O2 -g, and without -DNDEBUG the code's own asserts are checked too.
    cmake -S "$top" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang \
        -DRACKPROF_FUZZ=ON -DRACKPROF_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" >/dev/null
fi
cmake --build "$build" --target fuzz_all -j "$cores"
echo "   built in $((SECONDS - started)) s"

# Seeds: the encoders' streams, files and requests, the thesis captures, the example
# configuration, and small ELF images with DWARF built here.
seeds=$build/fuzz-seeds
rm -rf "$seeds"
"$build/tests/fuzz/fuzz_make_seeds" "$seeds" "$top/../shared/data/thesis"
mkdir -p "$seeds/config_toml" "$seeds/symbolizer"
cp "$top/deploy/rackprof.toml" "$seeds/config_toml/deploy-example.toml"
tiny_c=$seeds/tiny.c
printf 'static int leaf(int x) { return x * 3; }\nint f(int x) { return leaf(x) + 1; }\nvoid _start(void) { for (;;) f(1); }\n' >"$tiny_c"
elf_flags=(-g -O1 -nostdlib -Wl,--build-id -Wl,-e,_start -Wl,-z,max-page-size=64)
cc "${elf_flags[@]}" -static -o "$seeds/symbolizer/tiny-host.elf" "$tiny_c" ||
    echo "SKIP: the host ELF seed: cc failed"
if command -v arm-none-eabi-gcc >/dev/null; then
    arm-none-eabi-gcc -mthumb -mcpu=cortex-m0plus "${elf_flags[@]}" \
        -o "$seeds/symbolizer/tiny-thumb.elf" "$tiny_c"
else
    echo "SKIP: the Cortex-M ELF seed: arm-none-eabi-gcc is missing (./setup.sh installs it)"
fi

logs=$build/fuzz-logs
artifacts=$build/fuzz-artifacts
rm -rf "$logs"
mkdir -p "$logs" "$artifacts"

# One target for $seconds; its log in $logs/<target>.log.
run_target() {
    local t=$1 corpus=$build/fuzz-corpus/$1
    mkdir -p "$corpus" "$logs/$t"
    local parallel=() dirs=("$corpus") d
    ((fuzz_jobs > 1)) && parallel=(-jobs="$fuzz_jobs" -workers="$fuzz_jobs")
    for d in "$here/corpus/$t" "$seeds/$t"; do
        if [[ -d $d ]]; then dirs+=("$d"); fi
    done
    local dict=()  # the target's keywords (HTTP, TOML and JSON keys, URI parts)
    if [[ -f $here/dict/$t.dict ]]; then dict=(-dict="$here/dict/$t.dict"); fi
    (cd "$logs/$t" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$build/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -max_len="${max_len[$t]}" \
        -timeout=25 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts/$t-" \
        "${dict[@]}" "${parallel[@]}" "${dirs[@]}") >"$logs/$t.log" 2>&1
}

# The last status line of a run: executions per second and edges covered.
summary() {
    local log=$1
    ((fuzz_jobs > 1)) && log=$(ls "$logs/$2"/fuzz-*.log 2>/dev/null | head -1)
    { grep -E '^#[0-9]+' "$log" 2>/dev/null || true; } | tail -1 |
        sed -E 's/.*(cov: [0-9]+).*(corp: [0-9]+\/[0-9a-zA-Z]+).*(exec\/s: [0-9]+).*/\1 \2 \3/'
}

echo "== fuzzing ${#targets[@]} target(s), $seconds s each, $cores at a time"
failed=()
declare -A pid_of=()
finish() {  # $1: target; waits for it and reports
    local t=$1 rc=0
    wait "${pid_of[$t]}" || rc=$?
    if ((rc == 0)); then
        printf '   %-12s ok    %s\n' "$t" "$(summary "$logs/$t.log" "$t")"
    else
        printf '   %-12s FAILED (exit %d): %s/%s.log\n' "$t" "$rc" "$logs" "$t"
        grep -hE 'ERROR|violated|SUMMARY|Test unit written|runtime error' "$logs/$t.log" \
            "$logs/$t"/fuzz-*.log 2>/dev/null | head -8 | sed 's/^/      /' || true
        failed+=("$t")
    fi
}
running=()
for t in "${targets[@]}"; do
    run_target "$t" &
    pid_of[$t]=$!
    running+=("$t")
    if ((${#running[@]} >= cores)); then
        finish "${running[0]}"
        running=("${running[@]:1}")
    fi
done
for t in "${running[@]}"; do finish "$t"; done

rm -rf /dev/shm/rackprof-api-fuzz-* 2>/dev/null || true  # left by crashed api runs
echo "== fuzz: $((SECONDS - started)) s in all"
if ((${#failed[@]})); then
    echo "fuzz: FAILED: ${failed[*]} (inputs in $artifacts/)" >&2
    exit 1
fi
