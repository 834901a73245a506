#!/bin/sh
# tests/python_in_process.sh SCRIPT ARGS...: $REMAT_PYTHON (default /usr/bin/python3,
# Debian's torch; tests/run_tests.sh sets it to each torch's interpreter) for a script
# that loads libremat.so into the interpreter itself (ctypes: remat_torch).
# In the sanitizer build (REMAT_SANITIZE=1) the library is instrumented, and
# AddressSanitizer's runtime must come first in the process: it and UBSan's
# are preloaded, and LeakSanitizer is off (the interpreter's own allocations
# are not the library's; the C tests check the library's leaks).
if [ "${REMAT_SANITIZE:-0}" = 1 ]; then
    cc=${CC:-cc}
    LD_PRELOAD="$($cc -print-file-name=libasan.so) $($cc -print-file-name=libubsan.so)" \
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" exec "${REMAT_PYTHON:-/usr/bin/python3}" "$@"
fi
exec "${REMAT_PYTHON:-/usr/bin/python3}" "$@"
