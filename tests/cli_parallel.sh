#!/bin/sh
# End-to-end tests of data parallelism (`mpirun -np R remat train`):
#   - the same global batch and micro-batch at R = 1, 2 and 4: every step's
#     loss (9 significant digits: exact for float32), the validation loss
#     and params_hash bitwise equal, for three policies with and without
#     dropout (test_parallel.c compares gradients and every rank's memory);
#   - ZeRO-1's per-rank memory in the JSON summary: AdamW state 8P/R plus
#     alignment, and everything equal to `remat plan --ranks`'s prediction;
#   - resume across rank counts: the whole job (mpirun and its ranks)
#     killed with SIGKILL at random moments, resumed with another R, and the
#     final params_hash equal to a run never interrupted;
#   - faults under mpirun -np 2: a corrupt shard that only rank 1 reads,
#     a non-finite gradient on one rank, an allocation failure on one rank:
#     one line naming the error (and its rank), a non-zero exit, no hang;
#   - layouts that do not exist: one line naming the valid micro-batches.
# REMAT_TEST_REQUIRED: data parallelism is checked end to end here; CI installs openmpi-bin
set -u
. "$(dirname "$0")/lib.sh"
R=$(cd "$(dirname "$R")" && pwd)/$(basename "$R")
PY=/usr/bin/python3
if ! command -v mpirun > /dev/null 2>&1; then
    skip "mpirun is not installed (apt-get install openmpi-bin)"
    finish cli_parallel
fi
# as root OpenMPI needs these; -q keeps its own banners off stderr
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi_sanitizer_env
MPI="mpirun -q --oversubscribe --bind-to none"
# a hang is a failure: no run here should take a minute
run() { np=$1; shift; if [ "$np" = 1 ]; then timeout 120 "$R" train "$@"; else timeout 120 $MPI -np "$np" "$R" train "$@"; fi; }

field() { sed -n "s/.*\"$2\":\([0-9.e+-]*\).*/\1/p" "$1" | tail -n 1; }
# the step losses and the summary's loss and validation fields of a run
trail() { grep -o '"step":[0-9]*,"loss":[^,]*\|"val_loss":[^,]*\|"params_hash":"[0-9a-f]*"' "$1"; }

base="--layers 2 --dim 32 --heads 2 --seq 16 --batch 8 --micro-batch 2 --threads 1 --steps 4 --eval-every 2 --eval-batches 2 --sample 0 --json --no-calibrate"

# ---- bitwise equal at R = 1, 2, 4 --------------------------------------------------------
for pol in none every:2,selective revolve:2,pointwise; do
    for p in 0 0.1; do
        for np in 1 2 4; do
            run $np $base --recompute $pol --dropout $p > "$T/r$np.jsonl" 2> "$T/r$np.err" || bad "R=$np $pol dropout $p failed: $(cat "$T/r$np.err")"
        done
        trail "$T/r1.jsonl" > "$T/t1"
        [ -s "$T/t1" ] && [ -n "$(hash_of "$T/r1.jsonl")" ] && ok || bad "no trail for $pol dropout $p"
        for np in 2 4; do
            trail "$T/r$np.jsonl" > "$T/t$np"
            cmp -s "$T/t1" "$T/t$np" && ok || bad "$pol dropout $p: R=$np differs from R=1: $(diff "$T/t1" "$T/t$np" | head -4)"
        done
    done
done
# the micro-batch is what changes the sums; the rank count never does
run 1 $base --micro-batch 8 > "$T/m8.jsonl" 2>&1
[ "$(hash_of "$T/m8.jsonl")" != "$(hash_of "$T/r1.jsonl")" ] && ok || bad "micro-batch 8 and 2 gave the same bits"
grep -q '"ranks":4,"micro_batch":2,"grad_accum":1,"zero":1' "$T/r4.jsonl" && ok || bad "R=4 JSON fields: $(tail -n 1 "$T/r4.jsonl")"
grep -q '"ranks":1,"micro_batch":2,"grad_accum":4,"zero":0' "$T/r1.jsonl" && ok || bad "R=1 JSON fields"
# ZeRO 0 and 1 are the same arithmetic
run 2 $base --zero 0 > "$T/z0.jsonl" 2>&1
run 2 $base --zero 1 > "$T/z1.jsonl" 2>&1
[ -n "$(hash_of "$T/z0.jsonl")" ] && [ "$(hash_of "$T/z0.jsonl")" = "$(hash_of "$T/z1.jsonl")" ] && ok || bad "ZeRO 0 and 1 differ"

