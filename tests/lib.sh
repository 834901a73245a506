# tests/lib.sh -- sourced by the tests/cli_*.sh scripts (it is not a test):
# the binary under test, a scratch directory removed on exit, and the
# pass/fail counters with their summary line.
R=${REMAT:-build/remat}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0; passes=0
ok()  { passes=$((passes+1)); }
bad() { fails=$((fails+1)); echo "FAIL: $*" >&2; }
# finish NAME: print "NAME: N passed, N failed"; succeed only when nothing failed
finish() { echo "$1: $passes passed, $fails failed"; [ "$fails" -eq 0 ]; }
