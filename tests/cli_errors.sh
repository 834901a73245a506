#!/bin/sh
# One test per bad input to the remat command line: a missing file, a wrong
# magic, truncated data, absurd sizes, a bad policy or budget string, an
# unknown flag, an unwritable output.  Each must exit non-zero without a
# crash (status < 128; under test-sanitize also no ASan/LSan report) and
# print exactly one line on stderr, "remat: error: ...".  Then: a failed
# export never leaves a file under the final name (nor touches an existing
# one), and an export killed with SIGKILL while it writes (stopped first, so
# the kill is known to land mid-run) leaves the final name either absent or
# holding the complete file.
# REMAT_TEST_REQUIRED: CI installs python3; the crafted-file checks must run there
set -u
. "$(dirname "$0")/lib.sh"


tiny="--layers 2 --dim 32 --heads 2 --seq 8 --batch 2 --threads 1"

# ---- fixtures: a checkpoint, its exports, bad files --------------------------
$R train $tiny --steps 2 --quiet --save "$T/ck" > /dev/null 2>&1 || bad "fixture: train --save"
$R export --resume "$T/ck" --out "$T/w.bin" > /dev/null || bad "fixture: export llmc"
$R export --resume "$T/ck" --out "$T/w.safetensors" > /dev/null || bad "fixture: export safetensors"
ckpt=$(ls "$T"/ck/ckpt-*.bin 2>/dev/null | tail -n 1)
[ -n "$ckpt" ] || bad "fixture: no checkpoint file"
printf 'just some text, not weights\n' > "$T/text.txt"
size() { wc -c < "$1" | tr -d ' '; }
head -c $(( $(size "$T/w.bin") - 100 )) "$T/w.bin" > "$T/trunc.bin"
head -c $(( $(size "$T/w.safetensors") / 2 )) "$T/w.safetensors" > "$T/trunc.safetensors"
head -c 500 "$T/w.bin" > "$T/short.bin"
# an llm.c header claiming C = 2^30
python3_ok=0; /usr/bin/python3 -c 'pass' 2>/dev/null && python3_ok=1
# with_python3 CMD...: run a check that needs the crafted files, or skip it
with_python3() {
    if [ $python3_ok = 1 ]; then "$@"; else skip "/usr/bin/python3 missing, no crafted file for: $2"; fi
}
mkhdr() {  # mkhdr OUT magic version maxT V L NH C Vp
    out=$1; shift
    /usr/bin/python3 -c 'import struct,sys; v=[int(x) for x in sys.argv[2:]]; open(sys.argv[1],"wb").write(struct.pack("<256i",*(v+[0]*(256-len(v)))))' "$out" "$@"
}
# a token shard: header says 20 tokens, 10 present; and one with a wrong magic
mkshard() {  # mkshard OUT magic ntok_claimed ntok_present
    /usr/bin/python3 -c 'import struct,sys; o,m,c,p=sys.argv[1],int(sys.argv[2]),int(sys.argv[3]),int(sys.argv[4]); open(o,"wb").write(struct.pack("<256i",*([m,1,c]+[0]*253))+struct.pack("<%dH"%p,*range(p)))' "$@"
}
if [ $python3_ok = 1 ]; then
    mkhdr "$T/huge.bin" 20240326 3 1024 50257 12 12 1073741824 50304
    mkhdr "$T/v5.bin" 20240326 5 1024 50257 12 12 768 50304
    mkshard "$T/trunc-shard.bin" 20240520 20 10
    mkshard "$T/magic-shard.bin" 20240521 20 20
fi
mkdir -p "$T/badck" "$T/truncck"
printf 'REMATCKPgarbage' > "$T/badck/ckpt-00000001.bin"
printf 'NOTACKPT%01000d' 0 > "$T/badck2.bin"
[ -n "$ckpt" ] && head -c 600 "$ckpt" > "$T/truncck/ckpt-00000002.bin"
printf 'x' > "$T/afile"

# ---- missing files -------------------------------------------------------------
expect_err "train: missing data file" $R train $tiny --steps 1 --data "$T/none.txt"
expect_err "train: missing weights file" $R train $tiny --steps 1 --init-from "$T/none.bin"
expect_err "export: missing checkpoint dir" $R export --resume "$T/nodir" --out "$T/x.bin"
expect_err "export: empty checkpoint dir" $R export --resume "$T/truncck/.." --out "$T/x.bin"

# ---- wrong magic -----------------------------------------------------------------
expect_err "train: text as weights" $R train --steps 1 --init-from "$T/text.txt"
expect_err "export: corrupt checkpoint" $R export --resume "$T/badck" --out "$T/x.bin"
with_python3 expect_err "train: shard as weights" $R train --steps 1 --init-from "$T/trunc-shard.bin"
with_python3 expect_err "train: shard with a wrong magic" $R train $tiny --steps 1 --data "$T/magic-shard.bin"
with_python3 expect_err "train: llm.c version 5" $R train --steps 1 --init-from "$T/v5.bin"

