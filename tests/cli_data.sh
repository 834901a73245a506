#!/bin/sh
# End-to-end tests of llm.c's data conventions in `remat train`:
#   - --data with a glob of shards: read in sorted order as one stream (the
#     same run as on one shard holding their concatenation), every shard
#     validated (a corrupt one in the glob: one line naming it);
#   - --val-data: a separate validation set, the training data not split;
#     recorded in checkpoints, so a resume needs no flag and refuses another
#     set; a pattern that matches nothing, a text file among shards, a
#     validation set without --data: one line each.
set -u
. "$(dirname "$0")/lib.sh"
R=$(cd "$(dirname "$R")" && pwd)/$(basename "$R")
PY=/usr/bin/python3
# expect_err_says WANT CMD...: expect_err (lib.sh), and the line says WANT
expect_err_says() {
    want=$1; shift
    expect_err "$want" "$@"
    grep -q "^remat: error: .*$want" "$T/stderr" && ok || bad "the error does not say '$want': $(cat "$T/stderr")"
}

mkdir -p "$T/d"
$PY - "$T/d" <<'PY'
import struct, sys
d = sys.argv[1]
def shard(path, toks):
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *([20240520, 1, len(toks)] + [0] * 253)))
        f.write(struct.pack("<%dH" % len(toks), *toks))
allt = []
# written out of order: the glob sorts them (train_1 < train_2 < train_10 is not
# wanted: byte order gives 1, 10, 2, as llm.c's zero-padded names never meet)
for k in (2, 0, 1):
    toks = [(i * 31 + k * 7) % 300 for i in range(1500 + 100 * k)]
    shard("%s/train_%02d.bin" % (d, k), toks)
for k in (0, 1, 2):
    allt += [(i * 31 + k * 7) % 300 for i in range(1500 + 100 * k)]
shard("%s/all.bin" % d, allt)
for k in (0, 1):
    shard("%s/val_%02d.bin" % (d, k), [(i * 17 + k) % 300 for i in range(400)])
open("%s/notes.txt" % d, "w").write("plain text, not a shard\n" * 20)
PY
cfg="--layers 2 --dim 32 --heads 2 --seq 16 --batch 4 --threads 1 --steps 6 --eval-every 3 --eval-batches 2 --sample 0 --no-calibrate --vocab 300"

# a glob is one stream: the same run as its concatenation in one shard
$R train $cfg --json --data "$T/d/train_*.bin" > "$T/g.jsonl" 2> "$T/g.err" || bad "glob run: $(cat "$T/g.err")"
$R train $cfg --json --data "$T/d/all.bin" > "$T/a.jsonl" 2> "$T/a.err" || bad "one shard: $(cat "$T/a.err")"
[ -n "$(hash_of "$T/g.jsonl")" ] && [ "$(hash_of "$T/g.jsonl")" = "$(hash_of "$T/a.jsonl")" ] && ok ||
    bad "a glob of shards differs from their concatenation: $(hash_of "$T/g.jsonl") $(hash_of "$T/a.jsonl")"
grep -o '"val_loss":[^,}]*' "$T/g.jsonl" > "$T/gv"; grep -o '"val_loss":[^,}]*' "$T/a.jsonl" > "$T/av"
[ -s "$T/gv" ] && cmp -s "$T/gv" "$T/av" && ok || bad "validation losses of the glob"
# text mode names the token counts: 4800 tokens split 90/10
$R train $cfg --steps 1 --data "$T/d/train_*.bin" > "$T/g.txt" 2>&1
grep -q '4320 train / 480 val tokens' "$T/g.txt" && ok || bad "glob token counts: $(grep data: "$T/g.txt")"

# --val-data: the training data is not split
$R train $cfg --steps 1 --data "$T/d/train_*.bin" --val-data "$T/d/val_*.bin" > "$T/v.txt" 2>&1 || bad "val-data run"
grep -q '4800 train / 800 val tokens, val from .*val_\*.bin' "$T/v.txt" && ok || bad "val-data token counts: $(grep data: "$T/v.txt")"
$R train $cfg --json --data "$T/d/train_*.bin" --val-data "$T/d/val_*.bin" > "$T/v.jsonl" 2>&1 || bad "val-data run"
vref=$(hash_of "$T/v.jsonl")
grep -o '"val_loss":[^,}]*' "$T/v.jsonl" > "$T/vv"
[ -n "$vref" ] && [ -s "$T/vv" ] && ! cmp -s "$T/vv" "$T/gv" && ok || bad "the validation set is not what validation reads"
# recorded in the checkpoint: a resume continues exactly without the flags
$R train $cfg --json --data "$T/d/train_*.bin" --val-data "$T/d/val_*.bin" --steps 3 --save "$T/ck" > /dev/null 2>&1 || bad "save"
$R train $cfg --json --resume "$T/ck" > "$T/r.jsonl" 2> "$T/r.err" || bad "resume: $(cat "$T/r.err")"
[ "$(hash_of "$T/r.jsonl")" = "$vref" ] && ok || bad "resume with the recorded validation set: $(hash_of "$T/r.jsonl") != $vref"
(cd "$T/d" && $R train $cfg --json --resume "$T/ck" --data 'train_*.bin' --val-data 'val_*.bin' > "$T/r2.jsonl" 2> "$T/r2.err") &&
    [ "$(hash_of "$T/r2.jsonl")" = "$vref" ] && ok || bad "resume with the same relative patterns: $(cat "$T/r2.err")"
expect_err_says "validated on" $R train $cfg --resume "$T/ck" --val-data "$T/d/val_00.bin"

# every shard is validated: a corrupt one in the glob is named
cp -r "$T/d" "$T/c"
$PY - "$T/c/train_01.bin" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[4] = 2                       # version 2
open(p, "wb").write(b)
PY
expect_err_says "shard '.*train_01.bin' has version 2" $R train $cfg --data "$T/c/train_*.bin"
head -c 2000 "$T/d/train_02.bin" > "$T/c/train_02.bin"; cp "$T/d/train_01.bin" "$T/c/train_01.bin"
expect_err_says "shard '.*train_02.bin' is 2000 bytes, expected .*truncated" $R train $cfg --data "$T/c/train_*.bin"
$PY - "$T/c/train_00.bin" <<'PY'
import struct, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[1024 + 2 * 7:1024 + 2 * 8] = struct.pack("<H", 4000)   # token 7 outside --vocab 300
open(p, "wb").write(b)
PY
expect_err_says "shard '.*train_00.bin': token 7 is 4000" $R train $cfg --data "$T/c/train_00.bin"
expect_err_says "no file matches" $R train $cfg --data "$T/d/nothing_*.bin"
expect_err_says "not an llm.c token shard: a pattern that matches several files" $R train $cfg --data "$T/d/*"
expect_err_says "val-data needs --data" $R train $cfg --val-data "$T/d/val_*.bin"
expect_err_says "both must be llm.c shards or both text" $R train $cfg --data "$T/d/train_*.bin" --val-data "$T/d/notes.txt"

finish cli_data
