#!/bin/sh
# Run by `make test-cblas` against a GEMM=cblas build (no oneDNN): what
# needs oneDNN is refused in one line ("remat: error: ..."), and fp32 on
# CBLAS trains.  Not a cli_*.sh test: the default build has oneDNN.
set -u
. "$(dirname "$0")/lib.sh"
tiny="--layers 2 --dim 32 --heads 2 --seq 8 --batch 2 --threads 1"
expect_err "--gemm onednn without oneDNN" $R train $tiny --gemm onednn --steps 1
expect_err "--dtype bf16 without oneDNN" $R train $tiny --dtype bf16 --steps 1
expect_err "bench --dtype bf16 without oneDNN" $R bench $tiny --dtype bf16 --policies none --steps 1
grep -q "without oneDNN\|oneDNN" "$T/stderr" && ok || bad "the message does not name oneDNN: $(cat "$T/stderr")"
out=$($R train $tiny --steps 1 --json 2>&1)
echo "$out" | grep -q '"gemm":"cblas"' && ok || bad "a cblas build trains and reports gemm cblas: $out"
finish cblas_errors
