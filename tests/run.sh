#!/usr/bin/env bash
# The whole test suite, as CI runs it: a warnings-as-errors build and its tests, then the same
# tests built with AddressSanitizer and UndefinedBehaviorSanitizer.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc 2>/dev/null || echo 2)

echo "== build (warnings are errors)"
cmake -S "$top" -B "$top/build" -G Ninja -DRACKPROF_WERROR=ON >/dev/null
cmake --build "$top/build" -j "$jobs"
# A failing suite does not stop the run: the sanitizer half and the fuzzers still run, and the
# last lines say what failed (the exit status is non-zero if anything did).
failed=()
echo "== tests"
ctest --test-dir "$top/build" --output-on-failure -j "$jobs" || failed+=("tests (warnings-as-errors build)")

echo "== build with ASan + UBSan"
cmake -S "$top" -B "$top/build-asan" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DRACKPROF_WERROR=ON -DRACKPROF_SANITIZE=ON >/dev/null
cmake --build "$top/build-asan" -j "$jobs"
echo "== tests under ASan + UBSan"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$top/build-asan" --output-on-failure -j "$jobs" || failed+=("tests under ASan + UBSan")

echo "== fuzzing: every target 10 s (tests/fuzz/README.md; hours: tests/fuzz/run.sh 3600)"
"$top/tests/fuzz/run.sh" 10 || failed+=("fuzzing")

if [ ${#failed[@]} -gt 0 ]; then
    printf '== FAILED: %s\n' "${failed[@]}" >&2
    exit 1
fi
echo "== all passed"
