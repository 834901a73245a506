#!/bin/sh
# End-to-end tests of training checkpoints (`remat train --save/--resume`) and
# of numerical faults (`--on-nonfinite stop|skip`, `--debug-nan`):
#   - exact resume: a run killed with SIGKILL at random moments (during steps
#     and during saves) and resumed gives the same per-step losses (printed
#     with 9 significant digits: exact for float32) and the same params_hash
#     as the run that was never interrupted;
#   - no partial file is ever left under a final name, stale .tmp files are
#     ignored and cleaned up;
#   - a flipped byte or a truncated newest checkpoint -> warning, fallback to
#     the previous one, same final hash; all corrupt -> one-line error;
#   - resuming with other data or contradicting flags, an unwritable
#     directory -> one-line error, non-zero exit;
#   - a NaN gradient or loss: stop (one line naming the step and the tensor,
#     last good state checkpointed) or skip (warning, no update, go on).
set -u
. "$(dirname "$0")/lib.sh"
R=$(cd "$(dirname "$R")" && pwd)/$(basename "$R")
PY=/usr/bin/python3

# a 5 MiB checkpoint on few tokens: saves take longer than steps, so random
# kills often land inside a save; 24 steps take about a second on one thread
big="--layers 2 --dim 128 --heads 4 --seq 16 --batch 2 --threads 1 --eval-every 0 --sample 0 --json --steps 24"
small="--layers 2 --dim 32 --heads 2 --seq 16 --batch 4 --threads 1 --eval-every 0 --sample 0 --json --steps 12"

# every step line of files 2.. has the loss of the same step in file 1
same_losses() {
    $PY - "$@" <<'PY'
import json, sys
def steps(path):
    out = {}
    for line in open(path, errors="replace"):
        try: r = json.loads(line)
        except ValueError: continue          # a line cut short by SIGKILL
        if r.get("type") == "step" and "loss" in r: out[r["step"]] = r["loss"]
    return out
ref = steps(sys.argv[1])
n = 0
for p in sys.argv[2:]:
    for s, l in steps(p).items():
        assert ref[s] == l, "%s: step %d loss %r, uninterrupted run %r" % (p, s, l, ref[s])
        n += 1
print("compared", n, "step losses")
PY
}
# every ckpt-*.bin in $1 is complete: same size as $2 bytes
all_complete() {
    for f in "$1"/ckpt-*.bin; do
        [ -e "$f" ] || continue
        [ "$(wc -c < "$f")" -eq "$2" ] || { echo "partial file under a final name: $f" >&2; return 1; }
    done
}
flip_byte() {   # flip_byte FILE OFFSET: invert every bit of one byte
    b=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
    printf "\\$(printf %o $((b ^ 255)))" | dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null
}

# ---- exact resume across SIGKILLs -------------------------------------------------
$R train $big > "$T/a.jsonl" || bad "uninterrupted run failed"
ref=$(hash_of "$T/a.jsonl")
[ -n "$ref" ] && ok || bad "no params_hash in the uninterrupted run"
$R train $big --steps 1 --save "$T/size" > /dev/null || bad "size probe failed"
size=$(wc -c < "$T/size/ckpt-00000001.bin")

ck="$T/ck"; i=0; kills=0; torn=0; finished=0
while [ $i -lt 16 ] && [ $finished -eq 0 ]; do
    i=$((i + 1))
    if ls "$ck"/ckpt-*.bin > /dev/null 2>&1; then how="--resume $ck"; else how="--save $ck"; fi
    $R train $big $how --save-every 1 > "$T/k$i.jsonl" 2> "$T/k$i.err" &
    pid=$!
    until_steps $pid "$T/k$i.jsonl"     # kill once it has trained 1-6 steps of its own
    kill -9 $pid 2> /dev/null
    wait $pid 2> /dev/null; rc=$?
    if [ $rc -eq 0 ]; then finished=1
    elif [ $rc -eq 137 ]; then kills=$((kills + 1))
    else bad "run $i ($how) exited $rc"; cat "$T/k$i.err" >&2; break; fi
    all_complete "$ck" "$size" && ok || bad "after kill $i"
    ls "$ck" | grep -q '\.tmp' && torn=$((torn + 1))
