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
#
# Each test runs under coreutils' timeout: one still running after
# REMAT_TEST_TIMEOUT seconds (default 300, several times the slowest test;
# make test-sanitize gives 1800) is killed, with every process it started,
# and fails with "timed out after N s".
#
#   sh tests/run_tests.sh [FILE...]   the tests named (default: all of them)
BUILD=${BUILD:-build}
limit=${REMAT_TEST_TIMEOUT:-300}
case $limit in ''|*[!0-9]*) limit=0;; esac
[ "$limit" -gt 0 ] || { echo "run_tests.sh: REMAT_TEST_TIMEOUT must be a whole number of seconds > 0" >&2; exit 2; }
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
    # -k: a test that ignores SIGTERM gets SIGKILL 10 s later (exit 137)
    timeout -k 10 "$limit" "$@" > "$log" 2>&1 < /dev/null
    rc=$?
    secs=$(( $(date +%s) - start ))
    why=
    if [ $rc -eq 124 ] || { [ $rc -eq 137 ] && [ $secs -ge "$limit" ]; }; then
        why="timed out after $limit s (REMAT_TEST_TIMEOUT), killed"
        echo "FAIL: $why" >> "$log"
    fi
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
        echo "FAIL  $name (${secs}s, ${why:-exit $rc})"; tail -n 30 "$log" | sed 's/^/      /'
    fi
}

# The Python tests run under every torch there is: Debian's python3-torch
# (/usr/bin/python3, torch 1.13, the oldest supported) and the virtual
# environment that make venv makes (REMAT_VENV, default .venv: torch 2.13 and
# transformers, python/requirements-test.txt).  Each run is its own test,
# named NAME@torch1.13 or NAME@torch2.13.  A test whose source has a line
# "# REMAT_TEST_TORCH: 2" runs under torch 2 only (transformers 5 needs it).
# Without the environment the torch 2 runs are skipped, and under CI=true a
# required test's skip is a failure, as any other.
venv=${REMAT_VENV:-.venv}
case $venv in /*) ;; *) venv=$(pwd)/$venv;; esac
torch_of() { "$1" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null; }
t1=$(torch_of /usr/bin/python3); t2=
[ -x "$venv/bin/python" ] && t2=$(torch_of "$venv/bin/python")
echo "python tests: /usr/bin/python3 (torch ${t1:-not installed}), $venv/bin/python (torch ${t2:-not installed: make venv})"
# short name of a torch version: 1.13.0a0 -> 1.13
short() { echo "$1" | sed 's/^\([0-9]*\.[0-9]*\).*/\1/'; }
# py_run NAME SRC PYTHON: one run of a Python test (REMAT_PYTHON: its interpreter)
py_run() {
    if grep -q '^# REMAT_TEST_IN_PROCESS' "$2"; then
        run "$1" "$2" env REMAT_PYTHON="$3" sh tests/python_in_process.sh "$2"
    else
        run "$1" "$2" env REMAT_PYTHON="$3" "$3" "$2"
    fi
}
py_tests() {
    base=$(basename "$1" .py)
    only=$(sed -n 's/^# REMAT_TEST_TORCH: *\([0-9]\).*/\1/p' "$1" | head -n 1)
    [ "$only" = 2 ] || py_run "$base@torch$(short "${t1:-1}")" "$1" /usr/bin/python3
    if [ -n "$t2" ]; then
        py_run "$base@torch$(short "$t2")" "$1" "$venv/bin/python"
    else
        run "$base@torch2" "$1" sh -c 'echo "SKIP: no torch 2 environment at $1 (make venv)"; exit 77' sh "$venv"
    fi
}

all=0
[ $# -gt 0 ] || { all=1; set -- tests/test_*.c tests/py_*.py tests/cli_*.sh; }
for src in "$@"; do
    # an unmatched pattern of the whole suite names nothing; a file named
    # on the command line must exist
    if [ ! -f "$src" ]; then
        [ $all = 1 ] && continue
        fail=$((fail+1)); failed="$failed $src"; echo "FAIL  $src (no such test)"; continue
    fi
    case $src in
    *.c)
        name=$(basename "$src" .c)
        # a test that was not built fails; it is never left out silently
        run "$name" "$src" sh -c '[ -x "$1" ] || { echo "FAIL: $1 is not built (make BUILD=$BUILD all)"; exit 1; }; exec "$1"' \
            sh "$BUILD/tests/$name";;
    *.py)   # under each torch (py_tests); one that loads libremat.so in the
            # interpreter says so (REMAT_TEST_IN_PROCESS)
        py_tests "$src";;
    *.sh) run "$(basename "$src" .sh)" "$src" sh "$src";;
    *) fail=$((fail+1)); failed="$failed $src"; echo "FAIL  $src (not a test: .c, .py or .sh)";;
    esac
done
[ -n "$failed" ] && echo "failed:$failed"
[ -n "$skipped" ] && echo "skipped:$skipped"
echo "total: $pass passed, $fail failed, $skip skipped"
awk '{ p += $(NF-5); f += $(NF-3); s += $(NF-1) }
     END { printf "checks: %d passed, %d failed, %d skipped (the tests'\'' own summary lines, added up)\n", p, f, s }' \
    "$BUILD/tests/checks.sum"
[ "$fail" = 0 ]
