# tests/lib.sh -- sourced by the tests/cli_*.sh scripts (it is not a test):
# the binary under test, a scratch directory removed on exit, and the
# pass/fail/skip counters with their summary line.
R=${REMAT:-build/remat}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
# remat train stores its run's times in the cost model's cache: keep the
# tests' runs out of the user's
export REMAT_CACHE="$T/cache"
fails=0; passes=0; skips=0
ok()   { passes=$((passes+1)); }
bad()  { fails=$((fails+1)); echo "FAIL: $*" >&2; }
# skip WHY: a check that could not run here (a tool is missing); counted and
# printed, never as a pass.
skip() { skips=$((skips+1)); echo "SKIP: $*"; }
# finish NAME: print "NAME: N passed, N failed, N skipped"; exit 1 when
# anything failed or when no check ran (a test that checks nothing cannot
# fail), else 77 (automake's "skipped") when anything was skipped, else 0.
# tests/run_tests.sh reports 77 as a skip, and as a failure under CI=true
# for a test marked REMAT_TEST_REQUIRED.
finish() {
    echo "$1: $passes passed, $fails failed, $skips skipped"
    [ "$fails" -eq 0 ] || exit 1
    [ $((passes + skips)) -gt 0 ] || { echo "FAIL: $1: no check ran" >&2; exit 1; }
    [ "$skips" -eq 0 ] || exit 77
    exit 0
}
# expect_err [--rc N] NAME CMD...: CMD fails cleanly (exit status N when
# given, else 1 or 2; no signal) with exactly one line on stderr, "remat:
# error: ...".  CMD's stdout and stderr stay in $T/stdout and $T/stderr, its
# exit status in $rc, for the caller's further checks.
expect_err() {
    want_=
    if [ "$1" = --rc ]; then want_=$2; shift 2; fi
    name=$1; shift
    "$@" >"$T/stdout" 2>"$T/stderr"
    rc=$?
    n=$(wc -l < "$T/stderr")
    if [ -n "$want_" ] && [ "$rc" -ne "$want_" ]; then
        bad "$name: exit status $rc (want $want_)"; sed 's/^/    /' "$T/stderr" | head -n 20 >&2
    elif [ "$rc" -eq 0 ] || [ "$rc" -ge 128 ]; then
        bad "$name: exit status $rc (want 1 or 2)"; sed 's/^/    /' "$T/stderr" | head -n 20 >&2
    elif [ "$n" -ne 1 ]; then
        bad "$name: $n lines on stderr (want 1):"; sed 's/^/    /' "$T/stderr" | head -n 20 >&2
    elif ! grep -q '^remat: error: ' "$T/stderr"; then
        bad "$name: stderr is not 'remat: error: ...': $(cat "$T/stderr")"
    else
        ok
    fi
}
# hash_of FILE: the params_hash of the last line that has one in FILE (the
# summary of remat train --json)
hash_of() { sed -n 's/.*"params_hash":"\([0-9a-f]*\)".*/\1/p' "$1" | tail -n 1; }
# rand_sleep LO HI: a random pause in [LO, HI) milliseconds
rand_sleep() {
    ms_=$(od -An -N2 -tu2 /dev/urandom | awk -v lo="$1" -v hi="$2" '{ print lo + $1 % (hi - lo) }')
    sleep "$(awk -v m="$ms_" 'BEGIN { printf "%.3f", m / 1000 }')"
}
# until_steps PID JSONL: wait until the run PID has printed n step lines of its
# own into JSONL, n random in [1, 6] (at most 60 s, or until it exits), then a
# random 0-150 ms more: a kill after it lands within the next step or its save,
# and every killed run has moved the job on, however slow the machine or the
# sanitizer (a fixed pause once killed every run before its first checkpoint)
until_steps() {
    n_=$(od -An -N1 -tu1 /dev/urandom | awk '{ print 1 + $1 % 6 }')
    t_=0
    while [ $t_ -lt 1200 ] && kill -0 "$1" 2> /dev/null && \
          [ "$(grep -c '"step":[0-9]*,"loss"' "$2" 2> /dev/null)" -lt $n_ ]; do
        sleep 0.05; t_=$((t_ + 1))
    done
    rand_sleep 0 150
}
# chromium_dom URL OUT ERR: headless Chromium loads URL and dumps its DOM
# into OUT (its log into ERR); returns chromium's exit status.
chromium_dom() {
    prof_=$(mktemp -d)
    timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
        --disable-component-update --disable-sync --no-first-run --user-data-dir="$prof_" \
        --enable-logging=stderr --v=0 --dump-dom "$1" > "$2" 2> "$3"
    rc_=$?
    rm -rf "$prof_"
    return $rc_
}
# mpi_sanitizer_env: under `make test-sanitize` (REMAT_SANITIZE=1), let
# LeakSanitizer skip OpenMPI's own allocations (tests/lsan-mpi.supp) in the
# processes mpirun starts; remat's are still checked.
mpi_sanitizer_env() {
    [ -n "${REMAT_SANITIZE:-}" ] || return 0
    export ASAN_OPTIONS="${ASAN_OPTIONS:-}:fast_unwind_on_malloc=0"
    export LSAN_OPTIONS="${LSAN_OPTIONS:-}:suppressions=$(pwd)/tests/lsan-mpi.supp:print_suppressions=0:fast_unwind_on_malloc=0"
}