# ---- ZeRO-1: per-rank memory --------------------------------------------------------------
mem="--layers 4 --dim 64 --heads 4 --seq 16 --batch 8 --threads 1 --steps 2 --eval-every 0 --eval-batches 1 --sample 0 --json --no-calibrate"
for np in 1 2 4; do
    run $np $mem > "$T/mem$np.jsonl" 2> "$T/mem$np.err" || bad "memory run R=$np: $(cat "$T/mem$np.err")"
    $R plan $(echo $mem | sed 's/--threads 1.*//') --ranks $np --no-profile --json --recompute none > "$T/plan$np.json" 2> /dev/null
done
$PY - "$T" <<'PY' && ok || bad "per-rank memory"
import json, sys
d = sys.argv[1]
def summary(path):
    for line in open(path):
        r = json.loads(line)
        if r["type"] == "summary": return r
P = None
for np in (1, 2, 4):
    s = summary("%s/mem%d.jsonl" % (d, np))
    p = json.load(open("%s/plan%d.json" % (d, np)))["parallel"]
    if P is None: P = s["params_bytes"] // 4
    # the plan predicts every figure of rank 0 to the byte
    for k in ("params_bytes", "grads_bytes", "optim_bytes", "reduce_bytes", "workspace_bytes"):
        assert s[k] == p[k], (np, k, s[k], p[k])
    assert s["comm_bytes_per_step"] == p["comm_bytes_per_step"], (np, s["comm_bytes_per_step"], p)
    assert s["step_peak_bytes"] == p["static_bytes"] + s["act_peak_pred_bytes"], (np, s["step_peak_bytes"])
    assert s["act_peak_bytes"] == s["act_peak_pred_bytes"]
    # AdamW state: 8P/R plus the alignment of the slices (4096 parameters)
    assert 8 * P // np <= s["optim_bytes"] < 8 * P // np + 8 * 4096, (np, s["optim_bytes"], P)
    print("R=%d: optim %d, reduce %d, step peak %d, comm %d B/step" % (np, s["optim_bytes"], s["reduce_bytes"],
          s["step_peak_bytes"], s["comm_bytes_per_step"]))
PY

# ---- resume across rank counts after SIGKILLs of the whole job ---------------------------------
ck="--layers 2 --dim 64 --heads 4 --seq 32 --batch 8 --micro-batch 2 --threads 1 --steps 80 --eval-every 0 --eval-batches 1 --sample 0 --json --no-calibrate --dropout 0.1"
run 1 $ck > "$T/straight.jsonl" 2>&1 || bad "straight run failed"
ref=$(hash_of "$T/straight.jsonl")
i=0; kills=0; finished=0
while [ $i -lt 12 ] && [ $finished -eq 0 ]; do
    i=$((i + 1))
    np=$(( 1 << (i % 3) ))   # 2, 4, 1, 2, ...
    if ls "$T/ck"/ckpt-*.bin > /dev/null 2>&1; then how="--resume $T/ck"; else how="--save $T/ck"; fi
    if [ $np = 1 ]; then "$R" train $ck $how --save-every 1 > "$T/k$i.jsonl" 2> "$T/k$i.err" &
    else $MPI -np $np "$R" train $ck $how --save-every 1 > "$T/k$i.jsonl" 2> "$T/k$i.err" & fi
    pid=$!
    until_steps $pid "$T/k$i.jsonl"     # kill once it has trained 1-6 steps of its own
    # the whole job: mpirun and its ranks (OpenMPI gives each rank its own process group)
    kill -9 $(pgrep -P $pid) $pid 2> /dev/null
    wait $pid 2> /dev/null; rc=$?
    if [ $rc -eq 0 ]; then finished=1
    elif [ $rc -eq 137 ]; then kills=$((kills + 1))
    else bad "run $i (R=$np, $how) exited $rc: $(cat "$T/k$i.err")"; break; fi
