#!/bin/sh
# Self-tests of the test machinery: a test that cannot fail is worse than no
# test, so each way a test could pass without checking anything is tried
# here, and must fail.
#   - a skip goes through the harness (TEST_SKIP, skip, harness.skip), where
#     it is counted; one printed by hand is a pass with a note.
#   - a test in which no check ran fails: tests/harness.h's TEST_REPORT,
#     tests/harness.py's report, tests/lib.sh's finish.
#   - a fuzz target replaying an empty corpus fails (fuzz/replay.c).
#   - a test still running after REMAT_TEST_TIMEOUT is killed, with what it
#     started, and fails (tests/run_tests.sh); so does test_parallel when
#     its mpirun runs past REMAT_MPI_TIMEOUT.
# Compiled with the build's $CC (the Makefile passes it).
set -u
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
CC=${CC:-cc}

# want_rc NAME WANT CMD...: CMD exits WANT (its output in $T/out)
want_rc() {
    name=$1; want=$2; shift 2
    "$@" > "$T/out" 2>&1
    rc=$?
    [ "$rc" -eq "$want" ] && ok || bad "$name: exit $rc, want $want: $(tail -n 5 "$T/out")"
}
# want_fail NAME CMD...: CMD fails (exit status neither 0 nor 77's skip)
want_fail() {
    name=$1; shift
    "$@" > "$T/out" 2>&1
    rc=$?
    [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] && ok || bad "$name: exit $rc, want a failure: $(tail -n 5 "$T/out")"
}

# ---- skips are counted ---------------------------------------------------------
# the harness files print the counted skips; this file names the pattern
hand=$(grep -n -E '(printf|puts|print|echo)[ (].*SKIP' tests/*.c tests/*.py tests/*.sh fuzz/*.c fuzz/*.sh 2>/dev/null |
       grep -v -E '^tests/(harness\.py|lib\.sh|run_tests\.sh|cli_harness\.sh):')
[ -z "$hand" ] && ok || bad "a skip printed by hand is never counted (use TEST_SKIP, skip or harness.skip): $hand"

# ---- no check, no pass ---------------------------------------------------------
# one program, its checks chosen by argv[1]: n none, p one passing, f one
# failing, s one skipped
cat > "$T/report.c" <<'EOF'
#include "harness.h"
int main(int argc, char **argv)
{
    char m = argc > 1 ? argv[1][0] : 'n';
    if (m == 'p') CHECK(1, "passes");
    if (m == 'f') CHECK(0, "fails on purpose");
    if (m == 's') TEST_SKIP("skipped on purpose");
    return TEST_REPORT();
}
EOF
if $CC -std=c11 -Wall -Wextra -Werror -Itests -o "$T/report" "$T/report.c" 2> "$T/cc.err"; then
    ok
    want_rc "TEST_REPORT with no check" 1 "$T/report" n
    grep -q 'no check ran' "$T/out" && ok || bad "TEST_REPORT with no check does not say so: $(cat "$T/out")"
    want_rc "TEST_REPORT with one passing check" 0 "$T/report" p
    want_rc "TEST_REPORT with one failing check" 1 "$T/report" f
    want_rc "TEST_REPORT with one skip" 77 "$T/report" s
else
    bad "tests/harness.h does not compile on its own: $(head -n 5 "$T/cc.err")"
fi
if [ -x /usr/bin/python3 ]; then
    py() { /usr/bin/python3 -c "import sys; sys.path.insert(0, 'tests'); import harness; sys.exit($1)"; }
    want_rc "harness.report with no check" 1 py 'harness.report("none", 0, 0)'
    grep -q 'no check ran' "$T/out" && ok || bad "harness.report with no check does not say so: $(cat "$T/out")"
    want_rc "harness.report with one passing check" 0 py 'harness.report("one", 1, 0)'
    want_rc "harness.report with one failing check" 1 py 'harness.report("one", 0, 1)'
else
    skip "python3 is not installed: tests/harness.py not checked"
fi
want_rc "lib.sh finish with no check" 1 sh -c '. tests/lib.sh; finish none'
grep -q 'no check ran' "$T/out" && ok || bad "lib.sh finish with no check does not say so: $(cat "$T/out")"
want_rc "lib.sh finish with one passing check" 0 sh -c '. tests/lib.sh; ok; finish one'
want_rc "lib.sh finish with one skip" 77 sh -c '. tests/lib.sh; skip why; finish one'

# ---- an empty corpus replays nothing --------------------------------------------
mkdir "$T/empty"
fz=$BUILD/fuzz/fuzz_budget
if [ -x "$fz" ]; then
    want_rc "a replay of an empty corpus" 1 "$fz" "$T/empty"
    grep -q 'holds no inputs' "$T/out" && ok || bad "a replay of an empty corpus does not say so: $(cat "$T/out")"
    want_rc "a replay of a one-file corpus" 0 "$fz" fuzz/corpus/budget/b_2GiB
else
    bad "$fz is not built (make BUILD=$BUILD all)"
fi

# ---- a test that hangs fails ---------------------------------------------------
# a suite of two: one that would sleep 30 s (the sleep is its child, whose
# pid it writes down), one that passes; run under a 1-second limit
mkdir "$T/suite"
cat > "$T/suite/cli_sleeps.sh" <<EOF
sleep 30 &
echo \$! > "$T/suite/child"
wait
EOF
echo 'echo "cli_passes: 1 passed, 0 failed, 0 skipped"' > "$T/suite/cli_passes.sh"
want_rc "run_tests.sh with a test past REMAT_TEST_TIMEOUT" 1 env REMAT_TEST_TIMEOUT=1 BUILD="$T/build" \
    sh tests/run_tests.sh "$T/suite/cli_sleeps.sh" "$T/suite/cli_passes.sh"
grep -q '^FAIL  cli_sleeps (.*timed out after 1 s' "$T/out" && ok ||
    bad "a test past its timeout is not reported as timed out: $(cat "$T/out")"
grep -q '^ok    cli_passes' "$T/out" && ok || bad "the test after a timed-out one: $(cat "$T/out")"
# the child got its SIGTERM with the test: give it up to 5 s to be gone
# (or a zombie)
child=$(cat "$T/suite/child" 2>/dev/null)
i=0
while [ -n "$child" ] && [ $i -lt 50 ]; do
    case $(ps -o stat= -p "$child" 2>/dev/null) in ''|Z*) break;; esac
    sleep 0.1; i=$((i + 1))
done
if [ -z "$child" ]; then
    bad "the sleeping test did not start its child"
elif [ $i -eq 50 ]; then
    bad "a timed-out test's child (pid $child) is still running"; kill "$child"
else
    ok
fi
want_rc "run_tests.sh with REMAT_TEST_TIMEOUT=x" 2 env REMAT_TEST_TIMEOUT=x BUILD="$T/build" \
    sh tests/run_tests.sh "$T/suite/cli_passes.sh"
if ! command -v mpirun > /dev/null 2>&1; then
    skip "mpirun is not installed: test_parallel's mpirun timeout not checked"
elif [ -x "$BUILD/tests/test_parallel" ]; then
    want_fail "test_parallel with its mpirun past REMAT_MPI_TIMEOUT" env REMAT_MPI_TIMEOUT=0.01 "$BUILD/tests/test_parallel"
    grep -q 'mpirun -np 2 timed out after 0.01 s' "$T/out" && ok ||
        bad "test_parallel does not say its mpirun timed out: $(tail -n 5 "$T/out")"
else
    bad "$BUILD/tests/test_parallel is not built (make BUILD=$BUILD all)"
fi

finish cli_harness
