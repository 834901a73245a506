#!/bin/sh
# The public surface of libremat.so is exactly what the public headers
# declare with REMAT_API (include/remat.h, include/remat_testing.h; built
# with -fvisibility=hidden, see the Makefile):
#   - every symbol the library exports (nm -D) is declared with REMAT_API;
#   - every function declared with REMAT_API is exported;
#   - every function prototype in include/*.h carries REMAT_API (one
#     without it would be hidden, and a program using it would not link).
#   - every global the static library libremat.a defines starts with remat_.
# Without nm (binutils) the test is skipped.
# REMAT_TEST_REQUIRED: CI has binutils (build-essential); the check must run there
set -u
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
so=$BUILD/libremat.so

if ! command -v nm > /dev/null 2>&1; then
    skip "nm (binutils) not installed: the exported symbols of $so not checked"
    finish cli_symbols
fi
[ -f "$so" ] || { bad "$so is not built (make BUILD=$BUILD all)"; finish cli_symbols; }

# the declared API: the function name on each line that begins with REMAT_API
sed -n 's/^REMAT_API [^(]*[^a-z0-9_]\(remat_[a-z0-9_]*\)(.*/\1/p' include/*.h | sort > "$T/declared"
[ -s "$T/declared" ] && ok || bad "no REMAT_API declarations found in include/*.h"
sort -u "$T/declared" | cmp -s - "$T/declared" && ok || bad "declared twice: $(uniq -d "$T/declared" | tr '\n' ' ')"

# prototypes (at column 0, in C) without REMAT_API
grep -n '^[a-z].*[^a-z0-9_]remat_[a-z0-9_]*(' include/*.h | grep -v ':typedef ' > "$T/unmarked"
[ -s "$T/unmarked" ] && bad "prototypes without REMAT_API (hidden in $so): $(cat "$T/unmarked")" || ok

# every defined dynamic symbol, whatever its kind (code, data, weak, ...)
nm -D --defined-only "$so" | awk 'NF >= 3 { print $3 }' | sed 's/@.*//' | sort -u > "$T/exported"
[ -s "$T/exported" ] && ok || bad "nm -D found no symbols in $so"
comm -23 "$T/exported" "$T/declared" > "$T/extra"
[ -s "$T/extra" ] && bad "exported by $so but not declared with REMAT_API in include/*.h: $(tr '\n' ' ' < "$T/extra")" || ok
comm -13 "$T/exported" "$T/declared" > "$T/missing"
[ -s "$T/missing" ] && bad "declared with REMAT_API but not exported by $so: $(tr '\n' ' ' < "$T/missing")" || ok
# The static library has no visibility to hide behind: every global it
# defines (code or data) carries the one prefix, or a program that links it
# beside another C project (llm.c's train_gpt2.c defines layernorm_forward,
# encoder_forward, ...) fails with duplicate symbols.
a=$BUILD/libremat.a
if [ -f "$a" ]; then
    nm -g --defined-only "$a" | awk 'NF >= 3 { print $3 }' | sort -u > "$T/static"
    [ -s "$T/static" ] && ok || bad "nm found no globals in $a"
    # names that begin with __ belong to the compiler (AddressSanitizer's
    # __odr_asan.* markers of globals, in the sanitizer build)
    grep -v -E '^(remat_|REMAT_|__)' "$T/static" > "$T/unprefixed"
    [ -s "$T/unprefixed" ] && bad "globals of $a without the remat_ prefix: $(tr '\n' ' ' < "$T/unprefixed")" || ok
else
    bad "$a is not built (make BUILD=$BUILD all)"
fi
echo "$(wc -l < "$T/exported") symbols exported, $(wc -l < "$T/declared") declared"

finish cli_symbols
