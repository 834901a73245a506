#!/bin/sh
# remat's idle OpenMP threads sleep unless the user chose otherwise
# (src/cli/main.c: libgomp reads its environment before main, so remat runs
# itself again with OMP_WAIT_POLICY=passive when neither OMP_WAIT_POLICY
# nor GOMP_SPINCOUNT is set).  libgomp's OMP_DISPLAY_ENV=verbose prints the
# settings each start of the process used; the last print is what the
# command ran with.
set -u
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
R=$BUILD/remat

# settings NAME: the last value libgomp printed for NAME (in $T/err)
settings() { grep "^ *$1 = " "$T/err" | tail -n 1 | sed "s/^ *$1 = '\(.*\)'.*/\1/"; }

env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT OMP_DISPLAY_ENV=verbose "$R" --version > "$T/out" 2> "$T/err"
rc=$?
[ "$rc" -eq 0 ] && grep -q '^remat ' "$T/out" && ok || bad "remat --version: exit $rc: $(cat "$T/out" "$T/err")"
if grep -q 'GOMP_SPINCOUNT = ' "$T/err"; then
    [ "$(settings OMP_WAIT_POLICY)" = PASSIVE ] && [ "$(settings GOMP_SPINCOUNT)" = 0 ] && ok \
        || bad "with nothing set, the command ran with OMP_WAIT_POLICY=$(settings OMP_WAIT_POLICY), GOMP_SPINCOUNT=$(settings GOMP_SPINCOUNT); want PASSIVE, 0"
    [ "$(grep -c 'GOMP_SPINCOUNT = ' "$T/err")" -eq 2 ] && ok || bad "want two starts (remat, then itself passive): $(cat "$T/err")"

    # the user's choice stands: one start, their setting
    env -u GOMP_SPINCOUNT OMP_WAIT_POLICY=active OMP_DISPLAY_ENV=verbose "$R" --version > "$T/out" 2> "$T/err"
    [ "$(settings OMP_WAIT_POLICY)" = ACTIVE ] && [ "$(grep -c 'GOMP_SPINCOUNT = ' "$T/err")" -eq 1 ] && ok \
        || bad "OMP_WAIT_POLICY=active was not kept: $(cat "$T/err")"
    env -u OMP_WAIT_POLICY GOMP_SPINCOUNT=1000 OMP_DISPLAY_ENV=verbose "$R" --version > "$T/out" 2> "$T/err"
    [ "$(settings GOMP_SPINCOUNT)" = 1000 ] && [ "$(grep -c 'GOMP_SPINCOUNT = ' "$T/err")" -eq 1 ] && ok \
        || bad "GOMP_SPINCOUNT=1000 was not kept: $(cat "$T/err")"
else
    skip "this OpenMP runtime does not print GOMP_SPINCOUNT under OMP_DISPLAY_ENV (not libgomp?)"
fi
finish cli_openmp
