#!/usr/bin/env bash
# The whole test suite, as CI runs it: two builds, and every test label run once (the labels are
# listed in tests/CMakeLists.txt).
#   build/       gcc, warnings are errors, optimized: the production code, the benchmarks and
#                the soak; the suites that drive the optimized binary (browser, QEMU, soak,
#                memory) and the tree's own rules (docs).
#   build-asan/  clang, ASan + UBSan + libFuzzer's coverage, warnings are errors: every C++
#                suite (unit, integration, fault, PostgreSQL), then every fuzz target for 10 s.
# Both builds go through ccache and link with mold when the machine has them (./setup.sh), and
# compile the libraries in batches (RACKPROF_UNITY: about half the CPU of a build from scratch).
# Each phase prints its seconds, and the last lines list them with what failed.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc 2>/dev/null || echo 2)
# A clone in another folder hits the same cache: paths are taken relative to the tree, and the
# folder is not part of the key.
# The precompiled test headers are cached too (ccache's documented PCH settings).
export CCACHE_BASEDIR=$top CCACHE_NOHASHDIR=1
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

started=$SECONDS
failed=()
times=()
# phase NAME COMMAND...: runs it, prints and keeps its seconds; a failure is noted, not fatal,
# so the other half still runs and the last lines say everything that failed.
phase() {
    local name=$1 t=$SECONDS status=ok
    shift
    echo "== $name"
    "$@" || { status=FAILED; failed+=("$name"); }
    times+=("$(printf '%6d s  %-6s %s' $((SECONDS - t)) "$status" "$name")")
    echo "== $name: $((SECONDS - t)) s, $status"
    [[ $status == ok ]]
}
summary() {  # $1: the script's exit status
    (($1 == 0)) || ((${#failed[@]})) || failed+=("tests/run.sh itself (exit $1)")
    echo "== phases"
    printf '%s\n' "${times[@]}"
    printf '%6d s  in all\n' $((SECONDS - started))
    command -v ccache >/dev/null && ccache -s | grep -E '^ *(Hits|Misses):' | sed 's/^/   ccache /'
    if ((${#failed[@]})); then
        printf '== FAILED: %s\n' "${failed[@]}" >&2
        exit 1
    fi
    echo "== all passed"
}
trap 'summary $?' EXIT

# The -Werror build: production code, benchmarks, soak and the memory suite (RACKPROF_TESTS=OFF
# leaves out the C++ suites the sanitizer build runs). Optimized as released; -g1 (line tables
# and function names) is all a CI log's stack needs and compiles in two thirds of -g's time.
build_main() {
    cmake -S "$top" -B "$top/build" -G Ninja -DRACKPROF_WERROR=ON -DRACKPROF_TESTS=OFF -DRACKPROF_UNITY=ON \
        -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" >/dev/null &&
        cmake --build "$top/build" -j "$jobs"
}
# One clang build serves the sanitized suites and the fuzzers, as OSS-Fuzz builds them: -O1 and
# line tables only (enough for stack traces), and without -DNDEBUG the code's asserts are checked.
build_asan() {
    cmake -S "$top" -B "$top/build-asan" -G Ninja -DCMAKE_CXX_COMPILER=clang++ \
        -DCMAKE_C_COMPILER=clang -DRACKPROF_WERROR=ON -DRACKPROF_FUZZ=ON -DRACKPROF_UNITY=ON \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
        >/dev/null &&
        cmake --build "$top/build-asan" -j "$jobs"
}

# Each test's output kept whole in the JUnit files, where tests/docs/figures.py reads figures.
junit=(--test-output-size-passed 1048576)
if phase "build (gcc, warnings are errors)" build_main; then
    phase "tests: browser, QEMU, soak, memory, docs" \
        ctest --test-dir "$top/build" --output-on-failure -j "$jobs" "${junit[@]}" \
        --output-junit "$top/build/ctest.xml" -L '^(browser|qemu|soak|memory|docs)$' || true
fi
if phase "build (clang, ASan + UBSan + fuzzers, warnings are errors)" build_asan; then
    phase "tests under ASan + UBSan: unit, integration, fault, PostgreSQL" \
        ctest --test-dir "$top/build-asan" --output-on-failure -j "$jobs" "${junit[@]}" \
        --output-junit "$top/build-asan/ctest.xml" -L '^(unit|integration|fault|pg)$' || true
    phase "fuzzing: every target 10 s (docs/fuzzing.md; hours: tests/fuzz/run.sh 3600)" \
        env RACKPROF_FUZZ_BUILD="$top/build-asan" "$top/tests/fuzz/run.sh" 10 || true
fi
# The figures the tests printed (lines "FIGURE <key> = <value>") into docs/reliability.md, dated: commit
# the change to keep the page current (in CI's throwaway clone it is only shown).
phase "figures: docs/reliability.md" python3 "$top/tests/docs/figures.py" write \
    --doc "$top/docs/reliability.md" --junit "$top/build/ctest.xml=gcc -O2" \
    --junit "$top/build-asan/ctest.xml=clang -O1 ASan+UBSan" \
    --fuzz-logs "$top/build-asan/fuzz-logs" || true
