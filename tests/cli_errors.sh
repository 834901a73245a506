#!/bin/sh
# One test per bad input to the remat command line: a missing file, a wrong
# magic, truncated data, absurd sizes, a bad policy or budget string, an
# unknown flag, an unwritable output.  Each must exit non-zero without a
# crash (status < 128; under test-sanitize also no ASan/LSan report) and
# print exactly one line on stderr, "remat: error: ...".  Then: a failed
# export never leaves a file under the final name (nor touches an existing
# one), and an export killed with SIGKILL at any moment leaves the final
# name either absent or holding the complete file.
# REMAT_TEST_REQUIRED: CI installs python3; the crafted-file checks must run there
set -u
. "$(dirname "$0")/lib.sh"

# expect_err NAME CMD...
expect_err() {
    name=$1; shift
    "$@" >"$T/stdout" 2>"$T/stderr"
    rc=$?
    n=$(wc -l < "$T/stderr")
    if [ "$rc" -eq 0 ] || [ "$rc" -ge 128 ]; then
        bad "$name: exit status $rc (want 1 or 2)"; sed 's/^/    /' "$T/stderr" | head -n 20 >&2
    elif [ "$n" -ne 1 ]; then
        bad "$name: $n lines on stderr (want 1):"; sed 's/^/    /' "$T/stderr" | head -n 20 >&2
    elif ! grep -q '^remat: error: ' "$T/stderr"; then
        bad "$name: stderr is not 'remat: error: ...': $(cat "$T/stderr")"
    else
        ok
    fi
}

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
expect_err "unknown flag (export)" $R export --bogus
expect_err "flag without a value" $R train --steps
expect_err "unknown command" $R frobnicate
expect_err "export: bad format" $R export --resume "$T/ck" --out "$T/x.onnx" --format onnx
expect_err "export: format not given" $R export --resume "$T/ck" --out "$T/x.weights"
expect_err "init-from with a contradicting --dim" $R train --init-from "$T/w.bin" --dim 64 --steps 1
expect_err "init-from with --seq past max_seq" $R train --init-from "$T/w.bin" --seq 64 --steps 1
expect_err "init-from and resume together" $R train --init-from "$T/w.bin" --resume "$T/ck" --steps 1

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
hash_of() {  # params_hash of a weights file, loaded by remat train --init-from
    $R train --init-from "$1" --steps 0 --threads 1 --seq 16 --batch 1 --json 2>/dev/null |
        sed -n 's/.*"params_hash":"\([0-9a-f]*\)".*/\1/p'
}
ref=$(hash_of "$T/big-ref.safetensors")
[ -n "$ref" ] || bad "fixture: hash of the big export"
killed=0
for d in 0.02 0.1 0.2 0.3 0.4 0.8; do
    for fmt in safetensors llmc; do
        out="$T/kill.$fmt"
        rm -f "$out"
        $R export --resume "$T/big" --out "$out" --format $fmt > /dev/null 2>&1 &
        pid=$!
        sleep $d
        kill -9 $pid 2>/dev/null && killed=$((killed + 1))
        wait $pid 2>/dev/null
        if [ -e "$out" ]; then
            h=$(hash_of "$out")
            [ "$h" = "$ref" ] && ok || bad "export killed after ${d}s left a partial $fmt file (hash '$h', want $ref)"
        else
            ok
        fi
    done
done
echo "SIGKILL test: $killed of 12 exports killed mid-way"

finish cli_errors
