#!/bin/sh
# Runs every test program and prints one line per program, then the total
# "N passed, N failed".  Exits non-zero when anything failed.
#   $BUILD/tests/test_*   C unit and property tests (harness.h)
#   tests/py_*.py         tests that use the PyTorch oracle (/usr/bin/python3)
#   tests/cli_*.sh        end-to-end tests of the remat command line
BUILD=${BUILD:-build}
export BUILD
export REMAT=${REMAT:-$BUILD/remat}
# Idle OpenMP threads sleep instead of spinning: on a shared 2-core machine
# spinning threads starve the working ones (test_schedule: 35 s vs 4 s).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
pass=0; fail=0; failed=""
run() {
    name=$1; shift
    start=$(date +%s)
    if "$@" > "$BUILD/tests/$name.log" 2>&1; then
        pass=$((pass+1)); echo "ok    $name ($(( $(date +%s) - start ))s)"
    else
        fail=$((fail+1)); failed="$failed $name"
        echo "FAIL  $name ($(( $(date +%s) - start ))s)"; tail -n 30 "$BUILD/tests/$name.log" | sed 's/^/      /'
    fi
}
mkdir -p "$BUILD/tests"
for t in "$BUILD"/tests/test_*; do
    case "$t" in *.log|*.d|*.o) continue;; esac
    [ -x "$t" ] || continue
    run "$(basename "$t")" "$t"
done
if [ -z "${REMAT_SANITIZE:-}" ]; then
    for t in tests/py_*.py; do
        [ -f "$t" ] || continue
        run "$(basename "$t" .py)" /usr/bin/python3 "$t"
    done
fi
for t in tests/cli_*.sh; do
    [ -f "$t" ] || continue
    run "$(basename "$t" .sh)" sh "$t"
done
[ -n "$failed" ] && echo "failed:$failed"
echo "total: $pass passed, $fail failed"
[ "$fail" = 0 ]
