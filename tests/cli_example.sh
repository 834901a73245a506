#!/bin/sh
# remat as an installed library: `make install` into $BUILD/install, then
# examples/plan_and_train.c compiled against the installed tree through
# pkg-config (the headers, remat.pc, libremat.so by its soname) and run; the
# same program linked statically from libremat.a with remat.pc's
# Libs.private; the Python package remat_torch imported from the install,
# loading the installed library; a DESTDIR install puts every file under the
# staging dir.
# Compiled with the build's $CC and $OPT (the sanitizers under make
# test-sanitize; the Makefile passes them).  Without pkg-config: skipped.
# REMAT_TEST_REQUIRED: CI installs pkg-config; the installed library must be usable there
set -u
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
CC=${CC:-cc}
OPT=${OPT:--O2}
# a make run from inside `make test` must not take the outer make's flags
mk() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory BUILD="$BUILD" "$@"; }

if ! command -v pkg-config > /dev/null 2>&1; then
    skip "pkg-config not installed: the example not built against the installed library"
    finish cli_example
fi
inst=$(pwd)/$BUILD/install
# the soname's major number, as the Makefile takes it from remat.h
SOMAJOR=$(sed -n 's/^#define REMAT_VERSION_MAJOR \([0-9]*\)$/\1/p' include/remat.h)
case $BUILD in /*) inst=$BUILD/install;; esac
rm -rf "$inst"

# ---- make install PREFIX=...: the files, the links, remat.pc -----------------
mk install PREFIX="$inst" > "$T/install.log" 2>&1 && ok || bad "make install failed: $(tail -n 5 "$T/install.log")"
for f in bin/remat lib/libremat.a lib/libremat.so include/remat.h include/remat_testing.h lib/pkgconfig/remat.pc; do
    [ -e "$inst/$f" ] || bad "make install did not install $f"
done
[ "$(readlink "$inst/lib/libremat.so")" = libremat.so.$SOMAJOR ] && [ -f "$inst/lib/libremat.so.$SOMAJOR" ] && ok ||
    bad "libremat.so -> $(readlink "$inst/lib/libremat.so"), want libremat.so.$SOMAJOR"
objdump -p "$inst/lib/libremat.so" > "$T/so.txt" 2>&1
grep -q "SONAME *libremat\.so\.$SOMAJOR\$" "$T/so.txt" && ok || bad "soname: $(grep SONAME "$T/so.txt")"
grep -q 'NEEDED *libopenblas' "$T/so.txt" && ok || bad "libremat.so does not record its BLAS: $(grep NEEDED "$T/so.txt" | tr -s ' ')"
"$inst/bin/remat" --version > /dev/null && ok || bad "the installed remat does not run"

# ---- the example, against the installed library ---------------------------------
export PKG_CONFIG_PATH="$inst/lib/pkgconfig"
flags=$(pkg-config --cflags --libs remat) && ok || bad "pkg-config --cflags --libs remat failed"
$CC -std=c11 -Wall -Wextra -Werror $OPT -o "$T/example" examples/plan_and_train.c $flags 2> "$T/cc.err" && ok ||
    bad "the example does not compile against the installed tree: $(head -n 5 "$T/cc.err")"
objdump -p "$T/example" 2>/dev/null | grep -q "NEEDED *libremat\.so\.$SOMAJOR\$" && ok || bad "the example does not need libremat.so.$SOMAJOR"
LD_LIBRARY_PATH="$inst/lib" ldd "$T/example" | grep -q "$inst/lib/libremat.so.$SOMAJOR" && ok ||
    bad "the example does not load the installed libremat.so.$SOMAJOR"
if LD_LIBRARY_PATH="$inst/lib" "$T/example" > "$T/run.out" 2> "$T/run.err"; then ok; else
    bad "the example failed (exit $?): $(cat "$T/run.err")"; fi
cat "$T/run.out"
grep -q '^plan plan:' "$T/run.out" && grep -q '^step 5/5  loss ' "$T/run.out" &&
    grep -q 'activation peak: .*: equal$' "$T/run.out" && ok || bad "the example's output: $(cat "$T/run.out")"

# ---- linked statically from libremat.a with Libs.private -------------------------
# Libs.private names every library libremat.so needs (its NEEDED entries:
# the BLAS, oneDNN, Jansson, MPI, OpenMP's runtime through -fopenmp, libm):
# a static link needs them all, and they follow the build's link line
priv=$(sed -n 's/^Libs.private: //p' "$inst/lib/pkgconfig/remat.pc")
for lib in $(sed -n 's/.*NEEDED *lib\([^.]*\)\.so.*/\1/p' "$T/so.txt"); do
    case $lib in
    c|gcc_s|pthread|dl|rt|ld-linux*) continue;;   # the C runtime: every link has it
    gomp) want=" -fopenmp ";;
    asan|ubsan|lsan|tsan) want=" -fsanitize=";;   # make test-sanitize's runtimes
    *) want=" -l$lib ";;
    esac
    case " $priv " in
    *"$want"*|*"/lib$lib.so"*) ok;;
    *) bad "remat.pc's Libs.private lacks$want(libremat.so needs lib$lib): $priv";;
    esac