done
echo "kill loop: $i runs, $kills killed, $torn left a stale .tmp (killed during a save)"
$R train $big --resume "$ck" --save-every 1 > "$T/final.jsonl" 2> "$T/final.err" || bad "final resume failed"
[ "$(hash_of "$T/final.jsonl")" = "$ref" ] && ok || bad "params_hash after kills $(hash_of "$T/final.jsonl") != $ref"
same_losses "$T/a.jsonl" "$T"/k*.jsonl "$T/final.jsonl" && ok || bad "losses after kills"
grep -q warning "$T/final.err" && bad "a checkpoint left by a kill did not validate: $(cat "$T/final.err")" || ok
ls "$ck" | grep -q '\.tmp' && bad "stale .tmp files not cleaned up: $(ls "$ck")" || ok
[ "$(ls "$ck" | wc -l)" -eq 2 ] && ok || bad "expected the last 2 checkpoints, found: $(ls "$ck")"
# a kill between a save's rename and its pruning leaves 3 files; resuming a
# run that is already at its last step saves nothing but still prunes
cp "$(ls "$ck"/ckpt-*.bin | head -n 1)" "$ck/ckpt-00000001.bin"
$R train $big --resume "$ck" --save-every 1 > /dev/null 2>&1 || bad "resume at the last step failed"
[ "$(ls "$ck" | wc -l)" -eq 2 ] && [ ! -e "$ck/ckpt-00000001.bin" ] && ok || bad "not pruned on resume: $(ls "$ck")"

# ---- corrupt and truncated checkpoints (small model) -------------------------------
$R train $small > "$T/s.jsonl" || bad "small run failed"
sref=$(hash_of "$T/s.jsonl")
$R train $small --steps 8 --save "$T/base" --save-every 1 > /dev/null || bad "base run failed"
[ -f "$T/base/ckpt-00000007.bin" ] && [ -f "$T/base/ckpt-00000008.bin" ] && [ "$(ls "$T/base" | wc -l)" -eq 2 ] \
    && ok || bad "base dir: $(ls "$T/base")"
ssize=$(wc -c < "$T/base/ckpt-00000008.bin")
for off in 3 20 60 300 $((ssize / 2)) $((ssize - 1)) trunc; do
    rm -rf "$T/c"; cp -r "$T/base" "$T/c"
    if [ $off = trunc ]; then
        head -c $((ssize / 2)) "$T/base/ckpt-00000008.bin" > "$T/c/ckpt-00000008.bin"
    else
        flip_byte "$T/c/ckpt-00000008.bin" $off
    fi
    $R train $small --resume "$T/c" > "$T/c.jsonl" 2> "$T/c.err"; rc=$?
    if [ $rc -eq 0 ] && [ "$(hash_of "$T/c.jsonl")" = "$sref" ] && [ "$(wc -l < "$T/c.err")" -eq 1 ] &&
       grep -q '^remat: warning: .*ckpt-00000008.bin.*resumed from .*ckpt-00000007.bin' "$T/c.err"; then ok
    else bad "corrupt newest ($off): rc=$rc hash=$(hash_of "$T/c.jsonl") want $sref; $(cat "$T/c.err")"; fi
done
# the fallback resumed from step 7: its step 8..12 losses are the uninterrupted ones
same_losses "$T/s.jsonl" "$T/c.jsonl" && ok || bad "losses after fallback"
# all checkpoints corrupt; no checkpoint; no directory
rm -rf "$T/c"; cp -r "$T/base" "$T/c"
flip_byte "$T/c/ckpt-00000008.bin" 400; flip_byte "$T/c/ckpt-00000007.bin" 400
expect_err 'train --resume c' $R train $small --resume "$T/c"
grep -q 'no valid checkpoint' "$T/stderr" && ok || bad "all-corrupt message: $(cat "$T/stderr")"
mkdir "$T/empty"
expect_err 'train --resume empty' $R train $small --resume "$T/empty"
expect_err 'train --resume nonexistent' $R train $small --resume "$T/nonexistent"
printf 'not a checkpoint' > "$T/empty/ckpt-00000001.bin"
expect_err 'train --resume empty' $R train $small --resume "$T/empty"
# stale temporary files (of a dead writer) are ignored, then removed by the next save
rm -rf "$T/c"; cp -r "$T/base" "$T/c"
# (both names: the shared writer's ckpt-<step>.bin.tmp.<pid>, and the older ckpt-<step>.<pid>.tmp)
head -c 1000 "$T/base/ckpt-00000008.bin" > "$T/c/ckpt-00000009.99999999.tmp"
head -c 1000 "$T/base/ckpt-00000008.bin" > "$T/c/ckpt-00000009.bin.tmp.99999999"
$R train $small --resume "$T/c" > "$T/c.jsonl" 2> "$T/c.err" || bad "resume beside a stale .tmp failed"
[ "$(hash_of "$T/c.jsonl")" = "$sref" ] && [ ! -s "$T/c.err" ] && ok || bad "stale .tmp: $(cat "$T/c.err")"
[ -e "$T/c/ckpt-00000009.99999999.tmp" ] && bad "stale .tmp (older name) not removed" || ok
[ -e "$T/c/ckpt-00000009.bin.tmp.99999999" ] && bad "stale .tmp not removed" || ok