# ---- truncated ---------------------------------------------------------------------
expect_err "train: truncated llm.c weights" $R train --steps 1 --threads 1 --init-from "$T/trunc.bin"
expect_err "train: llm.c weights cut in the header" $R train --steps 1 --threads 1 --init-from "$T/short.bin"
expect_err "train: truncated safetensors" $R train --steps 1 --threads 1 --init-from "$T/trunc.safetensors"
expect_err "export: truncated checkpoint" $R export --resume "$T/truncck" --out "$T/x.bin"
with_python3 expect_err "train: truncated shard" $R train $tiny --steps 1 --data "$T/trunc-shard.bin"

# ---- absurd sizes --------------------------------------------------------------------
expect_err "--layers 999999" $R train --layers 999999 --steps 1
expect_err "--dim 0" $R train --dim 0 --steps 1
expect_err "--heads 3 --dim 128" $R train --heads 3 --dim 128 --steps 1
expect_err "--batch overflow" $R train --batch 99999999999999999999 --steps 1
expect_err "--batch -1" $R train --batch -1 --steps 1
expect_err "batch x seq overflow" $R train --batch 1048576 --seq 1048576 --steps 1
expect_err "model too large" $R train --layers 4096 --dim 65536 --heads 1 --steps 1
expect_err "--steps not a number" $R train --steps 1e3
with_python3 expect_err "llm.c header: dim 2^30" $R train --steps 1 --init-from "$T/huge.bin"

# ---- bad policy, budget, flags ------------------------------------------------------------
expect_err "bad policy" $R train $tiny --steps 1 --recompute bogus
expect_err "bad policy every:0" $R train $tiny --steps 1 --recompute every:0
expect_err "bad policy (schedule)" $R schedule --recompute full,every:2
for cmd in plan bench; do
    # an unknown command also fails in one line: make sure these are known
    $R --help 2>/dev/null | grep -q "^  $cmd " && ok || bad "remat --help does not list $cmd"
    expect_err "$cmd: bad budget" $R $cmd --budget 12XB
    expect_err "$cmd: negative budget" $R $cmd --budget -1GiB
done
expect_err "unknown flag (train)" $R train --bogus
expect_err "train: unknown dtype" $R train --dtype fp8 --steps 1
expect_err "train: unknown GEMM engine" $R train --gemm mkl --steps 1
expect_err "unknown flag (export)" $R export --bogus
expect_err "flag without a value" $R train --steps
expect_err "unknown command" $R frobnicate
expect_err "export: bad format" $R export --resume "$T/ck" --out "$T/x.onnx" --format onnx
expect_err "export: format not given" $R export --resume "$T/ck" --out "$T/x.weights"
expect_err "init-from with a contradicting --dim" $R train --init-from "$T/w.bin" --dim 64 --steps 1
expect_err "init-from with --seq past max_seq" $R train --init-from "$T/w.bin" --seq 64 --steps 1
expect_err "init-from and resume together" $R train --init-from "$T/w.bin" --resume "$T/ck" --steps 1
expect_err "export: bad dtype" $R export --resume "$T/ck" --out "$T/x.safetensors" --dtype fp16
expect_err "export: bf16 llm.c file" $R export --resume "$T/ck" --out "$T/x.bin" --dtype bf16
[ -e "$T/x.bin" ] && bad "a refused bf16 llm.c export left $T/x.bin"
# a BF16 safetensors export is half the data and trains when loaded
if $R export --resume "$T/ck" --out "$T/w16.safetensors" --dtype bf16 > /dev/null &&
   $R train --init-from "$T/w16.safetensors" --steps 1 --quiet --threads 1 > /dev/null; then ok
else bad "export --dtype bf16, then train --init-from it"; fi
grep -q '"dtype":"BF16"' "$T/w16.safetensors" && ! grep -q '"dtype":"F32"' "$T/w16.safetensors" && ok ||
    bad "the bf16 export holds F32 tensors"

# ---- unwritable outputs: no file under the final name ---------------------------------------
expect_err "export: missing output directory" $R export --resume "$T/ck" --out "$T/nodir/x.safetensors"
[ -e "$T/nodir/x.safetensors" ] && bad "export left a file in a missing directory"
expect_err "export: output under a regular file" $R export --resume "$T/ck" --out "$T/afile/x.bin"
mkdir -p "$T/isdir"
expect_err "export: output is a directory" $R export --resume "$T/ck" --out "$T/isdir" --format llmc
[ -d "$T/isdir" ] && [ -z "$(ls "$T/isdir")" ] && ok || bad "export into a directory name changed it"
ls "$T" | grep -q '\.tmp\.' && bad "a failed export left a temporary file: $(ls "$T" | grep '\.tmp\.')"
# a failed export leaves an existing output untouched
cp "$T/w.bin" "$T/keep.bin"
expect_err "export: corrupt checkpoint over an existing file" $R export --resume "$T/badck" --out "$T/keep.bin"
cmp -s "$T/w.bin" "$T/keep.bin" && ok || bad "a failed export changed the existing output"
[ -e "$T/x.bin" ] && bad "a failed export left $T/x.bin"