done
sflags=$(pkg-config --cflags --static --libs remat | sed 's/-lremat/-l:libremat.a/')
$CC -std=c11 $OPT -o "$T/example-static" examples/plan_and_train.c $sflags 2> "$T/cc2.err" && ok ||
    bad "the example does not link statically with remat.pc's Libs.private: $(head -n 5 "$T/cc2.err")"
objdump -p "$T/example-static" 2>/dev/null | grep -q 'NEEDED *libremat' && bad "the static example needs libremat.so"
"$T/example-static" > "$T/static.out" 2>&1 && grep -q ': equal$' "$T/static.out" && ok ||
    bad "the static example failed: $(tail -n 3 "$T/static.out")"

# ---- the Python package: installed beside the library, it loads that one --------
py=$inst/lib/python3/dist-packages
for f in __init__.py __init__.pyi _lib.py _lib.pyi _measure.py _plan.py _hf.py _peak.py _compile.py _paths.py py.typed; do
    [ -e "$py/remat_torch/$f" ] && ok || bad "make install did not install remat_torch/$f"
done
if /usr/bin/python3 -c "import torch" 2> /dev/null; then
    got=$(here=$(pwd) && cd "$T" && env -u REMAT_LIB PYTHONPATH="$py" sh "$here/tests/python_in_process.sh" -c \
        "import remat_torch as r; print(r.library_version(), r._lib._candidates()[0])" 2>&1)
    [ "$got" = "$(sed -n 's/^#define REMAT_VERSION_STRING "\(.*\)"/\1/p' include/remat.h) $inst/lib/libremat.so.$SOMAJOR" ] &&
        ok || bad "the installed remat_torch: $got"
else
    skip "torch is not installed for /usr/bin/python3: the installed remat_torch not imported"
fi

# ---- DESTDIR: everything under the staging directory, remat.pc names PREFIX ----
mk install DESTDIR="$T/stage" PREFIX=/opt/remat > "$T/stage.log" 2>&1 && ok || bad "make install DESTDIR= failed"
[ -x "$T/stage/opt/remat/bin/remat" ] && [ -e "$T/stage/opt/remat/lib/libremat.so.$SOMAJOR" ] &&
    [ -e "$T/stage/opt/remat/include/remat.h" ] && ok || bad "DESTDIR install: $(cd "$T/stage" && find . | head -20)"
grep -q '^prefix=/opt/remat$' "$T/stage/opt/remat/lib/pkgconfig/remat.pc" && ok ||
    bad "remat.pc under DESTDIR: $(head -n 3 "$T/stage/opt/remat/lib/pkgconfig/remat.pc")"

finish cli_example