# ---- Llama: the checkpoint records the architecture; resume is exact -------------------
llama="--arch llama --layers 2 --dim 32 --heads 4 --kv-heads 2 --ffn-dim 48 --head-dim 6 --rope-theta 5e5 \
--rope-scaling llama3:8:1:4:16 --norm-eps 1e-5 --seq 16 --batch 4 --threads 1 --eval-every 0 --sample 0 --json --steps 10"
$R train $llama > "$T/l.jsonl" || bad "llama run failed"
lref=$(hash_of "$T/l.jsonl")
$R train $llama --steps 4 --save "$T/lck" > /dev/null || bad "llama run to step 4 failed"
# the resume takes the architecture from the checkpoint: no architecture flag needed
$R train --resume "$T/lck" --steps 10 --threads 1 --eval-every 0 --sample 0 --json > "$T/l2.jsonl" &&
    [ "$(hash_of "$T/l2.jsonl")" = "$lref" ] && ok || bad "llama resume: params_hash $(hash_of "$T/l2.jsonl"), want $lref"
$PY - "$T/l2.jsonl" <<'PY' && ok || bad "llama resume: the summary does not say the architecture"
import json, sys
s = [json.loads(l) for l in open(sys.argv[1])][-1]
assert (s["arch"], s["n_kv_head"], s["head_dim"], s["ffn_dim"], s["tie_embeddings"]) == ("llama", 2, 6, 48, 0), s
assert s["rope_theta"] == 5e5 and s["norm_eps"] == 1e-5, s
PY
expect_err 'train --resume lck --kv-heads 4' $R train --resume "$T/lck" --steps 10 --kv-heads 4
expect_err 'train --resume lck --arch gpt2' $R train --resume "$T/lck" --steps 10 --arch gpt2

# ---- refusals -------------------------------------------------------------------------
expect_err 'train --resume base --dim 64' $R train $small --resume "$T/base" --dim 64
expect_err 'train --resume base --seed 9' $R train $small --resume "$T/base" --seed 9
expect_err 'train --resume base --attention flash' $R train $small --resume "$T/base" --attention flash
expect_err 'train --resume base --lr 0.5' $R train $small --resume "$T/base" --lr 0.5
expect_err 'train --resume base --steps 4' $R train $small --resume "$T/base" --steps 4
expect_err 'train --save base (a fresh run into a used directory)' $R train $small --save "$T/base"
printf 'hello world, this is a tiny text file for remat.\n%.0s' $(seq 1 40) > "$T/text.txt"
expect_err 'train --resume base --data text.txt' $R train $small --resume "$T/base" --data "$T/text.txt"
$R train $small --data "$T/text.txt" --steps 3 --save "$T/txt" > /dev/null || bad "text run failed"
(cd "$T" && $R train $small --data text.txt --resume txt --steps 4 > /dev/null) && ok || bad "resume with the same data (relative path)"
# same size, other contents: caught by the data hash in the checkpoint
sed 's/hello/jello/' "$T/text.txt" > "$T/text2.txt" && mv "$T/text2.txt" "$T/text.txt"
expect_err 'train --resume txt --steps 5' $R train $small --resume "$T/txt" --steps 5
grep -q 'other contents' "$T/stderr" && ok || bad "changed contents not named: $(cat "$T/stderr")"
printf 'more text\n' >> "$T/text.txt"
expect_err 'train --resume txt --steps 5' $R train $small --resume "$T/txt" --steps 5
: > "$T/file"
expect_err 'train --save file (not a directory)' $R train $small --save "$T/file"
expect_err 'train --save file/sub (cannot be created)' $R train $small --save "$T/file/sub"
expect_err 'train --on-nonfinite maybe' $R train $small --on-nonfinite maybe
expect_err 'train --save-every 2' $R train $small --save-every 2
expect_err 'train --debug-nan 3:nosuch' $R train $small --debug-nan 3:nosuch

