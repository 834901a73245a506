#!/bin/sh
# Self-tests of the test machinery: a test that cannot fail is worse than no
# test, so each way a test could pass without checking anything is tried
# here, and must fail.
#   - a skip goes through the harness (TEST_SKIP, skip, harness.skip), where
#     it is counted; one printed by hand is a pass with a note.
#   - a test in which no check ran fails: tests/harness.h's TEST_REPORT,
#     tests/harness.py's report, tests/lib.sh's finish.
#   - a fuzz target replaying an empty corpus fails (fuzz/replay.c).
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

finish cli_harness