done
echo "kill loop: $i runs, $kills killed"
for np in 4 2; do
    rm -rf "$T/ck$np"; cp -r "$T/ck" "$T/ck$np"
    run $np $ck --resume "$T/ck$np" > "$T/final$np.jsonl" 2> "$T/final$np.err" || bad "final resume R=$np: $(cat "$T/final$np.err")"
    [ "$(hash_of "$T/final$np.jsonl")" = "$ref" ] && ok || bad "params_hash after kills and a resume at R=$np: $(hash_of "$T/final$np.jsonl") != $ref"
done
grep -h '"step":[0-9]*,"loss"' "$T"/k*.jsonl "$T"/final*.jsonl 2> /dev/null | grep -o '"step":[0-9]*,"loss":[^,]*' | sort -u > "$T/seen"
grep -o '"step":[0-9]*,"loss":[^,]*' "$T/straight.jsonl" | sort -u > "$T/want"
# every loss any run printed is the uninterrupted run's loss of that step
[ -z "$(comm -23 "$T/seen" "$T/want")" ] && ok || bad "losses after kills differ: $(comm -23 "$T/seen" "$T/want" | head -3)"

# ---- faults: one rank fails, every rank stops ------------------------------------------------
small="--layers 2 --dim 32 --heads 2 --seq 16 --batch 4 --threads 1 --steps 6 --eval-every 0 --sample 0 --json --no-calibrate"
# one error line (and no hang), non-zero exit; $1 must appear in it
one_error() {
    want=$1; shift
    start=$(date +%s)
    timeout 60 "$@" > "$T/out" 2> "$T/err"; rc=$?
    secs=$(( $(date +%s) - start ))
    n=$(grep -c '^remat: error: ' "$T/err")
    if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$n" -eq 1 ] && grep '^remat: error: ' "$T/err" | grep -q "$want"; then ok
    else bad "expected one error line with '$want' (rc=$rc, $n lines): $(cat "$T/err")"; fi
    echo "stopped in ${secs}s: $(grep '^remat: error: ' "$T/err")"
}
mkdir -p "$T/good" "$T/bad"
$PY - "$T" <<'PY'
import struct, sys
d = sys.argv[1]
def shard(path, toks):
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *([20240520, 1, len(toks)] + [0] * 253)))
        f.write(struct.pack("<%dH" % len(toks), *toks))
for k in range(3):
    toks = [(i * 7 + k * 13) % 200 for i in range(3000)]
    shard("%s/good/s_%02d.bin" % (d, k), toks)
    shard("%s/bad/s_%02d.bin" % (d, k), toks)
# rank 1's copy of the last shard is truncated
data = open("%s/bad/s_02.bin" % d, "rb").read()
open("%s/bad/s_02.bin" % d, "wb").write(data[:-100])
PY
one_error "rank 1: shard '.*s_02.bin' is .* truncated" mpirun -q --oversubscribe --bind-to none -np 1 "$R" train $small --vocab 256 --data "$T/good/s_*.bin" : -np 1 "$R" train $small --vocab 256 --data "$T/bad/s_*.bin"
# a NaN in one rank's gradient: every rank sees the global norm; rank 0 reports it once
one_error "step 3: non-finite gradient in qkvw at step 3" $MPI -np 2 "$R" train $small --debug-nan 3:qkvw:1
one_error "step 2: non-finite loss" $MPI -np 2 "$R" train $small --debug-nan 2:loss:1
# an allocation failure on rank 1 in step 2: its line, and the job ends
one_error "rank 1: step 2: out of memory" $MPI -np 2 "$R" train $small --debug-alloc-fail 2:3:1
# flag errors every rank meets alike: said once, by rank 0
one_error "not a multiple of --micro-batch 3 x 2 ranks; valid --micro-batch values for 2 ranks: 1, 2" $MPI -np 2 "$R" train $small --micro-batch 3
one_error "power-of-two" $MPI -np 3 "$R" train $small --batch 6
one_error "unknown flag" $MPI -np 2 "$R" train $small --no-such-flag
# a checkpoint written by 2 ranks with micro-batch 2 cannot continue at 4 ranks with batch 4
run 2 $small --micro-batch 2 --save "$T/lay" > /dev/null 2>&1 || bad "save for the layout check"
one_error "valid --micro-batch values for 4 ranks: 1" $MPI -np 4 "$R" train $small --resume "$T/lay" --steps 8

finish cli_parallel