# ---- numerical faults ---------------------------------------------------------------
# stop (default): one line naming step and tensor; the last good state stays on disk
expect_err 'train --save nan1 --save-every 1 --debug-nan 5:qkvw' $R train $small --save "$T/nan1" --save-every 1 --debug-nan 5:qkvw
grep -q 'step 5' "$T/stderr" && grep -q qkvw "$T/stderr" && ok || bad "stop message: $(cat "$T/stderr")"
[ "$(ls "$T/nan1")" = "$(printf 'ckpt-00000003.bin\nckpt-00000004.bin')" ] && ok || bad "nan1 dir: $(ls "$T/nan1")"
$R train $small --resume "$T/nan1" > "$T/n.jsonl" 2> "$T/n.err"
[ "$(hash_of "$T/n.jsonl")" = "$sref" ] && [ ! -s "$T/n.err" ] && ok || bad "resume after stop"
# with saves every 3 steps, the stop checkpoints the last good state (step 4, data rewound)
expect_err 'train --save nan2 --save-every 3 --debug-nan 5:loss' $R train $small --save "$T/nan2" --save-every 3 --debug-nan 5:loss
grep -q 'loss' "$T/stderr" && ok || bad "stop message names the loss: $(cat "$T/stderr")"
[ "$(ls "$T/nan2")" = "$(printf 'ckpt-00000003.bin\nckpt-00000004.bin')" ] && ok || bad "nan2 dir: $(ls "$T/nan2")"
$R train $small --resume "$T/nan2" > "$T/n.jsonl" && [ "$(hash_of "$T/n.jsonl")" = "$sref" ] && ok || bad "resume after stop (rewound)"
expect_err 'train --debug-nan 1:wte' $R train $small --debug-nan 1:wte
# skip: a warning, no update at that step, training goes on; exact across a resume too
$R train $small --debug-nan 5:fcw --on-nonfinite skip > "$T/k.jsonl" 2> "$T/k.err" && ok || bad "skip run failed"
[ "$(wc -l < "$T/k.err")" -eq 1 ] && grep -q '^remat: warning: step 5: .*fcw.*skipped' "$T/k.err" && ok || bad "skip warning: $(cat "$T/k.err")"
grep -q '"step":5,"skipped":true' "$T/k.jsonl" && ok || bad "skip JSON line"
kref=$(hash_of "$T/k.jsonl")
[ -n "$kref" ] && [ "$kref" != "$sref" ] && ok || bad "skip changed nothing"
same_losses "$T/s.jsonl" "$T/k.jsonl" 2> /dev/null && bad "skip run has the same losses after step 5" || ok
$R train $small --steps 8 --debug-nan 5:fcw --on-nonfinite skip --save "$T/sk" --save-every 1 > /dev/null 2>&1 || bad "skip+save"
$R train $small --resume "$T/sk" > "$T/k2.jsonl" && [ "$(hash_of "$T/k2.jsonl")" = "$kref" ] && ok || bad "resume of a run with a skipped step"
same_losses "$T/k.jsonl" "$T/k2.jsonl" > /dev/null && ok || bad "losses after resuming a skipping run"

# the summary's medians and first loss are of the steps that completed: a
# skipped step has no times (MALLOC_PERTURB_ fills memory that was never
# written with a pattern, so reading it shows)
MALLOC_PERTURB_=165 $R train $small --steps 2 --debug-nan 1:loss --on-nonfinite skip > "$T/m.jsonl" 2> /dev/null || bad "skip run (medians)"
MALLOC_PERTURB_=165 $R train $small --steps 1 --debug-nan 1:loss --on-nonfinite skip > "$T/m1.jsonl" 2> /dev/null || bad "skip run (all skipped)"
/usr/bin/python3 - "$T/m.jsonl" "$T/m1.jsonl" <<'PY' && ok || bad "medians over the completed steps"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
done = [r for r in rows if r["type"] == "step" and not r.get("skipped")]
s = rows[-1]
assert [r["step"] for r in done] == [2], done
assert s["comm_ms_median"] == 0 and s["reduce_ms_median"] == 0, s     # one rank, one micro-batch
assert s["step_ms_median"] == done[0]["ms"], (s["step_ms_median"], done)   # both at full precision
assert s["loss_first"] == s["loss_last"] == done[0]["loss"], s
a = [json.loads(l) for l in open(sys.argv[2])][-1]
for k in ("step_ms_median", "tokens_per_s", "comm_ms_median", "reduce_ms_median", "loss_first", "loss_last"):
    assert a[k] is None, (k, a[k])
PY

finish cli_resume
