#!/bin/sh
# dp_bench.sh -- data parallelism on this machine (a benchmark, not a test):
#   A  mpirun -np 2 remat train --threads 1 --batch B --micro-batch B/2
#   B  remat train --threads 2 --batch B                (one micro-batch)
#   C  remat train --threads 2 --batch B --micro-batch B/2  (the same two
#      micro-batches accumulated on one rank: A's arithmetic, bit for bit)
# run interleaved (A B C A B C ...) at the S and 124M shapes; per run the
# median step, the median time in exchanges (comm) and adding gradients
# (reduce), the bytes a rank sends per step; per round A/B and A/C.  Then
# the alpha-beta prediction (`remat plan --net-bw --net-latency`, with
# this machine's figures from bench/comm_bench) against the measured
# comm_ms_median at R = 2 and R = 4 (4 ranks oversubscribe the 2 cores).
#
#   sh bench/dp_bench.sh [ROUNDS] [STEPS]      (defaults 3 and 5)
set -u
BUILD=${BUILD:-build}
R=$BUILD/remat
ROUNDS=${1:-3}
STEPS=${2:-5}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
MPI="mpirun -q --oversubscribe --bind-to none"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
common="--steps $STEPS --eval-every 0 --eval-batches 1 --sample 0 --json --no-calibrate"
S="--layers 6 --dim 256 --heads 8 --vocab 512 --seq 256 --batch 8"
M124="--layers 12 --dim 768 --heads 12 --vocab 50257 --seq 64 --batch 8"

line() { grep '"type":"summary"' "$1"; }
for shape in S M124; do
    eval "cfg=\$$shape"
    for r in $(seq 1 "$ROUNDS"); do
        $MPI -np 2 "$R" train $cfg $common --micro-batch 4 --threads 1 > "$OUT/$shape-A-$r" 2>&1
        "$R" train $cfg $common --threads 2 > "$OUT/$shape-B-$r" 2>&1
        "$R" train $cfg $common --micro-batch 4 --threads 2 > "$OUT/$shape-C-$r" 2>&1
    done
done
# comm at 4 ranks (b = 2) for the alpha-beta check
for shape in S M124; do
    eval "cfg=\$$shape"
    $MPI -np 4 "$R" train $cfg $common --micro-batch 2 --threads 1 > "$OUT/$shape-R4" 2>&1
done
$MPI -np 2 "$BUILD/bench/comm_bench" > "$OUT/ab" 2>&1
lat=$(sed -n 's/^latency_s \([^ ]*\) .*/\1/p' "$OUT/ab")
bw=$(sed -n 's/.*bw_bytes_per_s \([^ ]*\)$/\1/p' "$OUT/ab")
for shape in S M124; do
    eval "cfg=\$$shape"
    for np in 2 4; do
        "$R" plan $cfg --ranks $np --micro-batch $((8 / np)) --net-bw "$bw" --net-latency "$lat" --no-profile --json \
            --recompute none > "$OUT/$shape-plan$np" 2>/dev/null
    done
done
/usr/bin/python3 - "$OUT" "$ROUNDS" "$lat" "$bw" <<'PY'
import json, statistics, sys
out, rounds, lat, bw = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
def summary(path):
    for l in open(path):
        if '"type":"summary"' in l: return json.loads(l)
    raise SystemExit("no summary in %s: %s" % (path, open(path).read()[-400:]))
names = {"A": "mpirun -np 2, --threads 1, b=4", "B": "1 process, --threads 2, b=8", "C": "1 process, --threads 2, b=4"}
print("this machine's MPI: latency %.2f us, bandwidth %.2f GB/s (bench/comm_bench, 2 ranks)" % (lat * 1e6, bw / 1e9))
for shape in ("S", "M124"):
    print("\n%s, B=8 (%d interleaved rounds):" % ("S (L6 d256 H8 V512 T256)" if shape == "S" else "124M (L12 d768 H12 V50257 T64)", rounds))
    print("| run | step ms | comm ms | reduce ms | (comm+reduce)/step | MiB sent/step | step peak MiB | params_hash |")
    print("|---|---|---|---|---|---|---|---|")
    rows = {}
    for k in "ABC":
        s = [summary("%s/%s-%s-%d" % (out, shape, k, r)) for r in range(1, rounds + 1)]
        rows[k] = s
        step = statistics.median(x["step_ms_median"] for x in s)
        comm = statistics.median(x["comm_ms_median"] for x in s)
        red = statistics.median(x["reduce_ms_median"] for x in s)
        print("| %s | %.0f | %.1f | %.1f | %.1f%% | %.1f | %.0f | %s |" % (names[k], step, comm, red, 100 * (comm + red) / step,
              s[0]["comm_bytes_per_step"] / 2**20, s[0]["step_peak_bytes"] / 2**20, s[0]["params_hash"]))
    ab = [a["step_ms_median"] / b["step_ms_median"] for a, b in zip(rows["A"], rows["B"])]
    ac = [a["step_ms_median"] / c["step_ms_median"] for a, c in zip(rows["A"], rows["C"])]
    print("step-time ratio per round: A/B %s, A/C %s" % (" ".join("%.3f" % x for x in ab), " ".join("%.3f" % x for x in ac)))
    print("alpha-beta prediction against measurement (comm_ms_median of rank 0):")
    for np in (2, 4):
        p = json.load(open("%s/%s-plan%d" % (out, shape, np)))["parallel"]
        m = summary("%s/%s-R4" % (out, shape)) if np == 4 else rows["A"][0]
        meas = statistics.median(x["comm_ms_median"] for x in rows["A"]) if np == 2 else m["comm_ms_median"]
        print("  R=%d b=%d: predicted %.1f ms (%d exchanges, %.1f MiB), measured %.1f ms (%.1f MiB sent)" % (
            np, 8 // np, p["comm_ms_pred"], p["messages_per_step"], p["comm_bytes_per_step"] / 2**20, meas,
            m["comm_bytes_per_step"] / 2**20))
PY
