#!/bin/sh
# Runs every test program and prints one line per program ("ok", "FAIL" or
# "SKIP"), then "total: N passed, N failed, N skipped".  Exits non-zero when
# anything failed.
#   $BUILD/tests/test_*   C unit and property tests (tests/harness.h), one per tests/test_*.c
#   tests/py_*.py         tests that use the PyTorch oracle (/usr/bin/python3, tests/harness.py)
#   tests/cli_*.sh        end-to-end tests of the remat command line (tests/lib.sh)
#
# The protocol: a test exits 0 when every check passed, 77 (automake's
# "skipped") when nothing failed but something could not run here (a missing
# tool or package; it prints "SKIP: why"), anything else when it failed.  A
# skip is never counted as a pass.  A test whose source has a line starting
# with a comment marker and "REMAT_TEST_REQUIRED:" must run in CI: under
# CI=true its skip is a failure.  Each test also prints a summary line
# "NAME: N passed, N failed, N skipped" of its own checks; the runner adds
# them up on the "checks:" line.
BUILD=${BUILD:-build}
export BUILD
export REMAT=${REMAT:-$BUILD/remat}
# Idle OpenMP threads sleep instead of spinning: on a shared 2-core machine
# spinning threads starve the working ones (test_schedule: 35 s vs 4 s).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
ci=0; [ "${CI:-}" = true ] && ci=1
pass=0; fail=0; skip=0; failed=""; skipped=""
mkdir -p "$BUILD/tests"
: > "$BUILD/tests/checks.sum"

# run NAME SOURCE CMD...: run one test, its output in $BUILD/tests/NAME.log
run() {
    name=$1; src=$2; shift 2
    log=$BUILD/tests/$name.log
    start=$(date +%s)
    "$@" > "$log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
    # the last "N passed, N failed, N skipped" line is the test's own summary
    grep -E ': [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$log" | tail -n 1 >> "$BUILD/tests/checks.sum"
    if [ $rc -eq 77 ] && [ $ci = 1 ] && grep -Eq '^(#|/\*|//) *REMAT_TEST_REQUIRED:' "$src"; then
        echo "FAIL: skipped, but CI=true and $src is marked REMAT_TEST_REQUIRED" >> "$log"
        rc=1
    fi
    if [ $rc -eq 0 ]; then
        pass=$((pass+1)); echo "ok    $name (${secs}s)"
    elif [ $rc -eq 77 ]; then
        skip=$((skip+1)); skipped="$skipped $name"
        echo "SKIP  $name (${secs}s)"; grep -E '^SKIP' "$log" | sed 's/^/      /'
    else
        fail=$((fail+1)); failed="$failed $name"
        echo "FAIL  $name (${secs}s, exit $rc)"; tail -n 30 "$log" | sed 's/^/      /'
    fi
}

for src in tests/test_*.c; do
    [ -f "$src" ] || continue
    name=$(basename "$src" .c)
    # a test that was not built fails; it is never left out silently
    run "$name" "$src" sh -c '[ -x "$1" ] || { echo "FAIL: $1 is not built (make BUILD=$BUILD all)"; exit 1; }; exec "$1"' \
        sh "$BUILD/tests/$name"
done
for src in tests/py_*.py; do
    [ -f "$src" ] || continue
    run "$(basename "$src" .py)" "$src" /usr/bin/python3 "$src"
done
for src in tests/cli_*.sh; do
    [ -f "$src" ] || continue
    run "$(basename "$src" .sh)" "$src" sh "$src"
done
[ -n "$failed" ] && echo "failed:$failed"
[ -n "$skipped" ] && echo "skipped:$skipped"
echo "total: $pass passed, $fail failed, $skip skipped"
awk '{ p += $(NF-5); f += $(NF-3); s += $(NF-1) }
     END { printf "checks: %d passed, %d failed, %d skipped (the tests'\'' own summary lines, added up)\n", p, f, s }' \
    "$BUILD/tests/checks.sum"
[ "$fail" = 0 ]