# ---- SIGKILL during export: the final name is absent or complete ----------------------------
$R train --layers 4 --dim 256 --heads 4 --seq 16 --batch 1 --threads 1 --steps 1 --quiet --save "$T/big" \
    > /dev/null 2>&1 || bad "fixture: big checkpoint"
$R export --resume "$T/big" --out "$T/big-ref.safetensors" > /dev/null || bad "fixture: big export"
weights_hash() {  # params_hash of a weights file, loaded by remat train --init-from
    $R train --init-from "$1" --steps 0 --threads 1 --seq 16 --batch 1 --json 2>/dev/null |
        sed -n 's/.*"params_hash":"\([0-9a-f]*\)".*/\1/p'
}
ref=$(weights_hash "$T/big-ref.safetensors")
[ -n "$ref" ] || bad "fixture: hash of the big export"
# Each kill is aimed, not a guess at timing: wait until the export's
# temporary file NAME.tmp.PID exists (and, in some rounds, a little longer),
# stop the process (SIGSTOP), and look at the files while nothing moves.
# The kill must find the process alive: it dies of signal 9 (status 137).
# Caught before its rename, the final name must be absent and the temporary
# file left behind (a partial write); the next export of the same name
# removes it and writes the whole file.  Caught after the rename, the final
# name must hold the whole file.  Each format must be caught before its
# rename at least once.
pstate() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1; }   # R, S, D, T, Z, ...
kill_export() {  # kill_export FORMAT PAUSE: sets where to mid (before the rename), late or missed
    out="$T/kill.$1"
    rm -f "$out" "$out".tmp.*
    $R export --resume "$T/big" --out "$out" --format "$1" > /dev/null 2>&1 &
    pid=$!
    n=0   # builtins only (about 15 us a round): the stop comes right after the file appears
    while [ ! -e "$out.tmp.$pid" ] && [ ! -e "$out" ] && kill -0 $pid 2> /dev/null && [ $n -lt 2000000 ]; do
        n=$((n + 1))
    done
    [ "$2" = 0 ] || sleep "$2"
    kill -STOP $pid 2> /dev/null
    n=0
    while [ "$(pstate $pid)" != T ] && [ "$(pstate $pid)" != Z ] && [ -e "/proc/$pid" ] && [ $n -lt 1000 ]; do
        n=$((n + 1))
    done
    st=$(pstate $pid)
    if [ -e "$out.tmp.$pid" ] && [ ! -e "$out" ]; then where=mid; else where=late; fi
    kill -9 $pid 2> /dev/null
    wait $pid 2> /dev/null; rc=$?
    if [ "$st" != T ]; then   # it ended before it could be stopped: no kill mid-run
        [ $rc -eq 0 ] || bad "export ($1) exited $rc before the kill"
        where=missed
        return
    fi
    [ $rc -eq 137 ] && ok || bad "stopped export ($1) did not die of SIGKILL: status $rc"
    if [ $where = mid ]; then
        [ ! -e "$out" ] && [ -e "$out.tmp.$pid" ] && ok || bad "export ($1) killed before its rename: $(ls "$T" | grep kill)"
        $R export --resume "$T/big" --out "$out" --format "$1" > /dev/null 2>&1 || bad "export ($1) after a kill failed"
        [ -e "$out.tmp.$pid" ] && bad "the next export ($1) left the killed one's $out.tmp.$pid"
    fi
    h=$(weights_hash "$out")
    [ "$h" = "$ref" ] && ok || bad "export ($1) killed $where its rename: final file hash '$h', want $ref"
}
late=0; missed=0
for fmt in safetensors llmc; do
    mid=0; tries=0
    while [ $mid -eq 0 ] && [ $tries -lt 10 ]; do   # stopped right away: before the rename
        tries=$((tries + 1))
        kill_export $fmt 0
        case $where in mid) mid=1;; late) late=$((late + 1));; *) missed=$((missed + 1));; esac
    done
    [ $mid -eq 1 ] && ok || bad "no $fmt export was stopped before its rename in $tries tries"
    for pause in 0.005 0.02 0.1; do                   # later: before or after the rename
        kill_export $fmt $pause
        case $where in mid) mid=$((mid + 1));; late) late=$((late + 1));; *) missed=$((missed + 1));; esac
    done
    echo "SIGKILL test ($fmt): $mid exports killed before their rename (the first after $tries tries)"
done
echo "SIGKILL test: $late exports killed after their rename, $missed ended before the stop"

finish cli_errors
